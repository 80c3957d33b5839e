// Landlock views (landlock.hpp).
#include "sandbox/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

// Newer than the kernel headers of some systems (Linux 6.2): the kernel tells its ABI at run time.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

namespace mgpu::grade {

namespace fs = std::filesystem;

namespace {

// The ruleset's attributes as of ABI 6, which older headers lack: the kernel reads as much of
// the struct as the size passed says.
struct RulesetAttr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;  // ABI 4: left 0, networking is seccomp's
  std::uint64_t scoped = 0;              // ABI 6
};

}  // namespace

FsView case_view(const fs::path& workdir, const std::vector<fs::path>& devices) {
  FsView v{{"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys"},
           {workdir},
           {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}};
  v.devices.insert(v.devices.end(), devices.begin(), devices.end());
  return v;
}

int landlock_abi() {
  static const int abi = [] {
    const long v =
        ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : static_cast<int>(v);
  }();
  return abi;
}

int landlock_ruleset(const FsView& view) {
  const int abi = landlock_abi();
  if (abi < 1) return -1;
  constexpr std::uint64_t read =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  std::uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: execute to make_sym
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  std::uint64_t truncate = 0;
  if (abi >= 3) truncate = LANDLOCK_ACCESS_FS_TRUNCATE;
  all |= truncate;
  RulesetAttr attr;
  attr.handled_access_fs = all;
  // From ABI 6 a confined process may signal only processes of its own domain or one nested in
  // it: a rank cannot signal its host or its peers, a case not the grader.
  std::size_t attr_size = offsetof(RulesetAttr, handled_access_net);
  if (abi >= 6) {
    attr.scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
    attr_size = sizeof attr;
  }
  const int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0));
  if (ruleset < 0) return -1;
  auto allow = [&](const fs::path& path, std::uint64_t access) {
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    // A rule on a file may only hold file rights.
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
      access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                LANDLOCK_ACCESS_FS_WRITE_FILE | truncate;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = access;
    rule.parent_fd = fd;
    ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    ::close(fd);
  };
  for (const auto& p : view.read_only) allow(p, read);
  for (const auto& p : view.devices)
    allow(p, LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                 LANDLOCK_ACCESS_FS_WRITE_FILE | truncate);
  for (const auto& p : view.read_write) allow(p, all);
  return ruleset;
}

bool confine_to(const FsView& view) {
  const int ruleset = landlock_ruleset(view);
  if (ruleset < 0) return false;
  const bool ok = ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                  ::syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  const int err = errno;
  ::close(ruleset);
  if (!ok)
    throw std::runtime_error(std::string("cannot confine to its folder: ") + std::strerror(err));
  return true;
}

}  // namespace mgpu::grade
