// fork + exec with the isolation described in runner.hpp. The child only calls async-signal-safe
// functions between fork and exec (the grader is multi-threaded); everything it needs is prepared
// before the fork.
#include "sandbox/runner.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "sandbox/sandbox.hpp"

extern char** environ;

namespace mgpu::grade {
namespace {

using Clock = std::chrono::steady_clock;

// Process groups we may have to kill from a signal handler: a lock-free table.
std::array<std::atomic<pid_t>, 256> g_running{};

void remember(pid_t pg) {
  for (auto& slot : g_running) {
    pid_t zero = 0;
    if (slot.compare_exchange_strong(zero, pg)) return;
  }
}

void forget(pid_t pg) {
  for (auto& slot : g_running) {
    pid_t expected = pg;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

// Tasks (threads included) that the user already runs: RLIMIT_NPROC counts them all.
std::uint64_t tasks_of_user(uid_t uid) {
  // Processes exit while we look: error codes only, never an iterator that throws.
  std::uint64_t n = 0;
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0 || st.st_uid != uid) continue;
    std::error_code ec2;
    std::filesystem::directory_iterator t(it->path() / "task", ec2);
    for (; !ec2 && t != end; t.increment(ec2)) ++n;
  }
  return n;
}

struct Pipe {
  int r = -1, w = -1;
  bool open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    r = fds[0];
    w = fds[1];
    return true;
  }
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ~Pipe() {
    close_fd(r);
    close_fd(w);
  }
};

[[noreturn]] void child_fail(int errfd, int stage) {
  int msg[2] = {stage, errno};
  [[maybe_unused]] auto n = ::write(errfd, msg, sizeof msg);
  ::_exit(127);
}

const char* kStages[] = {"setsid", "dup",  "chdir", "setrlimit",    "setgroups", "setgid",
                         "setuid", "exec", "prctl", "no_new_privs", "landlock",  "seccomp"};

// How often the whole tree's resident memory is summed: often enough that a tree cannot grow far
// past its limit in between, rarely enough that scanning /proc costs nothing measurable.
constexpr auto kMemoryPoll = std::chrono::milliseconds(100);

// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// With namespaces: bubblewrap copies the program in from a descriptor (no host folder in the
// case's view) and reads the system-call filter from another. Returns why not, or "".
std::string open_for_bubblewrap(const RunSpec& spec, Fd& program_fd, Fd& companion_fd,
                                Fd& filter_fd) {
  // bubblewrap copies the programs in from descriptors: no host folder in the case's view.
  std::error_code ec;
  if (!spec.companion.empty()) {
    const std::filesystem::path real = std::filesystem::canonical(spec.companion, ec);
    companion_fd.fd = ec ? -1 : ::open(real.c_str(), O_RDONLY | O_CLOEXEC);
    if (companion_fd.fd < 0)
      return fmt::format("cannot start {}: {}", spec.companion.string(),
                         std::strerror(ec ? ec.value() : errno));
  }
  const std::filesystem::path real = std::filesystem::canonical(spec.exe, ec);
  program_fd.fd = ec ? -1 : ::open(real.c_str(), O_RDONLY | O_CLOEXEC);
  filter_fd.fd = ::memfd_create("mgpu-case-filter", MFD_CLOEXEC);
  const std::string& bpf = case_seccomp_program();
  if (program_fd.fd < 0 || filter_fd.fd < 0 ||
      ::write(filter_fd.fd, bpf.data(), bpf.size()) != static_cast<ssize_t>(bpf.size()) ||
      ::lseek(filter_fd.fd, 0, SEEK_SET) != 0) {
    return fmt::format("cannot start {}: {}", spec.exe.string(),
                       std::strerror(ec ? ec.value() : errno));
  }
  return {};
}

// The case's own link to (or copy of) `exe` in its folder, readable and runnable by the case.
// A link keeps the owner's permissions, so the case can run the program but not rewrite it.
std::error_code place_program(const std::filesystem::path& exe,
                              const std::filesystem::path& workdir, bool drop, uid_t uid, gid_t gid,
                              std::filesystem::path& placed) {
  std::error_code ec;
  const std::filesystem::path real =
      std::filesystem::canonical(exe, ec);  // a link to a symlink would dangle
  placed = workdir / exe.filename();
  if (!ec) std::filesystem::create_hard_link(real, placed, ec);
  if (ec) {
    ec.clear();
    std::filesystem::copy_file(exe, placed, ec);
    if (!ec)
      std::filesystem::permissions(
          placed, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec, ec);
    if (!ec && drop && ::chown(placed.c_str(), uid, gid) != 0)
      ec = {errno, std::generic_category()};
  }
  return ec;
}

// In the uid sandbox: a fresh folder for the case (workdir), owned by its uid when dropping,
// holding its own links to (or copies of) the program and its companion, so the folders above
// the real ones can stay sealed: it never needs a path into the build trees. Returns why not, or
// "" (then the folder is the caller's to remove).
std::string link_into_case_folder(const RunSpec& spec, bool drop, uid_t uid, gid_t gid,
                                  std::filesystem::path& workdir, std::filesystem::path& program,
                                  std::filesystem::path& companion) {
  std::string tmpl = case_dir_template();
  if (!::mkdtemp(tmpl.data())) {
    return fmt::format("cannot create a temporary folder: {}", std::strerror(errno));
  }
  workdir = tmpl;
  std::error_code ec = place_program(spec.exe, workdir, drop, uid, gid, program);
  if (!ec && !spec.companion.empty())
    ec = place_program(spec.companion, workdir, drop, uid, gid, companion);
  if (!ec && drop && ::chown(workdir.c_str(), uid, gid) != 0) ec = {errno, std::generic_category()};
  if (ec) {
    std::string error =
        fmt::format("cannot prepare {} for the case: {}", workdir.string(), ec.message());
    std::filesystem::remove_all(workdir, ec);
    return error;
  }
  return {};
}

// rlimits of the child, computed before the fork.
struct Limits {
  rlimit as, cpu, fsize, nofile, nproc, core;  // a case's
  rlimit build_as, build_fsize;                // a build's (not isolated); 0: none
};

Limits child_limits(const RunSpec& spec, bool drop, uid_t uid, int program_fd, int companion_fd) {
  unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  rlim_t cpu_s = static_cast<rlim_t>(std::ceil(spec.wall_s * ncpu)) + 1;
  // RLIMIT_NPROC counts every task of the uid: a leased uid has none yet.
  rlim_t nproc = static_cast<rlim_t>((drop ? 0 : tasks_of_user(uid)) + spec.extra_processes);
  // bubblewrap writes its copy of the program under this limit too: with namespaces it is at least
  // the program's size (the case's own folders are sized memory folders besides).
  rlim_t file_limit = spec.file_bytes;
  for (int fd : {program_fd, companion_fd}) {
    struct stat program_stat {};
    if (fd >= 0 && ::fstat(fd, &program_stat) == 0)
      file_limit =
          std::max<rlim_t>(file_limit, static_cast<rlim_t>(program_stat.st_size) + (1 << 20));
  }
  Limits l{};
  l.as = {spec.memory_bytes, spec.memory_bytes};
  l.cpu = {cpu_s, cpu_s + 1};
  l.fsize = {file_limit, file_limit};
  l.nofile = {spec.open_files, spec.open_files};
  l.nproc = {nproc, nproc};
  l.core = {0, 0};
  l.build_as = {spec.unisolated_memory_bytes, spec.unisolated_memory_bytes};
  l.build_fsize = {spec.unisolated_file_bytes, spec.unisolated_file_bytes};
  return l;
}

// All the child needs, prepared before the fork: descriptors (where they are now, and the fixed
// numbers they must have in the program), limits, identity, filter, argv and envp.
struct ChildSetup {
  const RunSpec& spec;
  int out, err, result, err_pipe, devnull;  // pipe ends to write; err may be out (merged)
  int program_fd, filter_fd, ruleset_fd;    // -1 when not used
  int block_fd;                             // bubblewrap's --block-fd; -1 when not used
  int companion_fd;                         // bubblewrap copies the companion from it; -1: none
  int err_target, program_target, filter_target, ruleset_target, block_target, companion_target;
  const char* cwd;
  const Limits& limits;
  bool no_devices, drop;
  uid_t uid;
  gid_t gid;
  bool filter_here;  // load the seccomp filter here (bubblewrap loads its own)
  const sock_fprog* filter;
  char* const* argv;
  char* const* envp;
};

// The child's descriptors at the numbers the program expects: 0 from /dev/null, 1 and 2 to the
// pipes, the result pipe at spec.result_fd, the program, filter and ruleset where bubblewrap and
// landlock read them; every other one closed. Each is first copied to 100 or above (the targets
// are small numbers), so that placing one cannot overwrite another still to be placed. `ew`: the
// error pipe; returns its new number, c.err_target. Async-signal-safe, as exec_child.
int place_descriptors(const ChildSetup& c, int ew) {
  int hi_out = ::fcntl(c.out, F_DUPFD, 100);
  int hi_err = ::fcntl(c.err, F_DUPFD, 100);
  int hi_res = c.spec.result_fd >= 0 ? ::fcntl(c.result, F_DUPFD, 100) : -1;
  // bubblewrap reads the program and the filter from these; the ruleset is ours, closed at exec
  int hi_program = c.program_fd >= 0 ? ::fcntl(c.program_fd, F_DUPFD, 100) : -1;
  int hi_filter = c.filter_fd >= 0 ? ::fcntl(c.filter_fd, F_DUPFD, 100) : -1;
  int hi_ruleset = c.ruleset_fd >= 0 ? ::fcntl(c.ruleset_fd, F_DUPFD, 100) : -1;
  int hi_block = c.block_fd >= 0 ? ::fcntl(c.block_fd, F_DUPFD, 100) : -1;
  int hi_companion = c.companion_fd >= 0 ? ::fcntl(c.companion_fd, F_DUPFD, 100) : -1;
  if (hi_out < 0 || hi_err < 0 || (c.spec.result_fd >= 0 && hi_res < 0)) child_fail(ew, 1);
  if ((c.program_fd >= 0 && hi_program < 0) || (c.filter_fd >= 0 && hi_filter < 0) ||
      (c.ruleset_fd >= 0 && hi_ruleset < 0) || (c.block_fd >= 0 && hi_block < 0) ||
      (c.companion_fd >= 0 && hi_companion < 0))
    child_fail(ew, 1);
  if (::dup2(c.devnull, 0) < 0 || ::dup2(hi_out, 1) < 0 || ::dup2(hi_err, 2) < 0) child_fail(ew, 1);
  if (hi_res >= 0 && ::dup2(hi_res, c.spec.result_fd) < 0) child_fail(ew, 1);
  if (::dup3(ew, c.err_target, O_CLOEXEC) < 0) child_fail(ew, 1);
  ew = c.err_target;
  if ((hi_program >= 0 && ::dup2(hi_program, c.program_target) < 0) ||
      (hi_filter >= 0 && ::dup2(hi_filter, c.filter_target) < 0) ||
      (hi_ruleset >= 0 && ::dup3(hi_ruleset, c.ruleset_target, O_CLOEXEC) < 0) ||
      (hi_block >= 0 && ::dup2(hi_block, c.block_target) < 0) ||
      (hi_companion >= 0 && ::dup2(hi_companion, c.companion_target) < 0))
    child_fail(ew, 1);
  int first_free = c.companion_target + 1;
  ::close_range(static_cast<unsigned>(first_free), ~0U, 0);
  return ew;
}

// The child's resource limits: a case's all, a build's (not isolated) only those it has.
void set_limits(const ChildSetup& c, int ew) {
  if (c.spec.isolate) {
    if ((c.no_devices && ::setrlimit(RLIMIT_AS, &c.limits.as) != 0) ||
        ::setrlimit(RLIMIT_CPU, &c.limits.cpu) != 0 ||
        ::setrlimit(RLIMIT_FSIZE, &c.limits.fsize) != 0 ||
        ::setrlimit(RLIMIT_NOFILE, &c.limits.nofile) != 0 ||
        ::setrlimit(RLIMIT_NPROC, &c.limits.nproc) != 0 ||
        ::setrlimit(RLIMIT_CORE, &c.limits.core) != 0)
      child_fail(ew, 3);
  } else {
    ::setrlimit(RLIMIT_CORE, &c.limits.core);
    if ((c.limits.build_as.rlim_cur > 0 && ::setrlimit(RLIMIT_AS, &c.limits.build_as) != 0) ||
        (c.limits.build_fsize.rlim_cur > 0 &&
         ::setrlimit(RLIMIT_FSIZE, &c.limits.build_fsize) != 0))
      child_fail(ew, 3);
  }
}

// The last steps before the program: no privilege can be gained by exec any more, then the
// file system view, then the system-call filter (sandbox.hpp).
void lock_down(const ChildSetup& c, int ew) {
  const bool ruleset = c.ruleset_fd >= 0;  // placed at c.ruleset_target
  if (ruleset || c.filter_here) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(ew, 9);
    if (ruleset && ::syscall(SYS_landlock_restrict_self, c.ruleset_target, 0) != 0)
      child_fail(ew, 10);
    if (c.filter_here && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, c.filter) != 0)
      child_fail(ew, 11);
  }
}

