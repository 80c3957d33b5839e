// The hints beside the exercises and the record of which were opened: one parser of hints.md
// and one reader and writer of a record line, shared by `./mgpu hint` (hint_main.cpp) and the
// grader's report of the hints a submission had (hints.hpp).
//
// A hints.md holds one "## <id>: <title>" section per TODO(<where> <id>) of the folder's skeleton
// files, each with "### 1" (the idea), "### 2" (the shape of the solution) and "### 3" (a pointer
// to the concept, or to the visible test that isolates the step).
// Lines inside ``` fences are text, never headings; anything before the first section is a
// preamble that is never shown.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mgpu::grade {

/// Where the record lies, relative to the checkout's root and to a submission's top folder.
inline const std::filesystem::path kHintsRecord = ".mgpu/hints.tsv";

/// One "## id: title" section of a hints.md.
struct HintSection {
  std::string id;
  std::string title;
  std::array<std::string, 3> levels;  ///< text of "### 1" to "### 3", blank lines around trimmed
};

/// A parsed hints.md: its sections in file order, and what is wrong with it (a section missing a
/// level, an unknown level, a repeated id), one line each, in the file's order.
struct HintBook {
  std::vector<HintSection> sections;
  std::vector<std::string> problems;
  /// The section with this id, or nullptr.
  const HintSection* find(const std::string& id) const;
};

/// Parses the text of a hints.md.
HintBook parse_hint_book(const std::string& text);

/// The TODO ids of a folder's skeleton files (*.cpp, *.cu, in name order), first appearance first:
/// the last word inside each TODO(...).
std::vector<std::string> skeleton_todo_ids(const std::filesystem::path& folder);

/// The student's copy (`./mgpu release`) carries each hints.md sealed, as this file beside the
/// skeletons: the levels stay out of plain sight, so that they open in order through `./mgpu hint`
/// and each opening lands in the record. Sealing hides text from `cat` and `grep`; it is not
/// encryption, and nothing graded depends on it.
inline const char* const kSealedHints = "hints.sealed";

/// hints.md's text in the sealed form, and back; unseal_hints throws on a file that is not one.
std::string seal_hints(const std::string& text);
std::string unseal_hints(const std::string& sealed);

/// The text of a folder's hints: its hints.md, else its sealed hints, else nothing.
std::optional<std::string> read_hint_text(const std::filesystem::path& folder);

/// What is wrong between a folder's skeleton TODOs and its hints.md, one line each, naming the
/// file to fix as `shown` (e.g. "chapters/11_2_data_parallel/hints.md"); empty when they agree.
/// Also every NotImplemented("...") of the folder's sources whose text is not the words of one of
/// its TODOs ("11.2 ring_all_gather"), named by file and line: the name an unfinished exercise
/// prints is the one `./mgpu hint` must accept.
std::vector<std::string> hint_drift(const std::filesystem::path& folder, const std::string& shown);

/// One line of the record: which hint was opened, and when.
struct HintRecordLine {
  std::string chapter;  ///< the exercise folder's name (11_2_data_parallel, gpu_labs/tp_ffn)
  std::string todo;     ///< the TODO id
  int level = 0;        ///< 1, 2 or 3
  std::string time;     ///< UTC, ISO 8601 (2026-12-01T18:00:00Z)
};

/// "chapter TAB todo TAB level TAB time": the record's line, without the newline.
std::string format_record_line(const HintRecordLine& line);

/// The line's fields, or nothing when it names no chapter, TODO and level 1 to 3.
std::optional<HintRecordLine> parse_record_line(const std::string& line);

}  // namespace mgpu::grade
