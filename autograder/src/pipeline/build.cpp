// Driving CMake on the staged submission (pipeline/stage.cpp put its files in place): its folder
// claimed, its trees configured, its targets built. Every step goes through run_process with a
// wall-clock limit, so a pathological submission cannot hang the compiler step either.
#include "pipeline/build.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "sandbox/runner.hpp"
#include "sandbox/sandbox.hpp"
#include "util.hpp"

#ifndef MGPU_SOURCE_DIR
#error "MGPU_SOURCE_DIR must be defined by the build"
#endif

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

std::vector<std::pair<std::string, std::string>> build_env(const Project& p) {
  // ccache, for the grader's own trees (student builds run without it): paths relative to the
  // root and the working folder not hashed, so trees in different folders share objects.
  return {{"CCACHE_BASEDIR", p.root.string()}, {"CCACHE_NOHASHDIR", "1"}};
}

const char* const kConfigureStamp = "mgpu-grade-configure.txt";
const char* const kTrustedLine = "# trusted: the instructor's proof\n";

// Whether `tree` was configured for a proof (TreeConfig::trusted); the grader writes the stamp.
bool is_trusted_tree(const fs::path& tree) {
  std::error_code ec;
  const fs::path stamp = tree / kConfigureStamp;
  return fs::exists(stamp, ec) && read_text(stamp).find(kTrustedLine) != std::string::npos;
}

// The grader's ccache folder, made if missing; empty when there is no ccache.
fs::path compiler_cache_dir() {
  static const fs::path dir = [] {
    RunSpec spec;
    spec.exe = "ccache";
    spec.args = {"--get-config", "cache_dir"};
    spec.isolate = false;
    spec.wall_s = 10;
    const RunOutcome o = run_process(spec);
    std::string out = o.exited && o.exit_code == 0 ? o.out : "";
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    std::error_code ec;
    if (out.empty() || !fs::path(out).is_absolute() || (!fs::create_directories(out, ec) && ec))
      return fs::path();
    return fs::path(out);
  }();
  return dir;
}

// The trusted tree a grading tree links from (TreeConfig::link_from), or empty for a whole tree.
fs::path linked_from(const fs::path& tree) { return cache_value(tree, "MGPU_GRADE_LINK_FROM"); }

// What a grading tree compiles from besides the submission: the build's CMake files, the chapters'
// headers and skeletons, the runtime's headers, the test support its chapters' test targets name,
// and the toy chapters of the grader's own tests. No case source, no grader, no tool.
const std::vector<fs::path> kGradingTreeSources{"CMakeLists.txt",
                                                "cmake",
                                                "chapters",
                                                "runtime/include",
                                                "testing",
                                                "autograder/tests/fixtures/toy/chapters.cmake",
                                                "autograder/tests/fixtures/toy/include"};

// The project's files a student build may read. A grading tree: kGradingTreeSources. A whole tree
// (the GPU labs', the visible tests'): the top-level folders of the course and its top CMake
// files, less git's data and other hidden entries, the build trees (`build/`: the reference's
// results and objects, other submissions), the reference, and any folder that holds a copy of
// the project (an unpacked release or Gradescope bundle: its own solutions/ or
// autograder/private/); under autograder/, not the chaffs, wheats or private files. Everything
// else in the project (a bundle's zip, a root-only note) is out of the build's view.
std::vector<fs::path> build_visible_sources(const Project& p, bool grading_tree) {
  std::vector<fs::path> shown;
  std::error_code ec;
  if (grading_tree) {
    for (const auto& rel : kGradingTreeSources)
      if (fs::exists(p.root / rel, ec)) shown.push_back(p.root / rel);
    return shown;
  }
  auto keep = [&](const fs::directory_entry& e, const std::set<std::string>& dropped) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.' || dropped.count(name) || e.is_symlink(ec)) return false;
    if (e.is_regular_file(ec))
      return name == "CMakeLists.txt" || name == "CMakePresets.json" || name == "rubric.json";
    if (!e.is_directory(ec)) return false;
    return !fs::exists(e.path() / "solutions", ec) &&
           !fs::exists(e.path() / "autograder" / "private", ec) &&
           !fs::exists(e.path() / "source" / "autograder", ec);
  };
  for (const auto& e : fs::directory_iterator(p.root, ec)) {
    if (!keep(e, {"build", "solutions"})) continue;
    if (e.path().filename() != "autograder") {
      shown.push_back(e.path());
      continue;
    }
    for (const auto& a : fs::directory_iterator(e.path(), ec))
      if (keep(a, {"chaff", "wheat", "private"})) shown.push_back(a.path());
  }
  return shown;
}