// The child between fork and exec: async-signal-safe calls only (the grader is multi-threaded).
// One sequence of steps, each ending in child_fail with its stage number (kStages) on error, in
// the order the isolation relies on: descriptors, folder, limits, identity, then the lock-down.
[[noreturn]] void exec_child(const ChildSetup& c) {
  int ew = ::fcntl(c.err_pipe, F_DUPFD_CLOEXEC, 100);
  if (ew < 0) ::_exit(127);
  if (::setsid() < 0) child_fail(ew, 0);
  ew = place_descriptors(c, ew);
  if (c.cwd && ::chdir(c.cwd) != 0) child_fail(ew, 2);
  set_limits(c, ew);
  if (c.drop) {
    if (::setgroups(0, nullptr) != 0) child_fail(ew, 4);
    if (::setgid(c.gid) != 0) child_fail(ew, 5);
    if (::setuid(c.uid) != 0) child_fail(ew, 6);
  }
  // Dies with the grader (changing uid above cleared any earlier setting).
  if ((c.spec.isolate || c.drop) && ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(ew, 8);
  lock_down(c, ew);
  if (c.spec.isolate)
    ::execve(c.argv[0], c.argv, c.envp);
  else
    ::execvpe(c.argv[0], c.argv, c.envp);
  child_fail(ew, 7);
}

// Why the child could not start, from what child_fail wrote on the error pipe (its read end,
// err_pipe), or "" when the pipe closed at exec: the program started.
std::string start_error(int err_pipe, const RunSpec& spec, bool drop) {
  int msg[2] = {0, 0};
  ssize_t got;
  do got = ::read(err_pipe, msg, sizeof msg);
  while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof msg)) return {};
  return fmt::format(
      "cannot start {}: {} failed: {}{}", spec.exe.string(), kStages[msg[0]], std::strerror(msg[1]),
      drop && msg[1] == EACCES ? " (the program must be readable and executable by every user: "
                                 "make its folders world-readable)"
                               : "");
}

