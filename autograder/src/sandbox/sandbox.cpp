// Sandbox detection, uid leases and the sweeps behind them. Everything here runs in the grader
// process; the child side (setuid, rlimits, exec) is in runner.cpp.
#include "sandbox/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

constexpr const char* kBwrap = "/usr/bin/bwrap";
// Case uids: far above any account or subordinate-uid range, so a sweep never hits a real user.
constexpr uid_t kFirstCaseUid = 2'100'000'000u;
constexpr int kCaseUids = 64;

// The case uids' lock files. The uids are the machine's, so every grader that can kill their
// processes (every grader whose /proc shows them) must take its leases in the same folder:
// $TMPDIR differs between checkouts, batch shards and scheduler jobs, and two graders that lease
// one uid through two folders kill each other's cases. /run is root's (mode 0755) on Debian,
// in containers and on cluster nodes, and emptied at boot, when no lease is held any more;
// /var/lock (/run/lock) is writable by every user, who could make the folder first.
constexpr const char* kLeaseFolder = "/run/mgpu-grade";

// The lease folder, opened once (-1 until then, or when it is unsafe: g_lease_folder_problem says
// why). Only a root grader leases uids.
int g_lease_folder = -1;
std::string g_lease_folder_problem;

void open_lease_folder_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      g_lease_folder = open_lease_folder(kLeaseFolder);
    } catch (const std::exception& e) {
      g_lease_folder_problem = e.what();
    }
  });
}

// The lock file of slot, opened (created if missing) in the lease folder; -1 when there is none.
int open_lock(int slot) {
  open_lease_folder_once();
  if (g_lease_folder < 0) return -1;
  return ::openat(g_lease_folder, fmt::format("uid-{}.lock", slot).c_str(),
                  O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
}

// Runs bwrap once, as the user cases would run as, to see that user namespaces work here. As root
// the probe holds a case uid's lease like a case: another grader's sweep kills every process of a
// case uid nobody holds, and a probe killed so would read as "no namespaces".
bool bwrap_works() {
  if (::access(kBwrap, X_OK) != 0) return false;
  const UidLease lease;
  const uid_t probe_uid =
      lease.held() ? lease.uid() : 65534;  // nobody, when every case uid is busy
  BwrapCase probe;
  probe.program = "/usr/bin/true";
  auto cmd = bwrap_command(probe);
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0), ::dup2(devnull, 1), ::dup2(devnull, 2);
    if (::geteuid() == 0 &&
        (::setgroups(0, nullptr) != 0 || ::setgid(probe_uid) != 0 || ::setuid(probe_uid) != 0))
      ::_exit(126);
    ::execv(kBwrap, argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The filter's BPF program, read back through a memory file (libseccomp writes it only to a
// descriptor); "" when it cannot.
std::string export_bpf(scmp_filter_ctx ctx) {
  const int fd = ::memfd_create("mgpu-case-filter", MFD_CLOEXEC);
  if (fd < 0) return "";
  std::string bpf;
  if (seccomp_export_bpf(ctx, fd) == 0 && ::lseek(fd, 0, SEEK_SET) == 0) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
      bpf.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return bpf;
}

// The case filter (sandbox.hpp) as BPF. Longer than a screen: the rules are one table, read top
// to bottom as the policy itself; split, the policy would no longer read at once.
std::string build_seccomp_program() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return "";
  struct Release {
    scmp_filter_ctx c;
    ~Release() { seccomp_release(c); }
  } release{ctx};
  bool ok = true;
  auto deny = [&](const char* name, std::uint32_t action = SCMP_ACT_ERRNO(EPERM)) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // not a system call on this architecture
    ok = ok && seccomp_rule_add(ctx, action, nr, 0) == 0;
  };
  deny("socket", SCMP_ACT_ERRNO(EACCES));
  for (const char* name : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "pidfd_getfd",
                           "kcmp",
                           "perf_event_open",
                           "bpf",
                           "userfaultfd",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "shmget",
                           "shmat",
                           "msgget",
                           "semget",
                           "unshare",
                           "setns",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "move_mount",
                           "open_tree",
                           "fsopen",
                           "fsmount",
                           "fspick",
                           "mount_setattr",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "quotactl",
                           "acct",
                           "swapon",
                           "swapoff",
                           "reboot",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "sethostname",
                           "setdomainname",
                           "syslog",
                           "iopl",
                           "ioperm",
                           "fanotify_init",
                           "lookup_dcookie",
                           "vhangup"})
    deny(name);
  // clone3 passes its flags in memory a filter cannot read: ENOSYS makes glibc use clone.
  deny("clone3", SCMP_ACT_ERRNO(ENOSYS));
  for (const unsigned long flag : {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                   CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP})
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)) == 0;
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_UNIX)) == 0;
  return ok ? export_bpf(ctx) : "";
}