// The trusted archives a grading tree's case programs link (cmake/grade_tree.cmake): in view of
// its link step only.
std::vector<fs::path> link_inputs(const fs::path& trusted_tree) {
  std::vector<fs::path> files{trusted_tree / "runtime" / "libmgpu_runtime.a",
                              trusted_tree / "autograder" / "libmgpu_case_harness.a"};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(trusted_tree / "cases", ec))
    if (e.path().extension() == ".a") files.push_back(e.path());
  return files;
}

const std::vector<fs::path> kSystemFolders{"/usr", "/lib",  "/lib64", "/lib32",
                                           "/bin", "/sbin", "/etc",   "/opt"};

// Folders of packages the grader's tree was configured with (a library file stands for its
// folder), outside the system folders (bound already, read-only: no mount point can be made in
// them).
std::vector<fs::path> package_folders(const Project& p) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const char* var : {"CMAKE_PREFIX_PATH", "MGPU_NCCL_INCLUDE", "MGPU_NCCL_LIBRARY"}) {
    std::istringstream items(cache_value(p.own_tree, var));
    for (std::string item; std::getline(items, item, ';');) {
      fs::path dir = fs::is_regular_file(item, ec) ? fs::path(item).parent_path() : fs::path(item);
      const bool system =
          std::any_of(kSystemFolders.begin(), kSystemFolders.end(), [&](const fs::path& s) {
            const auto rel = dir.lexically_relative(s);
            return !rel.empty() && *rel.begin() != "..";
          });
      if (dir.is_absolute() && !system) out.push_back(dir);
    }
  }
  return out;
}