// The environment of the child: for a case, a fixed minimal one (HOME and TMPDIR its own folder)
// plus spec.env; for a build, the grader's own with spec.env laid over it.
std::vector<std::string> child_environment(const RunSpec& spec, bool namespaces,
                                           const std::filesystem::path& workdir) {
  std::vector<std::string> env_s;
  if (spec.isolate) {
    const std::string home = namespaces ? "/case" : workdir.string();
    env_s = {"PATH=/usr/bin:/bin", "HOME=" + home,   "TMPDIR=" + home,
             "LANG=C.UTF-8",       "LC_ALL=C.UTF-8", "MALLOC_ARENA_MAX=2"};
    // The CUDA driver's compile cache would fill the case's folder (its HOME), and never outlives
    // the case anyway.
    if (!spec.devices.empty()) env_s.push_back("CUDA_CACHE_DISABLE=1");
    for (const auto& [k, v] : spec.env) env_s.push_back(k + "=" + v);
  } else {
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      bool overridden = false;
      for (const auto& [k, v] : spec.env) overridden = overridden || kv.rfind(k + "=", 0) == 0;
      if (!overridden) env_s.push_back(kv);
    }
    for (const auto& [k, v] : spec.env) env_s.push_back(k + "=" + v);
  }
  return env_s;
}

