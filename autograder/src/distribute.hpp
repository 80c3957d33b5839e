// What leaves the instructor's checkout: the student distribution (release), a student's upload
// (submit), and the Gradescope autograder bundle.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "build.hpp"
#include "rubric.hpp"

namespace mgpu::grade {

/// The repository's files (tracked and untracked-but-not-ignored when it is a git checkout),
/// relative to the root, without build/ and .git/.
std::vector<std::filesystem::path> project_files(const Project& project);

/// Writes the student distribution to out: the repository without solutions/ and without
/// autograder/private/. out must not exist or be empty. Returns the number of files written.
std::size_t write_release(const Project& project, const std::filesystem::path& out);

/// Zips the rubric's manifest files found under from (a chapters/ folder) into out.
/// Returns the files included, relative to from's parent.
std::vector<std::string> write_submission(const Rubric& rubric, const std::filesystem::path& from, const std::filesystem::path& out);

/// Writes the Gradescope autograder zip: the repository (solutions included), private rubrics
/// and cases under autograder/private/, setup.sh and run_autograder at the top.
void write_gradescope_bundle(const Project& project, const std::filesystem::path& out_zip,
                             const std::vector<std::filesystem::path>& extra_rubrics,
                             const std::vector<std::filesystem::path>& cases_dirs, const std::filesystem::path& scratch);

}  // namespace mgpu::grade