SandboxInfo detect() {
  // As root every case and build holds a uid's lease: without a safe lease folder nothing runs.
  if (::geteuid() == 0) {
    open_lease_folder_once();
    if (g_lease_folder < 0) return {SandboxKind::none, g_lease_folder_problem};
  }
  if (case_seccomp_program().empty())
    return {SandboxKind::none,
            "libseccomp could not build the system-call filter cases run under; reinstall "
            "libseccomp2 and rebuild the grader"};
  const char* forced = std::getenv("MGPU_SANDBOX");
  std::string f = forced ? forced : "";
  const bool root = ::geteuid() == 0;
  if (f == "uid") {
    if (root) return {SandboxKind::uid, ""};
    return {SandboxKind::none, "MGPU_SANDBOX=uid needs a grader running as root"};
  }
  if (bwrap_works()) return {SandboxKind::namespaces, ""};
  if (f == "namespaces")
    return {SandboxKind::none,
            "MGPU_SANDBOX=namespaces, but bubblewrap cannot create namespaces here: install it "
            "(apt-get install bubblewrap) and allow unprivileged user namespaces"};
  if (root) return {SandboxKind::uid, ""};
  return {SandboxKind::none,
          "cannot isolate student code: bubblewrap is missing or user namespaces are disabled, and "
          "the grader is not "
          "root. Fix: apt-get install bubblewrap (and sysctl kernel.unprivileged_userns_clone=1 "
          "where the kernel has it), "
          "or run the grader as root (it then gives each case its own uid)"};
}

struct ProcInfo {
  char state = '?';  // 'Z': a zombie, already dead, waiting for its parent to reap it
  pid_t ppid = 0;
  uid_t uid = 0;
  std::uint64_t start_ticks = 0;  // when it started, in clock ticks after boot
  std::uint64_t rss_pages = 0;
};

// A snapshot of /proc. Processes come and go while it is read, so every read may fail: plain
// system calls and error codes here, never a stream or an iterator that throws.
std::map<pid_t, ProcInfo> processes() {
  std::map<pid_t, ProcInfo> out;
  std::error_code ec;
  fs::directory_iterator it("/proc", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;
    int fd = ::open((it->path() / "stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    const std::string text(buf, static_cast<std::size_t>(n));
    auto close = text.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos || close + 2 >= text.size()) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string state;
    ProcInfo p;
    p.uid = st.st_uid;
    fields >> state >> p.ppid;
    p.state = state.empty() ? '?' : state[0];
    std::string skip;
    for (int i = 0; i < 19 && fields >> skip; ++i)  // fields 5 to 23; starttime is the 22nd
      if (i == 17) p.start_ticks = std::strtoull(skip.c_str(), nullptr, 10);
    // rss is the 24th
    fields >> p.rss_pages;
    out[std::atoi(name.c_str())] = p;
  }
  return out;
}

}  // namespace

const SandboxInfo& sandbox() {
  static const SandboxInfo info = detect();
  return info;
}

std::string_view to_string(SandboxKind kind) {
  switch (kind) {
    case SandboxKind::namespaces:
      return "namespaces (bubblewrap)";
    case SandboxKind::uid:
      return "a throwaway uid per case";
    case SandboxKind::none:
      return "none";
  }
  return "none";
}

void require_sandbox() {
  if (sandbox().kind == SandboxKind::none) throw std::runtime_error(sandbox().why);
}

UidLease::UidLease() {
  if (::geteuid() != 0) return;
  for (int slot = 0; slot < kCaseUids; ++slot) {
    int fd = open_lock(slot);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      fd_ = fd;
      uid_ = kFirstCaseUid + static_cast<uid_t>(slot);
      kill_uid(uid_);  // whatever a killed grader left under this uid
      return;
    }
    ::close(fd);
  }
}

UidLease::~UidLease() {
  if (fd_ < 0) return;
  kill_uid(uid_);
  ::close(fd_);  // releases the lock
}