// One of the child's output pipes, read into a buffer up to a cap.
struct Stream {
  int fd;
  std::string* buf;
  std::size_t cap;
  bool* truncated;
};

// The started child, as supervise sees it.
struct Child {
  pid_t pid;
  bool drop;  // runs as `uid`, whose every process is the child's
  uid_t uid;
  Clock::time_point start;
};

// Reads what is ready on the pipes polled in pfds into their streams, closing those at their end.
void read_ready(const std::vector<pollfd>& pfds, std::vector<Stream>& streams) {
  std::array<char, 65536> chunk;  // NOLINT: filled by read before use
  for (const auto& p : pfds) {
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    for (auto& s : streams) {
      if (s.fd != p.fd) continue;
      ssize_t n = ::read(s.fd, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        Pipe::close_fd(s.fd);
        continue;
      }
      std::size_t room = s.buf->size() < s.cap ? s.cap - s.buf->size() : 0;
      std::size_t take = std::min(room, static_cast<std::size_t>(n));
      s.buf->append(chunk.data(), take);
      if (take < static_cast<std::size_t>(n)) *s.truncated = true;
    }
  }
}

// The watch on what an isolated case's folders hold: the uid sandbox walks its folder (and the
// files its uid holds open, deleted); with namespaces the memory folders, opened before the
// program started, tell what they hold at once, and after the case has ended too.
struct DiskWatch {
  const RunSpec& spec;
  std::filesystem::path workdir;                // the uid sandbox: its folder
  std::vector<std::filesystem::path> programs;  // and its links to the programs
  std::optional<uid_t> uid;                     // the uid sandbox as root: the case's uid
  std::vector<int> folders;                     // namespaces: open_sandbox_folders

