// Pristine skeletons from git's HEAD or from the copy a distribution ships (pristine.hpp).
#include "pipeline/pristine.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "sandbox/runner.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
RunOutcome run_git(const Project& project, const std::vector<std::string>& args, std::size_t cap) {
  RunSpec spec;
  spec.exe = "git";
  spec.args = {"-C", project.root.string()};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.isolate = false;
  spec.wall_s = 120;
  spec.output_cap = cap;
  return run_process(spec);
}

std::string head_commit(const Project& project) {
  // Its own repository only: git would otherwise find one in a folder above (a release unpacked
  // inside another checkout).
  std::error_code ec;
  if (!fs::exists(project.root / ".git", ec)) return "";
  RunOutcome head = run_git(project, {"rev-parse", "--verify", "-q", "HEAD"});
  std::string commit = head.out.substr(0, head.out.find('\n'));
  return head.started && head.exited && head.exit_code == 0 && commit.size() >= 7 ? commit : "";
}

void export_commit(const Project& project, const std::string& commit, const fs::path& dest,
                   const std::vector<std::string>& paths) {
  const fs::path tar = dest / ".export.tar";
  std::vector<std::string> args{"archive", "--format=tar", "-o", tar.string(), commit};
  if (!paths.empty()) {
    args.push_back("--");
    args.insert(args.end(), paths.begin(), paths.end());
  }
  RunOutcome archive = run_git(project, args);
  if (!archive.exited || archive.exit_code != 0)
    throw std::runtime_error(
        fmt::format("git archive {} failed: {}{}", commit, archive.out, archive.err));
  RunSpec untar;
  untar.exe = "tar";
  untar.args = {"-xf", tar.string(), "-C", dest.string()};
  untar.isolate = false;
  untar.wall_s = 120;
  RunOutcome x = run_process(untar);
  std::error_code ec;
  fs::remove(tar, ec);
  if (!x.exited || x.exit_code != 0)
    throw std::runtime_error("unpacking the export of " + commit + " failed: " + x.err);
}

fs::path pristine_root(const Project& project, const fs::path& work_dir) {
  std::error_code ec;
  if (fs::is_directory(project.root / kShippedSkeleton, ec)) return project.root / kShippedSkeleton;
  const std::string commit = head_commit(project);
  if (commit.empty())
    throw std::runtime_error(
        fmt::format("no pristine skeleton: {} is neither a git checkout with a commit nor a "
                    "release (which ships {}); "
                    "grade from a git checkout, or make a release with ./mgpu release",
                    project.root.string(), kShippedSkeleton.string()));
  const fs::path dir = work_dir / "pristine" / commit;
  if (fs::is_directory(dir, ec)) return dir;
  // One extraction at a time (batch workers, graders sharing a work folder), into a temporary
  // folder renamed when complete, so nobody ever sees half a copy.
  fs::create_directories(work_dir / "pristine");
  const int lock =
      ::open((work_dir / "pristine" / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{lock};
  if (fs::is_directory(dir, ec)) return dir;
  // Only what students edit: the solutions never land in a folder a build might see.
  const fs::path tmp = work_dir / "pristine" / ".extracting";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  export_commit(project, commit, tmp, {"chapters", "gpu_labs"});
  // Copies of older commits are of no further use.
  for (const auto& e : fs::directory_iterator(work_dir / "pristine", ec))
    if (e.path().filename().string()[0] != '.') fs::remove_all(e.path(), ec);
  fs::rename(tmp, dir, ec);
  if (ec)
    throw std::runtime_error("cannot place the pristine copy at " + dir.string() + ": " +
                             ec.message());
  return dir;
}

fs::path pristine_dir(const Project& project, const fs::path& root, const fs::path& rel) {
  std::error_code ec;
  if (fs::is_directory(root / rel, ec)) return root / rel;
  const std::string first = rel.begin() == rel.end() ? "" : rel.begin()->string();
  if (first == "chapters" || first == "gpu_labs")
    throw std::runtime_error(
        fmt::format("the pristine copy ({}) has no {}: commit it, or make the release again",
                    root.string(), rel.generic_string()));
  return project.root / rel;
}

}  // namespace mgpu::grade
