// release, submit and gradescope-bundle. Copies are made file by file from the list of project
// files, so nothing built, ignored or private slips into what students receive.
#include "distribute.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "runner.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

bool excluded(const fs::path& rel, bool keep_solutions) {
  auto first = rel.begin() == rel.end() ? std::string() : rel.begin()->string();
  if (first == "build" || first == ".git" || first == ".cache") return true;
  if (!keep_solutions && first == "solutions") return true;
  std::string s = rel.generic_string();
  // Chaffs and wheats are edits of the reference and correct alternatives: instructors only.
  if (!keep_solutions && (s.rfind("autograder/chaff/", 0) == 0 || s.rfind("autograder/wheat/", 0) == 0)) return true;
  return s.rfind("autograder/private/", 0) == 0;
}

void run_or_throw(const std::string& exe, const std::vector<std::string>& args, const fs::path& cwd, const std::string& what) {
  RunSpec spec;
  spec.exe = exe;
  spec.args = args;
  spec.isolate = false;
  spec.cwd = cwd;
  spec.wall_s = 600;
  spec.merge_output = true;
  RunOutcome o = run_process(spec);
  if (!o.started) throw std::runtime_error(fmt::format("{}: {} (is {} installed?)", what, o.start_error, exe));
  if (!o.exited || o.exit_code != 0) throw std::runtime_error(fmt::format("{} failed:\n{}", what, o.out));
}

void copy_tree_files(const Project& project, const fs::path& out, bool keep_solutions, std::size_t& count) {
  for (const auto& rel : project_files(project)) {
    if (excluded(rel, keep_solutions)) continue;
    fs::path src = project.root / rel;
    if (!fs::is_regular_file(fs::symlink_status(src))) continue;
    fs::create_directories((out / rel).parent_path());
    fs::copy_file(src, out / rel, fs::copy_options::overwrite_existing);
    fs::permissions(out / rel, fs::status(src).permissions());
    ++count;
  }
}

const char* kSetup = R"SH(#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image: install the toolchain, build the
# reference solutions and the grader, and warm the student build cache with the skeleton.
set -euo pipefail
cd /autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends cmake ninja-build g++ ccache doctest-dev libeigen3-dev \
  nlohmann-json3-dev libcli11-dev libfmt-dev libzip-dev zip unzip bubblewrap python3-pip
# The project needs CMake >= 3.25; older images get it from PyPI.
have=$(cmake --version 2>/dev/null | awk 'NR==1 {print $3}')
if [ -z "$have" ] || [ "$(printf '%s\n' 3.25 "$have" | sort -V | head -n1)" != 3.25 ]; then
  python3 -m pip install -q 'cmake>=3.25' || python3 -m pip install -q --break-system-packages 'cmake>=3.25'
  hash -r
fi
cmake -S . -B build/solution -G Ninja -DMGPU_IMPL=solution -DMGPU_CUDA=OFF -DCMAKE_BUILD_TYPE=Release
cmake --build build/solution --target mgpu-grade
# A first grade of the skeleton builds every reference case program and fills the caches.
build/solution/bin/mgpu-grade grade chapters $(cat autograder/private/grade-args 2>/dev/null) >/dev/null || true
)SH";

const char* kRun = R"SH(#!/usr/bin/env bash
# Gradescope runs this for every submission; the submission lies in /autograder/submission.
cd /autograder/source
mkdir -p /autograder/results
# Cases run as user nobody, who must be able to reach the case programs.
chmod o+x /autograder /autograder/source 2>/dev/null || true
chmod -R o+rX /autograder/source/build 2>/dev/null || true
build/solution/bin/mgpu-grade grade /autograder/submission $(cat autograder/private/grade-args 2>/dev/null) \
  --gradescope /autograder/results/results.json
)SH";

}  // namespace