int open_lease_folder(const fs::path& folder) {
  const fs::path parent = folder.parent_path();
  auto refuse = [&](const std::string& problem, const std::string& fix) {
    return std::runtime_error(fmt::format(
        "cannot lease case uids: {}. Another user could take or block the uids cases run as. "
        "Fix: {}",
        problem, fix));
  };
  // The parent may be a root-owned link (/var/run); it must be root's and writable by root only,
  // or another user could make or swap the folder.
  const int up = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st {};
  if (up < 0 || ::fstat(up, &st) != 0) {
    if (up >= 0) ::close(up);
    throw refuse(fmt::format("{} cannot be opened ({})", parent.string(), std::strerror(errno)),
                 fmt::format("create it as root: mkdir -m 0755 {}", parent.string()));
  }
  if (st.st_uid != 0 || (st.st_mode & 022) != 0) {
    ::close(up);
    throw refuse(fmt::format("{} is owned by uid {} with mode {:04o}", parent.string(), st.st_uid,
                             st.st_mode & 07777),
                 fmt::format("chown root {0} && chmod go-w {0}", parent.string()));
  }
  const std::string name = folder.filename().string();
  if (::mkdirat(up, name.c_str(), 0700) != 0 && errno != EEXIST) {
    const int e = errno;
    ::close(up);
    throw refuse(fmt::format("cannot create {} ({})", folder.string(), std::strerror(e)),
                 "run the grader as root");
  }
  // Never through a link: a folder of another user's, or one others may write, is refused.
  const int fd = ::openat(up, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(up);
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 077) != 0) {
    const std::string what =
        fd < 0 ? fmt::format("{} is not a folder ({})", folder.string(), std::strerror(errno))
               : fmt::format("{} is owned by uid {} with mode {:04o}, not root's with 0700",
                             folder.string(), st.st_uid, st.st_mode & 07777);
    if (fd >= 0) ::close(fd);
    throw refuse(what, fmt::format("remove it (rm -r {}) while no grader runs; the next grader "
                                   "creates it",
                                   folder.string()));
  }
  return fd;
}

int machine_lock_folder() {
  open_lease_folder_once();
  if (g_lease_folder < 0) throw std::runtime_error(g_lease_folder_problem);
  return g_lease_folder;
}

void kill_uid(uid_t uid) {
  // A process can fork between our scan and our kill: repeat until a scan finds none. The bound
  // is time, not rounds: on a loaded machine killed processes take a while to go, and one left
  // behind would count against the case that leases this uid next.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (const auto& [pid, p] : processes())
      if (p.uid == uid && p.state != 'Z' && p.state != 'X') {
        ::kill(pid, SIGKILL);
        any = true;
      }
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void sweep_leftovers() {
  if (::geteuid() == 0)
    for (int slot = 0; slot < kCaseUids; ++slot) {
      int fd = open_lock(slot);  // the same folder as every lease: a held uid is never swept
      if (fd < 0) continue;
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) kill_uid(kFirstCaseUid + static_cast<uid_t>(slot));
      ::close(fd);
    }
  // Case folders of graders that are gone: mgpu-case-<pid>-XXXXXX with no such process.
  std::error_code ec, rm;
  fs::directory_iterator it(fs::temp_directory_path(), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("mgpu-case-", 0) != 0 || !it->is_directory(rm)) continue;
    const pid_t owner = std::atoi(name.c_str() + 10);
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) fs::remove_all(it->path(), rm);
  }
}

std::uint64_t tree_resident_bytes(pid_t root, std::optional<uid_t> uid) {
  auto procs = processes();
  // A process of the uid that is older than the case is not the case's: a previous holder of the
  // lease whose killed processes are still giving their memory back on a loaded machine.
  const auto r = procs.find(root);
  const std::uint64_t since = r == procs.end() ? 0 : r->second.start_ticks;
  std::uint64_t pages = 0;
  for (const auto& [pid, p] : procs) {
    if (p.state == 'Z' || p.state == 'X') continue;  // dead: its memory is not held any more
    bool mine = uid && p.uid == *uid && p.start_ticks >= since;
    for (pid_t q = pid; !mine && q > 1;) {
      if (q == root) mine = true;
      auto it = procs.find(q);
      q = it == procs.end() ? 0 : it->second.ppid;
    }
    if (mine) pages += p.rss_pages;
  }
  return pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

namespace {

// Folders deeper than this in a case's folder are not walked: the walk holds a descriptor per
// level. A case that nests deeper is over its limit (DiskUse::too_deep).
constexpr int kMaxFolderDepth = 32;

// Adds what the folder `dir` (a descriptor, closed here) holds to use, `depth` levels down;
// `seen` holds the files not to count (again): with several links, or the program's.
void walk_folder(int dir, int depth, std::set<std::pair<dev_t, ino_t>>& seen,
                 std::uint64_t max_files, DiskUse& use) {
  DIR* d = ::fdopendir(dir);
  if (!d) {
    ::close(dir);
    return;
  }
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st {};
    if (::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      const std::pair<dev_t, ino_t> file{st.st_dev, st.st_ino};
      if (seen.count(file)) continue;  // counted already, or the program's own link
      if (st.st_nlink > 1) seen.insert(file);
    }
    use.bytes += static_cast<std::uint64_t>(st.st_blocks) * 512;
    if (++use.files > max_files) break;
    if (!S_ISDIR(st.st_mode)) continue;
    if (depth >= kMaxFolderDepth) {
      use.too_deep = true;
      break;
    }
    const int sub = ::openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) walk_folder(sub, depth + 1, seen, max_files, use);
    if (use.too_deep || use.files > max_files) break;
  }
  ::closedir(d);
}