// A student tree is compiled where it can read only what building needs: with namespaces, a
// mount namespace holding, read-only, the system (kSystemFolders), the course's sources a build
// reads (build_visible_sources) and the package folders; its own folder (staged sources and
// tree) is the one writable place, /tmp is small and empty, /dev holds only /dev/null (a
// `#include "/dev/zero"` fails at once), and there is no home, so neither the compiler cache (it
// holds the reference's objects), nor running cases' folders, nor any other file of the grader's
// user is in view.
void hide_reference_from(RunSpec& spec, const Project& p, const fs::path& tree, bool grading_tree,
                         const std::vector<fs::path>& also_shown) {
  const fs::path own = tree.parent_path();  // <work>/student/<name>: src/ and build/
  std::vector<std::string> cmd{"/usr/bin/bwrap", "--die-with-parent",
                               "--unshare-net",  "--unshare-ipc",
                               "--unshare-pid",  "--unshare-uts",
                               "--proc",         "/proc",
                               "--tmpfs",        "/dev",
                               "--dev-bind",     "/dev/null",
                               "/dev/null",      "--symlink",
                               "/proc/self/fd",  "/dev/fd",
                               "--size",         std::to_string(1ull << 30),
                               "--tmpfs",        "/tmp"};
  for (const auto& [name, fd] : {std::pair{"stdin", 0}, std::pair{"stdout", 1}, {"stderr", 2}})
    cmd.insert(cmd.end(),
               {"--symlink", "/proc/self/fd/" + std::to_string(fd), std::string("/dev/") + name});
  std::vector<fs::path> shown = kSystemFolders;
  for (const auto& s : build_visible_sources(p, grading_tree)) shown.push_back(s);
  for (const auto& s : package_folders(p)) shown.push_back(s);
  shown.insert(shown.end(), also_shown.begin(), also_shown.end());
  for (const fs::path& dir : shown)
    cmd.insert(cmd.end(), {"--ro-bind-try", dir.string(), dir.string()});
  fs::path program = spec.exe;  // bwrap does not search PATH
  if (program.is_relative())
    for (std::string_view path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin";
         !path.empty();) {
      const auto colon = path.find(':');
      fs::path candidate = fs::path(path.substr(0, colon)) / spec.exe;
      if (::access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
      path = colon == std::string_view::npos ? "" : path.substr(colon + 1);
    }
  cmd.insert(cmd.end(), {"--bind", own.string(), own.string()});
  // A proof is the instructor's code: it may read and fill the compiler cache, so that the
  // hundred-odd proofs of `mgpu-grade chaff` do not each compile every file from scratch.
  const fs::path cache = is_trusted_tree(tree) ? compiler_cache_dir() : fs::path();
  if (!cache.empty()) {
    cmd.insert(cmd.end(), {"--bind", cache.string(), cache.string()});
    spec.env.emplace_back("CCACHE_DIR", cache.string());
  } else {
    spec.env.emplace_back("CCACHE_DISABLE",
                          "1");  // the cache is out of view, and not a student's to fill
  }
  cmd.push_back(program.string());
  spec.args.insert(spec.args.begin(), cmd.begin() + 1, cmd.end());
  spec.exe = cmd.front();
  spec.env.emplace_back("HOME", own.string());
  spec.env.emplace_back("TMPDIR", "/tmp");
}

// The same view for a build in the uid sandbox, enforced with Landlock where the kernel has it
// (file modes alone otherwise: the reference is sealed to the grader's user).
FsView build_view(const Project& p, const fs::path& tree, bool grading_tree,
                  const std::vector<fs::path>& also_shown) {
  FsView v;
  v.read_only = kSystemFolders;
  for (const auto& s : build_visible_sources(p, grading_tree)) v.read_only.push_back(s);
  for (const auto& s : package_folders(p)) v.read_only.push_back(s);
  v.read_only.insert(v.read_only.end(), also_shown.begin(), also_shown.end());
  v.read_only.push_back("/proc");
  v.read_write = {tree.parent_path()};
  v.devices = {"/dev/null"};
  return v;
}

// Every process of a student build preloads mgpu_hide_unreadable (src/sandbox/hide_unreadable.cpp),
// so `__has_include` and `#include` of a file it may not read (out of its view, or not its uid's
// to read) read as of an absent one: the compiler would otherwise say "Permission denied", or
// fail the build naming the file, and tell the submission the file exists. The build's uid cannot
// reach the grader's tree, so the library is copied into the submission's folder, which is in its
// view in both sandboxes. Returns why not, or "".
std::string preload_hide_unreadable(RunSpec& spec, const fs::path& own) {
  const fs::path lib = own / "mgpu-hide-unreadable.so";
  const fs::path fresh = own / "mgpu-hide-unreadable.so.new";
  std::error_code ec;
  // A new copy replaces the old by rename: a process of an earlier step that still maps it keeps
  // its own.
  fs::copy_file(MGPU_HIDE_UNREADABLE_LIB, fresh, fs::copy_options::overwrite_existing, ec);
  if (!ec)
    fs::permissions(fresh, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read,
                    fs::perm_options::replace, ec);
  if (!ec) fs::rename(fresh, lib, ec);
  if (ec)
    return fmt::format(
        "cannot copy the grader's {} to {} ({}); build it: cmake --build <the grader's tree> "
        "--target mgpu-grade",
        MGPU_HIDE_UNREADABLE_LIB, lib.string(), ec.message());
  spec.env.emplace_back("LD_PRELOAD", lib.string());
  return {};
}

// Limits of every process of a student build: a compiler that reads an endless file or writes
// an endless object stops at them (bounded either way, even where /dev/zero is in view).
constexpr std::uint64_t kBuildMemoryBytes = 3ull << 30;
constexpr std::uint64_t kBuildFileBytes = 512ull << 20;

// Runs a configure or build of a student tree where it sees only what it compiles (above), as a
// leased uid that owns only the submission's folder while it runs (when the grader is root, in
// both sandboxes: a root-only file is unreadable even in view). Root owns the folder again
// afterwards, so later cases, whatever their uid, cannot read it. A proof's build (the
// instructor's code, TreeConfig::trusted) keeps the grader's user, for the compiler cache, and so
// does a link step (BuildStep::link), which alone sees the trusted archives.
RunOutcome run_student_build(RunSpec spec, const Project& p, const fs::path& tree, BuildStep step,
                             const fs::path& link_from) {
  const SandboxKind kind = sandbox().kind;
  if (kind != SandboxKind::namespaces && kind != SandboxKind::uid) return run_process(spec);
  const fs::path own = tree.parent_path();  // <work>/student/<name>: src/ and build/
  RunOutcome refused;
  refused.start_error = preload_hide_unreadable(spec, own);
  if (!refused.start_error.empty()) return refused;
  spec.unisolated_memory_bytes = kBuildMemoryBytes;
  spec.unisolated_file_bytes = kBuildFileBytes;
  const bool link = step == BuildStep::link;
  std::vector<fs::path> archives;
  if (link) archives = link_inputs(link_from);
  const bool drop =
      ::geteuid() == 0 && !link && !(kind == SandboxKind::namespaces && is_trusted_tree(tree));
  std::optional<UidLease> lease;
  if (drop) {
    lease.emplace();
    if (!lease->held()) {
      RunOutcome o;
      o.start_error = "every case uid is in use (too many builds and cases at once); lower --jobs";
      return o;
    }
    chown_tree(own, lease->uid());
    spec.run_as = lease->uid();
  }
  if (kind == SandboxKind::namespaces) {
    hide_reference_from(spec, p, tree, !link_from.empty(), archives);
  } else {
    std::error_code ec;
    fs::create_directories(own / "tmp", ec);
    if (drop) (void)::chown((own / "tmp").c_str(), lease->uid(), static_cast<gid_t>(lease->uid()));
    spec.view = build_view(p, tree, !link_from.empty(), archives);
    spec.env.emplace_back("CCACHE_DISABLE",
                          "1");  // the grader's compiler cache is not the build uid's to write
    spec.env.emplace_back("HOME", own.string());
    spec.env.emplace_back("TMPDIR", (own / "tmp").string());
  }
  RunOutcome o = run_process(spec);
  if (lease) {
    kill_uid(lease->uid());
    chown_tree(own, 0);
  }
  return o;
}

bool is_student_tree(const fs::path& tree) {
  std::error_code ec;
  const fs::path stamp = tree / kConfigureStamp;
  return fs::exists(stamp, ec) &&
         read_text(stamp).find("-DMGPU_IMPL=student\n") != std::string::npos;
}

}  // namespace