std::vector<fs::path> project_files(const Project& project) {
  std::vector<fs::path> files;
  if (fs::exists(project.root / ".git")) {
    RunSpec spec;
    spec.exe = "git";
    spec.args = {"-C", project.root.string(), "ls-files", "-z", "--cached", "--others", "--exclude-standard"};
    spec.isolate = false;
    spec.wall_s = 60;
    spec.output_cap = 64 << 20;
    RunOutcome o = run_process(spec);
    if (o.started && o.exited && o.exit_code == 0) {
      std::size_t start = 0;
      for (std::size_t i = 0; i < o.out.size(); ++i)
        if (o.out[i] == '\0') {
          files.emplace_back(o.out.substr(start, i - start));
          start = i + 1;
        }
      std::set<fs::path> unique(files.begin(), files.end());
      files.assign(unique.begin(), unique.end());
      return files;
    }
  }
  for (auto it = fs::recursive_directory_iterator(project.root); it != fs::recursive_directory_iterator(); ++it) {
    fs::path rel = fs::relative(it->path(), project.root);
    if (it->is_directory() && excluded(rel, true)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(rel);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::size_t write_release(const Project& project, const fs::path& out) {
  if (fs::exists(out) && !fs::is_empty(out))
    throw std::runtime_error(fmt::format("release: {} exists and is not empty; choose a new folder", out.string()));
  std::size_t count = 0;
  copy_tree_files(project, out, false, count);
  return count;
}

std::vector<std::string> write_submission(const Rubric& rubric, const fs::path& from, const fs::path& out) {
  std::vector<std::string> files;
  for (const auto& ch : rubric.chapters)
    for (const auto& f : ch.files) {
      fs::path p = from / ch.name / f;
      if (fs::is_regular_file(p)) files.push_back((fs::path(from.filename()) / ch.name / f).generic_string());
    }
  // GPU lab files sit beside the chapters folder in a checkout: gpu_labs/<lab>/<file>.
  if (rubric.gpu_labs)
    for (const auto& [lab, lab_files] : rubric.gpu_labs->files)
      for (const auto& f : lab_files)
        if (fs::is_regular_file(from.parent_path() / "gpu_labs" / lab / f))
          files.push_back((fs::path("gpu_labs") / lab / f).generic_string());
  if (files.empty())
    throw std::runtime_error(fmt::format("submit: no editable chapter files under {}; run it in your checkout", from.string()));
  fs::path abs_out = fs::absolute(out);
  std::error_code ec;
  fs::remove(abs_out, ec);
  std::vector<std::string> args{"-q", "-X", abs_out.string()};
  args.insert(args.end(), files.begin(), files.end());
  run_or_throw("zip", args, fs::absolute(from).parent_path(), "zip");
  return files;
}

void write_gradescope_bundle(const Project& project, const fs::path& out_zip, const std::vector<fs::path>& extra_rubrics,
                             const std::vector<fs::path>& cases_dirs, const fs::path& scratch) {
  if (!project.has_solutions())
    throw std::runtime_error("gradescope-bundle: solutions/ is missing; build the bundle from the instructor's checkout");
  std::error_code ec;
  fs::remove_all(scratch, ec);
  std::size_t count = 0;
  copy_tree_files(project, scratch, true, count);
  std::string args;
  for (std::size_t i = 0; i < extra_rubrics.size(); ++i) {
    fs::path dst = fmt::format("autograder/private/rubric-{}.json", i);
    fs::create_directories((scratch / dst).parent_path());
    fs::copy_file(extra_rubrics[i], scratch / dst);
    args += " --rubric " + dst.string();
  }
  for (std::size_t i = 0; i < cases_dirs.size(); ++i) {
    fs::path dst = fmt::format("autograder/private/cases-{}", i);
    fs::create_directories(scratch / dst);
    fs::copy(cases_dirs[i], scratch / dst, fs::copy_options::recursive);
    args += " --cases-dir " + dst.string();
  }
  if (!args.empty()) write_text(scratch / "autograder/private/grade-args", args + "\n");
  write_text(scratch / "setup.sh", kSetup);
  write_text(scratch / "run_autograder", kRun);
  fs::permissions(scratch / "setup.sh", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                            fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(scratch / "run_autograder", fs::status(scratch / "setup.sh").permissions());
  fs::path abs_out = fs::absolute(out_zip);
  fs::remove(abs_out, ec);
  run_or_throw("zip", {"-q", "-r", "-X", abs_out.string(), "."}, scratch, "zip");
}

}  // namespace mgpu::grade