// Bytes of the files on device `dev` that processes of uid hold open with no name left (deleted
// while open): the folder's walk cannot see them, the disk holds them.
std::uint64_t deleted_open_bytes(uid_t uid, dev_t dev) {
  std::set<ino_t> counted;
  std::uint64_t bytes = 0;
  // The processes of uid by their /proc folders' owner: cheaper than processes(), which reads
  // every process's stat, and this runs every time the memory is checked.
  const int proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* all = proc < 0 ? nullptr : ::fdopendir(proc);
  if (!all) {
    if (proc >= 0) ::close(proc);
    return 0;
  }
  while (const dirent* pe = ::readdir(all)) {
    struct stat owner {};
    if (pe->d_name[0] < '1' || pe->d_name[0] > '9' || ::fstatat(proc, pe->d_name, &owner, 0) != 0 ||
        owner.st_uid != uid)
      continue;
    const int fds = ::openat(proc, fmt::format("{}/fd", pe->d_name).c_str(),
                             O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = fds < 0 ? nullptr : ::fdopendir(fds);
    if (!d) {
      if (fds >= 0) ::close(fds);
      continue;
    }
    while (const dirent* e = ::readdir(d)) {
      struct stat st {};
      if (e->d_name[0] == '.' || ::fstatat(fds, e->d_name, &st, 0) != 0) continue;
      if (S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_dev == dev &&
          counted.insert(st.st_ino).second)
        bytes += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
    ::closedir(d);
  }
  ::closedir(all);
  return bytes;
}

}  // namespace

DiskUse folder_use(const fs::path& folder, const std::vector<fs::path>& skip,
                   std::optional<uid_t> uid, std::uint64_t max_files) {
  DiskUse use;
  std::set<std::pair<dev_t, ino_t>> seen;
  struct stat st {};
  for (const fs::path& link : skip)
    if (!link.empty() && ::lstat(link.c_str(), &st) == 0) seen.insert({st.st_dev, st.st_ino});
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0 || ::fstat(dir, &st) != 0) {
    if (dir >= 0) ::close(dir);
    return use;
  }
  const dev_t dev = st.st_dev;
  walk_folder(dir, 0, seen, max_files, use);
  if (uid) use.bytes += deleted_open_bytes(*uid, dev);
  return use;
}

std::vector<int> open_sandbox_folders(pid_t bwrap) {
  struct stat host_root {};
  if (::stat("/", &host_root) != 0) return {};
  // bubblewrap's own children (the sandbox's first process is one), where the kernel lists them;
  // else every process descended from it.
  std::vector<pid_t> inside;
  std::ifstream children(fmt::format("/proc/{0}/task/{0}/children", bwrap));
  for (pid_t pid = 0; children >> pid;) inside.push_back(pid);
  if (!children.eof() || inside.empty()) {
    const auto procs = processes();
    for (const auto& [pid, p] : procs)
      for (pid_t q = p.ppid; q > 1;) {
        if (q == bwrap) {
          inside.push_back(pid);
          break;
        }
        auto it = procs.find(q);
        q = it == procs.end() ? 0 : it->second.ppid;
      }
  }
  for (const pid_t pid : inside) {
    // Its root must be the sandbox's own: while bubblewrap sets up, the host's.
    const std::string root = fmt::format("/proc/{}/root", pid);
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0 ||
        (st.st_dev == host_root.st_dev && st.st_ino == host_root.st_ino))
      continue;
    std::vector<int> fds;
    std::set<dev_t> devices;  // each folder a memory folder of its own
    for (const auto& folder : kCaseMemoryFolders) {
      const int fd = ::open((root + folder).c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      struct statfs fsst {};
      if (fd < 0 || ::fstatfs(fd, &fsst) != 0 || fsst.f_type != TMPFS_MAGIC ||
          ::fstat(fd, &st) != 0 || !devices.insert(st.st_dev).second) {
        if (fd >= 0) ::close(fd);
        break;
      }
      fds.push_back(fd);
    }
    if (fds.size() == kCaseMemoryFolders.size()) return fds;
    for (int fd : fds) ::close(fd);
  }
  return {};
}

