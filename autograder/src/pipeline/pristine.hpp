// The untouched starting files (skeletons) that fill whatever a submission leaves out. They come
// from what was committed, never from the working chapters/: in an instructor's checkout a
// chapter may hold finished code, and a submission with one file must not inherit the rest.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/build.hpp"
#include "sandbox/runner.hpp"

namespace mgpu::grade {

/// Runs git -C <project root> args (not isolated, 120 s at most, output capped at cap bytes).
RunOutcome run_git(const Project& project, const std::vector<std::string>& args,
                   std::size_t cap = 1 << 20);

/// The commit HEAD names, or "" when the project is not a git checkout with a commit.
std::string head_commit(const Project& project);

/// Writes the files of commit under paths (all when empty) into dest, an existing folder, as
/// git stores them. Throws when git fails.
void export_commit(const Project& project, const std::string& commit,
                   const std::filesystem::path& dest, const std::vector<std::string>& paths = {});

/// Where this project keeps its pristine copy: a release or a Gradescope bundle ships one in
/// autograder/skeleton/ (same layout as the repository); a git checkout has HEAD, extracted once
/// per commit into work_dir/pristine/<commit>/. Throws, naming the fix, when there is neither.
std::filesystem::path pristine_root(const Project& project, const std::filesystem::path& work_dir);

/// The pristine copy of the project folder rel (e.g. chapters/11_2_data_parallel). Folders
/// students never edit (a test fixture's skeleton) may come from the project itself when the
/// shipped copy leaves them out; chapters/ and gpu_labs/ never do.
std::filesystem::path pristine_dir(const Project& project, const std::filesystem::path& root,
                                   const std::filesystem::path& rel);

/// The folder a release or bundle ships its pristine copy in, relative to the project root.
inline const std::filesystem::path kShippedSkeleton = "autograder/skeleton";

}  // namespace mgpu::grade