  explicit DiskWatch(const RunSpec& s) : spec(s) {}
  DiskWatch(const DiskWatch&) = delete;
  DiskWatch& operator=(const DiskWatch&) = delete;
  ~DiskWatch() {
    for (int fd : folders) ::close(fd);
  }

  // Whether the folders hold disk_bytes, or more than disk_files entries; fills o's disk fields.
  bool over(RunOutcome& o) const {
    if (folders.empty() && workdir.empty()) return false;  // not isolated, or nothing to see
    const DiskUse u = folders.empty() ? folder_use(workdir, programs, uid, spec.disk_files)
                                      : memory_folders_use(folders);
    if (!u.too_deep && u.bytes < spec.disk_bytes && u.files <= spec.disk_files) return false;
    o.disk_exceeded = true;
    const auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
    o.disk_use = fmt::format(
        "its files {} ({:.1f} MiB in {} entries; a case may keep {:g} MiB in {} entries)",
        u.too_deep ? "were in folders nested too deep to measure" : "filled its disk", mib(u.bytes),
        u.files, mib(spec.disk_bytes), spec.disk_files);
    return true;
  }
};

// Watches the child until it ends and its pipes are drained: reads its output, and kills its
// whole tree when it ends, outgrows spec.memory_bytes or its disk (isolated runs) or passes
// spec.wall_s. Returns its wait status (valid when `reaped`); sets o's timed_out, memory and disk
// fields.
int supervise(const Child& c, const RunSpec& spec, const DiskWatch& disk,
              std::vector<Stream>& streams, RunOutcome& o, bool& reaped) {
  const auto deadline = c.start + std::chrono::duration<double>(spec.wall_s);
  std::optional<Clock::time_point>
      drain_until;  // after the child is gone, give stragglers a moment
  int wstatus = 0;
  auto next_memory_check = c.start;
  auto kill_tree = [&] {
    ::kill(-c.pid, SIGKILL);
    if (c.drop) kill_uid(c.uid);  // processes that left the group (setsid) are still the lease's
  };
  while (true) {
    if (!reaped) {
      pid_t w = ::waitpid(c.pid, &wstatus, WNOHANG);
      if (w == c.pid) {
        reaped = true;
        kill_tree();  // descendants left behind must not keep the pipes open or outlive the case
        drain_until = Clock::now() + std::chrono::milliseconds(500);
      }
    }
    auto now = Clock::now();
    // The memory limit holds for the whole tree: RLIMIT_AS alone is per process.
    if (!reaped && spec.isolate && now >= next_memory_check) {
      next_memory_check = now + kMemoryPoll;
      std::uint64_t rss =
          tree_resident_bytes(c.pid, c.drop ? std::optional<uid_t>(c.uid) : std::nullopt);
      if (rss > spec.memory_bytes) {
        o.memory_exceeded = true;
        o.tree_memory_bytes = rss;
      }
      if (o.memory_exceeded || disk.over(o)) {
        kill_tree();
        ::waitpid(c.pid, &wstatus, 0);
        reaped = true;
        drain_until = Clock::now() + std::chrono::milliseconds(200);
      }
    }
    if (!reaped && now >= deadline) {
      o.timed_out = true;
      kill_tree();
      ::waitpid(c.pid, &wstatus, 0);
      reaped = true;
      drain_until = Clock::now() + std::chrono::milliseconds(200);
    }
    std::vector<pollfd> pfds;
    for (const auto& s : streams)
      if (s.fd >= 0) pfds.push_back({s.fd, POLLIN, 0});
    if (pfds.empty() && reaped) break;
    if (drain_until && Clock::now() >= *drain_until) break;
    ::poll(pfds.data(), pfds.size(), 20);
    read_ready(pfds, streams);
  }
  return wstatus;
}

