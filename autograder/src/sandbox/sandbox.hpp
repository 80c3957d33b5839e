// How a graded case is sealed off from everything but itself (see autograder/SECURITY.md).
// Preferred: Linux namespaces through bubblewrap: the case sees only the system's libraries, its
// program and an empty folder, has no network, and dies with its PID namespace. Where user
// namespaces are unavailable (an unprivileged container) a root grader falls back to a distinct
// uid per running case, swept after the case. A non-root grader without namespaces refuses.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/landlock.hpp"

namespace mgpu::grade {

/// How cases are isolated on this machine.
enum class SandboxKind {
  namespaces,  ///< bubblewrap: own mount, PID, network, IPC and user namespaces
  uid,         ///< fallback as root: a throwaway uid per running case, killed entirely afterwards
  none,        ///< neither is possible: the grader refuses to run untrusted code
};

/// The sandbox of this process, detected once. MGPU_SANDBOX=namespaces|uid in the environment
/// forces one (the tests use it to check the fallback).
struct SandboxInfo {
  SandboxKind kind = SandboxKind::none;
  std::string why;  ///< for none: what is missing and how to fix it
};
const SandboxInfo& sandbox();
std::string_view to_string(SandboxKind kind);

/// Throws std::runtime_error naming the fix when cases cannot be isolated here.
void require_sandbox();

/// A uid reserved for one running case (root only), exclusive across every grader process of the
/// machine through a lock file in /run/mgpu-grade (whatever their TMPDIR); its processes are all
/// killed when the lease ends.
class UidLease {
 public:
  UidLease();  ///< takes a free uid, or none (held() false) when not root or all are taken
  ~UidLease();
  UidLease(const UidLease&) = delete;
  UidLease& operator=(const UidLease&) = delete;
  bool held() const { return fd_ >= 0; }
  uid_t uid() const { return uid_; }

