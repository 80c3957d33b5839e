// Reading a submission without trusting it: a zip is extracted in-process (libzip) and a folder is
// checked, both against the same rules, so no entry can point outside the submission, stand for a
// device or a link, or flood the disk. A submission that breaks a rule is rejected as a whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/model.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// Caps on what a submission may hold. The manifests list a few source files of some KiB each,
/// so these leave a wide margin for honest uploads (with build leftovers) and stop zip bombs.
inline constexpr std::uint64_t kMaxSubmissionBytes = 16u << 20;     ///< all files together
inline constexpr std::size_t kMaxSubmissionEntries = 200;           ///< files and folders together
inline constexpr std::uint64_t kMaxSubmissionFileBytes = 1u << 20;  ///< any one file

/// A submission that breaks a rule of unpacking. what() names the offending entry and the fix;
/// the grade turns it into status rejected-submission.
class RejectedSubmission : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Extracts the zip `archive` into `dest` (created; emptied first). Only folders and regular files
/// are written, never outside dest. Throws RejectedSubmission for a symlink, hard link, device or
/// other special entry, an absolute or `..` path, an entry over kMaxSubmissionFileBytes, more than
/// kMaxSubmissionEntries entries or kMaxSubmissionBytes in all (counted while decompressing, so a
/// header that lies about sizes does not help); std::runtime_error when the file is not a zip.
void extract_zip(const std::filesystem::path& archive, const std::filesystem::path& dest);

/// Checks a folder submission by the same rules without reading any file: throws
/// RejectedSubmission for a symlink (even one that points inside), a special file, a file with
/// more than one hard link, or a folder over the caps.
void check_submission_folder(const std::filesystem::path& dir);

/// The grade of a rejected submission: every case of `chapters` is rejected-submission with 0
/// points (its maximum still counts), the reason is `why`, and `why` is the grade's first note.
/// `g` keeps its submission name, seed and timings.
Grade rejected_grade(Grade g, const std::vector<const ChapterSpec*>& chapters,
                     const std::string& why);

}  // namespace mgpu::grade