// How the child ended, from its wait status.
void record_exit(RunOutcome& o, int wstatus, SandboxKind kind) {
  if (WIFEXITED(wstatus)) {
    o.exited = true;
    o.exit_code = WEXITSTATUS(wstatus);
    // bubblewrap reports a program killed by signal s as its own exit code 128 + s.
    if (kind == SandboxKind::namespaces && o.exit_code > 128 && o.exit_code <= 128 + SIGRTMAX) {
      o.exited = false;
      o.signal = o.exit_code - 128;
      o.exit_code = -1;
    }
  } else if (WIFSIGNALED(wstatus)) {
    o.signal = WTERMSIG(wstatus);
  }
}

// Everything one run holds from before the fork until its child is reaped, released on every
// path: the case uid's lease last, after the case folder is removed and the descriptors closed.
struct Launch {
  const RunSpec& spec;
  SandboxKind kind;
  std::optional<UidLease> lease;
  bool drop = false;  // the child changes to uid and gid
  uid_t uid = 0;
  gid_t gid = 0;
  std::filesystem::path workdir, program, companion;
  bool own_workdir = false;                            // workdir is this run's to remove
  Fd program_fd, companion_fd, filter_fd, ruleset_fd;  // -1 when not used
  sock_fprog filter{};
  bool filter_here = false;  // load the seccomp filter in the child (bubblewrap loads its own)
  // Descriptors the child passes on, at fixed numbers above the result's and the error pipe's.
  int err_target = 3, program_target = 4, filter_target = 5, ruleset_target = 6, block_target = 7,
      companion_target = 8;
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  Limits limits{};

  explicit Launch(const RunSpec& s)
      : spec(s),
        kind(s.isolate ? sandbox().kind : SandboxKind::none),
        workdir(s.cwd),
        program(s.exe),
        companion(s.companion) {}
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  ~Launch() {
    std::error_code ec;
    if (own_workdir) std::filesystem::remove_all(workdir, ec);
  }
  bool namespaces() const { return kind == SandboxKind::namespaces; }
};

// As root, every isolated run gets a uid of its own: nothing it starts can touch another case,
// the grader or a file that is not world-readable, and all of it is killed afterwards. Returns
// why not, or "".
std::string choose_user(Launch& l) {
  const RunSpec& spec = l.spec;
  if (spec.isolate && spec.drop_privileges && ::geteuid() == 0) {
    l.lease.emplace();
    if (!l.lease->held()) return "every case uid is in use (too many cases at once); lower --jobs";
  }
  const bool run_as = !spec.isolate && spec.run_as && ::geteuid() == 0;
  l.drop = l.lease.has_value() || run_as;
  l.uid = l.lease ? l.lease->uid() : run_as ? *spec.run_as : ::geteuid();
  l.gid = l.drop ? static_cast<gid_t>(l.uid) : ::getegid();
  return {};
}

// The program where the sandbox can reach it: descriptors for bubblewrap, or a fresh case folder
// (the working folder it may scribble in) holding its own link. Returns why not, or "".
std::string prepare_program(Launch& l) {
  if (l.namespaces()) return open_for_bubblewrap(l.spec, l.program_fd, l.companion_fd, l.filter_fd);
  if (!l.spec.isolate) return {};
  std::string error =
      link_into_case_folder(l.spec, l.drop, l.uid, l.gid, l.workdir, l.program, l.companion);
  l.own_workdir = error.empty();
  return error;
}