bool Project::has_solutions() const { return fs::is_directory(root / "solutions"); }

Project this_project() {
  Project p;
  p.root = MGPU_SOURCE_DIR;
  p.own_tree = MGPU_BINARY_DIR;
  p.own_is_solution = std::string(MGPU_IMPL_NAME) == "solution";
  return p;
}

namespace {

// The outputs of `tree` that ninja's dependency log says were compiled from a file under `staged`
// (or "../src/", the same folder as the compiler saw it from the tree). Ninja keeps the compiler's
// dependency files in that log and deletes them, so the log is where they are.
std::vector<fs::path> compiled_from(const fs::path& tree, const std::string& staged) {
  std::vector<fs::path> found;
  std::error_code ec;
  if (!fs::exists(tree / ".ninja_deps", ec)) return found;
  RunSpec spec;
  spec.exe = "ninja";
  spec.args = {"-C", tree.string(), "-t", "deps"};
  spec.isolate = false;
  spec.wall_s = 120;
  spec.output_cap = 256ull << 20;
  const RunOutcome o = run_process(spec);
  std::istringstream in(o.out);
  std::string target;  // the output whose dependencies the indented lines below it list
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      target = line.substr(0, line.find(": #deps"));
      continue;
    }
    const std::string dep = line.substr(line.find_first_not_of(' '));
    if (!target.empty() && (dep.rfind(staged, 0) == 0 || dep.rfind("../src/", 0) == 0)) {
      found.push_back(tree / target);
      target.clear();  // listed once
    }
  }
  return found;
}

}  // namespace