 private:
  int fd_ = -1;
  uid_t uid_ = 0;
};

/// Opens (creating it, mode 0700, if missing) the folder of the leases' lock files; returns its
/// descriptor. Throws naming the fix when another user could make, swap or write it: a parent
/// that is not root's or that others may write, a link, or a folder that is not root's with mode
/// 0700. The grader uses /run/mgpu-grade; the tests try others.
int open_lease_folder(const std::filesystem::path& folder);

/// The lease folder (/run/mgpu-grade) opened by open_lease_folder, once per process: the one
/// folder every root grader of the machine shares, which the GPU slots (gpu_slots.hpp) use too.
/// Throws naming the problem and its fix when it is unsafe or cannot be made.
int machine_lock_folder();

/// SIGKILLs every process of uid until none is left.
void kill_uid(uid_t uid);

/// At start: kills what earlier graders (killed with SIGKILL) left running under case uids no
/// live grader holds (the leases' lock files tell, machine-wide), and removes the case folders in
/// $TMPDIR of graders that are gone.
void sweep_leftovers();

/// Resident bytes of the processes descended from root, plus those owned by uid when given: a
/// case's whole tree, wherever its processes moved to.
std::uint64_t tree_resident_bytes(pid_t root, std::optional<uid_t> uid);

/// What a case's folders hold.
struct DiskUse {
  std::uint64_t bytes = 0;  ///< bytes of the blocks they use
  std::uint64_t files = 0;  ///< entries: files, folders, links
  bool too_deep = false;    ///< folders nested deeper than the walk follows (over any limit)
};

/// The uid sandbox: what the case folder `folder` holds, walked without following links, a file
/// with several links counted once and `skip` (the case's own links to its programs) not at all;
/// plus, with uid, the files on the same file system that processes of uid hold open after
/// deleting them. Counting stops past max_files entries.
DiskUse folder_use(const std::filesystem::path& folder,
                   const std::vector<std::filesystem::path>& skip, std::optional<uid_t> uid,
                   std::uint64_t max_files);

/// The folders a case in bubblewrap may write: memory folders (tmpfs) of bwrap_command's size.
inline const std::vector<std::string> kCaseMemoryFolders{"/case", "/tmp", "/dev/shm"};

/// Namespaces: kCaseMemoryFolders of the bubblewrap sandbox started as process `bwrap`, opened
/// (O_PATH) through its process inside once bubblewrap has set its root up; empty before, or when
/// they cannot be told from the host's. Held open, they stay measurable after the case has ended.
std::vector<int> open_sandbox_folders(pid_t bwrap);

/// What memory folders opened by open_sandbox_folders hold (deleted files still open included).
DiskUse memory_folders_use(const std::vector<int>& fds);

/// What a case in bubblewrap is given.
struct BwrapCase {
  std::filesystem::path program;  ///< the program; its file name names it inside (/program/<name>)
  int program_fd = -1;  ///< the child's descriptor the program is copied from; -1: `program` is a
                        ///< path already in view (/usr/bin/true, for the probe)
  std::filesystem::path companion;  ///< a second program, beside the first (/program/<name>)
  int companion_fd = -1;            ///< the child's descriptor it is copied from; -1: none
  int seccomp_fd = -1;  ///< the child's descriptor holding case_seccomp_program(); -1: none
  int block_fd = -1;    ///< the child's descriptor bubblewrap waits on, its sandbox set up, before
                        ///< it starts the program (the grader opens the folders then); -1: none
  std::uint64_t tmpfs_bytes = 64ull << 20;     ///< size of each of kCaseMemoryFolders
  std::vector<std::filesystem::path> devices;  ///< device nodes bound at their own paths
};

/// The bubblewrap command line of a case: the system's programs and libraries read-only, a fresh
/// /proc and /dev, and small empty memory folders, /tmp, /dev/shm and /case (its working folder
/// and HOME); everything else, the root and /dev included, is read-only, so these are all it can
/// fill. The program is copied in from a descriptor, so nothing in the case's view (not even
/// /proc/self/mountinfo) names a folder of the host. Each of `devices` (a GPU's nodes) is bound
/// at its own path, and then /sys is visible read-only, as the CUDA driver needs.
std::vector<std::string> bwrap_command(const BwrapCase& c);

/// The system-call filter of every case, in both sandboxes, as the bytes of a classic BPF program
/// (struct sock_filter entries) made with libseccomp once. Denied (EPERM, or ENOSYS for clone3,
/// which glibc then replaces with clone): socket() of any family (no network, no abstract Unix
/// socket shared with another case in the fallback; socketpair(AF_UNIX) stays, for ranks in
/// processes of their own), ptrace, process_vm_readv/writev, pidfd_getfd, kcmp, perf_event_open,
/// bpf, userfaultfd, io_uring (it can open sockets past the filter), the keyring, System V IPC
/// (shared between cases without an IPC namespace), new namespaces, mounts and the other calls
/// only an administrator needs. fork, clone without namespace flags, memfd_create and mmap stay.
/// Empty when libseccomp could not build it; sandbox() is then none.
const std::string& case_seccomp_program();

/// Where a case's working folder is created: tmp/mgpu-case-<grader pid>-XXXXXX.
std::string case_dir_template();

/// Makes the reference, its results and the solutions readable by the grader's user only, so a
/// case running as another uid cannot read them even outside namespaces.
void seal(const std::vector<std::filesystem::path>& paths);

/// Folders on the way to the student build trees (build/, the work folder, its student/): mode
/// 0711, so a build uid can pass through to the one folder it owns but list nothing.
void seal_traverse_only(const std::vector<std::filesystem::path>& paths);

/// Gives a folder and everything in it to uid (and gid uid), mode 0700 on the folder itself: a
/// student build in the uid sandbox owns its submission's folder while it runs, and root owns it
/// again afterwards, so no case uid can read another submission's sources or objects.
void chown_tree(const std::filesystem::path& dir, uid_t uid);

}  // namespace mgpu::grade