// Landlock where the kernel has it: a case in the uid sandbox reaches only the system and its
// folder; a build, what its view names. Then the system-call filter, in the form the child loads.
void confine(Launch& l) {
  if (l.kind == SandboxKind::uid)
    l.ruleset_fd.fd = landlock_ruleset(case_view(l.workdir, l.spec.devices));
  else if (!l.spec.isolate && l.spec.view)
    l.ruleset_fd.fd = landlock_ruleset(*l.spec.view);
  const std::string& bpf = case_seccomp_program();
  l.filter = {static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
              reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
  l.filter_here = l.kind == SandboxKind::uid;
}

// The child's argv: the program and spec.args (kCompanionArg made the companion's path in the
// case's view), run through bubblewrap with namespaces (which reads the programs and the filter
// from the descriptors at their targets, and waits on block_target before it starts the program).
std::vector<std::string> child_arguments(const Launch& l) {
  const RunSpec& spec = l.spec;
  std::vector<std::string> argv_s{l.program.string()};
  std::string companion = l.companion.string();
  if (l.namespaces()) {
    BwrapCase c;
    c.program = spec.exe;
    c.program_fd = l.program_target;
    c.companion = spec.companion;
    c.companion_fd = l.companion_fd.fd >= 0 ? l.companion_target : -1;
    c.seccomp_fd = l.filter_target;
    c.block_fd = l.block_target;
    c.tmpfs_bytes = spec.disk_bytes;
    c.devices = spec.devices;
    argv_s = bwrap_command(c);
    companion = "/program/" + spec.companion.filename().string();
  }
  for (const std::string& a : spec.args) argv_s.push_back(a == kCompanionArg ? companion : a);
  return argv_s;
}

// The descriptor numbers, argv, envp and limits, all built before the fork.
void prepare_exec(Launch& l) {
  const RunSpec& spec = l.spec;
  l.err_target = spec.result_fd == 3 ? 4 : 3;
  l.program_target = std::max(spec.result_fd, l.err_target) + 1;
  l.filter_target = l.program_target + 1;
  l.ruleset_target = l.program_target + 2;
  l.block_target = l.program_target + 3;
  l.companion_target = l.program_target + 4;
  l.argv_s = child_arguments(l);
  for (auto& a : l.argv_s) l.argv.push_back(a.data());
  l.argv.push_back(nullptr);
  l.env_s = child_environment(spec, l.namespaces(), l.workdir);
  for (auto& e : l.env_s) l.envp.push_back(e.data());
  l.envp.push_back(nullptr);
  l.limits = child_limits(spec, l.drop, l.uid, l.program_fd.fd, l.companion_fd.fd);
}

// The child's output, error output, result and start-error pipes, and with namespaces the one
// bubblewrap waits on before it starts the program.
struct ChildPipes {
  Pipe out, err, res, errp, block;
  bool open(const RunSpec& spec, bool namespaces) {
    return out.open() && err.open() && errp.open() && (spec.result_fd < 0 || res.open()) &&
           (!namespaces || block.open());
  }
};

ChildSetup child_setup(const Launch& l, const ChildPipes& p, int devnull, const char* cwd) {
  return {.spec = l.spec,
          .out = p.out.w,
          .err = l.spec.merge_output ? p.out.w : p.err.w,
          .result = p.res.w,
          .err_pipe = p.errp.w,
          .devnull = devnull,
          .program_fd = l.program_fd.fd,
          .filter_fd = l.filter_fd.fd,
          .ruleset_fd = l.ruleset_fd.fd,
          .block_fd = p.block.r,
          .companion_fd = l.companion_fd.fd,
          .err_target = l.err_target,
          .program_target = l.program_target,
          .filter_target = l.filter_target,
          .ruleset_target = l.ruleset_target,
          .block_target = l.block_target,
          .companion_target = l.companion_target,
          .cwd = cwd,
          .limits = l.limits,
          .no_devices = l.spec.devices.empty(),
          .drop = l.drop,
          .uid = l.uid,
          .gid = l.gid,
          .filter_here = l.filter_here,
          .filter = &l.filter,
          .argv = l.argv.data(),
          .envp = l.envp.data()};
}

// With namespaces: bubblewrap, its sandbox set up, waits on the block pipe before it starts the
// program, while the grader opens the case's memory folders (so no write escapes the watch, and
// the folders can be measured after the case has ended); the caller then releases it. Gives up
// when bubblewrap ends first or after 5 s: the case then runs unwatched, its folders still
// bounded by their size.
std::vector<int> open_folders_before_start(pid_t pid) {
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < give_up) {
    std::vector<int> fds = open_sandbox_folders(pid);
    if (!fds.empty()) return fds;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return {};
}

// The parent's side once the child is forked: learns whether it started, reads its output while
// supervise watches it, reaps it and records how it ended in o.
void watch_child(const Launch& l, pid_t pid, Clock::time_point start, ChildPipes& p,
                 RunOutcome& o) {
  const RunSpec& spec = l.spec;
  remember(pid);
  Pipe::close_fd(p.out.w);
  Pipe::close_fd(p.err.w);
  Pipe::close_fd(p.res.w);
  Pipe::close_fd(p.errp.w);
  o.start_error = start_error(p.errp.r, spec, l.drop);
  o.started = o.start_error.empty();
  DiskWatch disk(spec);
  if (l.namespaces()) {
    Pipe::close_fd(p.block.r);
    if (o.started) disk.folders = open_folders_before_start(pid);
    Pipe::close_fd(p.block.w);  // bubblewrap starts the program
  } else if (l.kind == SandboxKind::uid) {
    disk.workdir = l.workdir;
    disk.programs = {l.program, l.companion};
    if (l.drop) disk.uid = l.uid;
  }

  std::vector<Stream> streams{{p.out.r, &o.out, spec.output_cap, &o.out_truncated}};
  if (!spec.merge_output)
    streams.push_back({p.err.r, &o.err, spec.output_cap, &o.err_truncated});
  else
    Pipe::close_fd(p.err.r);
  if (spec.result_fd >= 0)
    streams.push_back({p.res.r, &o.result, spec.result_cap, &o.result_overflow});
  Child child{pid, l.drop, l.uid, start};
  bool reaped = false;
  int wstatus = supervise(child, spec, disk, streams, o, reaped);
  for (auto& s : streams) Pipe::close_fd(s.fd);
  p.out.r = p.err.r = p.res.r = -1;
  if (!reaped) ::waitpid(pid, &wstatus, 0);
  // What it left: a case that filled its folders and ended before the watch saw it.
  if (!o.timed_out && !o.memory_exceeded && !o.disk_exceeded) disk.over(o);
  ::kill(-pid,
         SIGKILL);  // the tree was killed when the child ended; the lease sweeps its uid once more
  forget(pid);
  o.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  record_exit(o, wstatus, l.kind);
}

}  // namespace