DiskUse memory_folders_use(const std::vector<int>& fds) {
  DiskUse use;
  for (int fd : fds) {
    struct statfs st {};
    if (::fstatfs(fd, &st) != 0) continue;
    use.bytes += static_cast<std::uint64_t>(st.f_blocks - st.f_bfree) * st.f_bsize;
    if (st.f_files > st.f_ffree) use.files += st.f_files - st.f_ffree - 1;  // less its root
  }
  return use;
}

std::vector<std::string> bwrap_command(const BwrapCase& c) {
  const std::string inside =
      c.program_fd >= 0 ? "/program/" + c.program.filename().string() : c.program.string();
  const std::string size = std::to_string(c.tmpfs_bytes);
  std::vector<std::string> cmd{kBwrap, "--unshare-all", "--die-with-parent", "--new-session",
                               // the system's programs and libraries, read-only; nothing of the
                               // course, the reference or /home
                               "--ro-bind", "/usr", "/usr", "--ro-bind-try", "/lib", "/lib",
                               "--ro-bind-try", "/lib64", "/lib64", "--ro-bind-try", "/bin", "/bin",
                               "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc",
                               "/proc", "--dev", "/dev"};
  for (const auto& folder : kCaseMemoryFolders)
    cmd.insert(cmd.end(), {"--size", size, "--tmpfs", folder});
  // After --dev, which would hide them: a fresh /dev holds only the standard nodes.
  for (const auto& d : c.devices) cmd.insert(cmd.end(), {"--dev-bind-try", d.string(), d.string()});
  if (!c.devices.empty()) cmd.insert(cmd.end(), {"--ro-bind-try", "/sys", "/sys"});
  if (c.program_fd >= 0)
    cmd.insert(cmd.end(),
               {"--perms", "0555", "--ro-bind-data", std::to_string(c.program_fd), inside});
  if (c.companion_fd >= 0)
    cmd.insert(cmd.end(), {"--perms", "0555", "--ro-bind-data", std::to_string(c.companion_fd),
                           "/program/" + c.companion.filename().string()});
  // The root and /dev are memory folders of bubblewrap's own, of no size limit: read-only, the
  // sized folders above are all a case can fill.
  cmd.insert(cmd.end(), {"--remount-ro", "/dev", "--remount-ro", "/"});
  if (c.seccomp_fd >= 0) cmd.insert(cmd.end(), {"--seccomp", std::to_string(c.seccomp_fd)});
  if (c.block_fd >= 0) cmd.insert(cmd.end(), {"--block-fd", std::to_string(c.block_fd)});
  cmd.insert(cmd.end(), {"--chdir", "/case", inside});
  return cmd;
}

const std::string& case_seccomp_program() {
  static const std::string program = build_seccomp_program();
  return program;
}

std::string case_dir_template() {
  return (fs::temp_directory_path() / fmt::format("mgpu-case-{}-XXXXXX", ::getpid())).string();
}

void seal(const std::vector<fs::path>& paths) {
  std::error_code ec;
  for (const auto& p : paths)
    if (fs::exists(p, ec))
      fs::permissions(p, fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove,
                      ec);
}

void seal_traverse_only(const std::vector<fs::path>& paths) {
  std::error_code ec;
  for (const auto& p : paths)
    if (fs::is_directory(p, ec))
      fs::permissions(p, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                      fs::perm_options::replace, ec);
}

void chown_tree(const fs::path& dir, uid_t uid) {
  std::error_code ec;
  if (::lchown(dir.c_str(), uid, static_cast<gid_t>(uid)) != 0) return;
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    (void)::lchown(it->path().c_str(), uid, static_cast<gid_t>(uid));
}

}  // namespace mgpu::grade