void claim_student_folder(const fs::path& base, const std::string& occupant, bool trusted) {
  const fs::path stamp = base / "occupant";
  std::error_code ec;
  if (fs::exists(stamp, ec) && read_text(stamp) == occupant) return;
  // One proof after another in a slot: only the edited files differ, so only they recompile.
  // Never when a student had the tree: no object of a submission serves another.
  if (trusted && is_trusted_tree(base / "build")) {
    write_if_changed(stamp, occupant);
    return;
  }
  fs::remove_all(base / "src" / "unzipped", ec);
  const std::string staged = (base / "src").string() + "/";
  for (const char* name : {"build", "build-gpu"}) {
    const fs::path tree = base / name;
    std::vector<fs::path> doomed = compiled_from(tree, staged);
    for (auto it = fs::recursive_directory_iterator(tree, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
      const fs::path& f = it->path();
      const std::string file = f.filename().string();
      if (f.parent_path().filename() == "bin" || file.ends_with(".a") || file.ends_with(".so"))
        doomed.push_back(f);
    }
    for (const auto& f : doomed) fs::remove(f, ec);
  }
  fs::create_directories(base, ec);
  write_if_changed(stamp, occupant);
}

std::string cache_value(const fs::path& tree, const std::string& name) {
  std::ifstream in(tree / "CMakeCache.txt");
  for (std::string line; std::getline(in, line);) {
    // NAME:TYPE=value
    const auto colon = line.find(':'), eq = line.find('=');
    if (colon != std::string::npos && eq != std::string::npos && colon < eq &&
        line.compare(0, colon, name) == 0 && colon == name.size())
      return line.substr(eq + 1);
  }
  return "";
}

namespace {

// The CMake command line that configures cfg's tree: a whole or grading tree, with CUDA (the GPU
// labs) or without.
std::vector<std::string> configure_args(const TreeConfig& cfg, const Project& project) {
  const fs::path& gpu_student_dir = cfg.gpu_student_dir;
  std::vector<std::string> args{
      "-S", project.root.string(), "-B", cfg.dir.string(), "-G", "Ninja", "-DMGPU_IMPL=" + cfg.impl,
      gpu_student_dir.empty() ? "-DMGPU_CUDA=OFF" : "-DMGPU_CUDA=ON",
      // -O2 as in the project's default build (GCC 12's -O3 warns falsely in some headers)
      "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG",
      // A warning in course code must never fail a student's grade
      "-DMGPU_WERROR=OFF"};
  // Packages where the grader's own tree found them (a GPU machine's carried header libraries,
  // NCCL from a wheel): a tree configured here must not look elsewhere, or fail to find them.
  for (const char* var : {"CMAKE_PREFIX_PATH", "MGPU_NCCL_INCLUDE", "MGPU_NCCL_LIBRARY"})
    if (std::string v = cache_value(project.own_tree, var); !v.empty())
      args.push_back(fmt::format("-D{}={}", var, v));
  if (!cfg.student_dir.empty()) args.push_back("-DMGPU_STUDENT_DIR=" + cfg.student_dir.string());
  if (!gpu_student_dir.empty())
    args.push_back("-DMGPU_GPU_STUDENT_DIR=" + fs::absolute(gpu_student_dir).string());
  if (!cfg.link_from.empty()) {
    // A grading tree compiles what it links with the trusted archives alike: sanitized objects
    // with sanitized ones.
    args.push_back("-DMGPU_GRADE_LINK_FROM=" + fs::absolute(cfg.link_from).string());
    args.push_back("-DMGPU_SANITIZE=" + cache_value(cfg.link_from, "MGPU_SANITIZE"));
  } else {
    std::string dirs;  // a student's whole tree gets none: private case folders are sealed
    for (const auto& d : cfg.cases_dirs)
      dirs += (dirs.empty() ? "" : ";") + fs::absolute(d).string();
    args.push_back("-DMGPU_GRADE_CASES_DIRS=" + dirs);
  }
  return args;
}

}  // namespace

std::string configure_tree(const TreeConfig& cfg, const Project& project) {
  const std::vector<std::string> args = configure_args(cfg, project);
  std::string stamp_text;
  for (const auto& a : args) stamp_text += a + "\n";
  if (cfg.trusted) stamp_text += kTrustedLine;
  // Which chapters a tree defines follows the staged folders (a grading tree defines the toy
  // chapters only for a toy submission): a slot that held another course's submission is
  // configured again.
  std::set<std::string> staged;
  std::error_code staged_ec;
  if (!cfg.student_dir.empty())
    for (const auto& e : fs::directory_iterator(cfg.student_dir, staged_ec))
      if (e.is_directory()) staged.insert(e.path().filename().string());
  for (const auto& name : staged) stamp_text += "# staged: " + name + "\n";
  fs::path stamp = cfg.dir / kConfigureStamp;
  std::error_code ec;
  if (fs::exists(cfg.dir / "build.ninja", ec) && fs::exists(stamp, ec) &&
      read_text(stamp) == stamp_text)
    return "";
  fs::create_directories(cfg.dir);
  RunSpec spec;
  spec.exe = "cmake";
  spec.args = args;
  spec.isolate = false;
  spec.wall_s = 300;
  spec.merge_output = true;
  spec.output_cap = 256 * 1024;
  spec.env = build_env(project);
  RunOutcome o = cfg.impl == "student"
                     ? run_student_build(spec, project, cfg.dir, BuildStep::compile, cfg.link_from)
                     : run_process(spec);
  if (!o.started) return o.start_error;
  if (o.timed_out) return "configuring timed out after 300 s";
  if (!o.exited || o.exit_code != 0) return "cmake configure failed:\n" + o.out;
  write_if_changed(stamp, stamp_text);
  return "";
}

TargetBuild build_target(const fs::path& tree, const std::string& target, int jobs,
                         const Project& project, const fs::path& scratch_chapters, BuildStep step) {
  TargetBuild b;
  // Two graders (or a grader and its own tests) building one tree at once would corrupt ninja's
  // state: builds of a tree take turns.
  int lock_fd = ::open((tree / "mgpu-grade.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd >= 0) ::flock(lock_fd, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);  // closing releases the lock
    }
  } unlock{lock_fd};
  RunSpec spec;
  spec.exe = "cmake";
  spec.args = {"--build", tree.string(), "--target",
               target,    "-j",          std::to_string(std::max(1, jobs))};
  spec.isolate = false;
  spec.wall_s = 600;
  spec.merge_output = true;
  spec.output_cap = 512 * 1024;
  spec.env = build_env(project);
  RunOutcome o = is_student_tree(tree)
                     ? run_student_build(spec, project, tree, step, linked_from(tree))
                     : run_process(spec);
  b.seconds = o.wall_s;
  std::string out = o.out;
  if (!scratch_chapters.empty()) {
    // The compiler names the staged copy, absolutely or relative to the build tree; students
    // know the file as chapters/<chapter>/<file>.
    for (const std::string& from : {scratch_chapters.string() + "/",
                                    scratch_chapters.lexically_relative(tree).string() + "/"})
      for (std::size_t pos; (pos = out.find(from)) != std::string::npos;)
        out.replace(pos, from.size(), "chapters/");
  }
  b.ok = o.started && o.exited && o.exit_code == 0;
  if (b.ok) return b;
  if (!o.started)
    b.first_error = o.start_error;
  else if (o.timed_out)
    b.first_error = "the build took longer than 600 s and was stopped";
  std::istringstream lines(out);
  std::string line;
  std::size_t first_at = std::string::npos, offset = 0;
  static const std::regex err_re(
      R"((error:|undefined reference|multiple definition|ninja: error|CMake Error))");
  while (std::getline(lines, line)) {
    if (first_at == std::string::npos && std::regex_search(line, err_re)) {
      first_at = offset;
      if (b.first_error.empty()) b.first_error = line;
    }
    offset += line.size() + 1;
  }
  if (b.first_error.empty())
    b.first_error = fmt::format("the build of {} failed (exit code {})", target, o.exit_code);
  b.log = out.substr(first_at == std::string::npos ? 0 : first_at, 4000);
  return b;
}

bool has_program_target(const fs::path& tree, const std::string& target) {
  std::ifstream in(tree / "build.ninja");
  const std::string statement = "build bin/" + target + ":";
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(statement)) return true;
  return false;
}

}  // namespace mgpu::grade