std::string signal_description(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = sigdescr_np(sig);
  return fmt::format("SIG{} ({})", abbrev ? abbrev : std::to_string(sig).c_str(),
                     desc ? desc : "unknown signal");
}

void kill_all_running() {
  for (auto& slot : g_running) {
    pid_t pg = slot.load();
    if (pg > 0) ::kill(-pg, SIGKILL);
  }
}

// The steps in order: choose the user, prepare the program and its folder, the file-system view
// and filter, argv, envp and limits, then fork; the child sets itself up and execs (exec_child),
// the parent supervises it (supervise) and records how it ended.
RunOutcome run_process(const RunSpec& spec) {
  RunOutcome o;
  Launch l(spec);
  if (spec.isolate && l.kind == SandboxKind::none) {
    o.start_error = sandbox().why;
    return o;
  }
  o.start_error = choose_user(l);
  if (o.start_error.empty()) o.start_error = prepare_program(l);
  if (!o.start_error.empty()) return o;
  confine(l);
  prepare_exec(l);

  ChildPipes pipes;
  if (!pipes.open(spec, l.namespaces())) {
    o.start_error = fmt::format("cannot create pipes: {}", std::strerror(errno));
    return o;
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  // With namespaces bubblewrap changes to /case; it starts from / (the grader's own folder may not
  // be the case uid's to enter).
  const char* cwd = l.namespaces() ? "/" : l.workdir.empty() ? nullptr : l.workdir.c_str();
  auto start = Clock::now();

  pid_t pid = ::fork();
  if (pid < 0) {
    o.start_error = fmt::format("fork failed: {}", std::strerror(errno));
    if (devnull >= 0) ::close(devnull);
    return o;
  }
  if (pid == 0) exec_child(child_setup(l, pipes, devnull, cwd));
  if (devnull >= 0) ::close(devnull);
  watch_child(l, pid, start, pipes, o);
  return o;
}

}  // namespace mgpu::grade
