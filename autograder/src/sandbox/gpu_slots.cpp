// The GPU slots: K flock'ed lock files per device in one folder of the machine. Polling with
// LOCK_NB over all K, rather than blocking on one, takes whichever slot frees first.
#include "sandbox/gpu_slots.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

// A lock file name cannot be steered out of the folder, whatever the environment says.
std::string device_file_key(const std::string& device) {
  std::string key;
  for (char ch : device)
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')
      key += ch;
  return key.empty() || key == "." || key == ".." ? "0" : key.substr(0, 80);
}

// The first entry of a comma-separated list, trimmed; nullopt when the variable is unset/empty.
std::optional<std::string> first_entry(const char* var) {
  const char* v = std::getenv(var);
  if (!v || !*v) return std::nullopt;
  std::string s = v;
  s = s.substr(0, s.find(','));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
  if (s.empty()) return std::nullopt;
  return s;
}

// A folder of our own for the lock files: made 0700 when missing, never followed through a link,
// refused when another user owns it or may write it (they could hold every slot, or swap files).
int open_private_folder(const fs::path& dir, bool check_owner) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error(
        fmt::format("cannot make the GPU slots' folder {} ({}); fix: set MGPU_GPU_LOCK_DIR to a "
                    "folder the graders sharing these GPUs can write",
                    dir.string(), std::strerror(errno)));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0)
    throw std::runtime_error(fmt::format(
        "the GPU slots' folder {} cannot be opened ({}; a link is refused); fix: remove it, or "
        "set MGPU_GPU_LOCK_DIR to a folder",
        dir.string(), std::strerror(errno)));
  if (check_owner && (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)) {
    ::close(fd);
    throw std::runtime_error(
        fmt::format("the GPU slots' folder {} is owned by uid {} with mode {:04o}, not ours and "
                    "writable by us only; fix: remove it (rm -r {}) while no grader runs, or set "
                    "MGPU_GPU_LOCK_DIR",
                    dir.string(), st.st_uid, st.st_mode & 07777, dir.string()));
  }
  return fd;
}

int open_slot_folder() {
  if (const char* dir = std::getenv("MGPU_GPU_LOCK_DIR"); dir && *dir)
    return open_private_folder(dir, false);  // the instructor's choice, maybe shared by users
  if (::geteuid() == 0) return machine_lock_folder();
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && *runtime && fs::is_directory(runtime))
    return open_private_folder(fs::path(runtime) / "mgpu-grade", true);
  return open_private_folder(fmt::format("/tmp/mgpu-grade-{}", ::geteuid()), true);
}

}  // namespace

GpuSlot::GpuSlot(int dir_fd, const std::string& device, int slots) {
  if (slots < 1) slots = 1;
  const std::string key = device_file_key(device);
  std::vector<int> fds;
  for (int k = 0; k < slots; ++k) {
    const std::string name = fmt::format("gpu-{}-{}.lock", key, k);
    const int fd = ::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int e = errno;
      for (int f : fds) ::close(f);
      throw std::runtime_error(
          fmt::format("cannot open the GPU slot lock file {} ({}); fix: check MGPU_GPU_LOCK_DIR "
                      "or the folder's permissions",
                      name, std::strerror(e)));
    }
    fds.push_back(fd);
  }
  std::optional<Progress> waiting;  // shown only once a wait has begun
  for (;;) {
    for (int k = 0; k < slots && index_ < 0; ++k)
      if (::flock(fds[k], LOCK_EX | LOCK_NB) == 0) index_ = k;
    if (index_ >= 0) break;
    if (!waiting)
      waiting.emplace(fmt::format("waiting for a GPU slot on device {} ({} lab{} at a time)", key,
                                  slots, slots == 1 ? "" : "s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int k = 0; k < slots; ++k)
    if (k != index_) ::close(fds[k]);
  fd_ = fds[index_];
}

GpuSlot::~GpuSlot() {
  if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the lock
}

int gpu_slot_folder() {
  // Opened once: every lab of every batch worker locks in the same folder.
  static std::once_flag once;
  static int fd = -1;
  static std::string problem;
  std::call_once(once, [] {
    try {
      fd = open_slot_folder();
    } catch (const std::exception& e) {
      problem = e.what();
    }
  });
  if (fd < 0) throw std::runtime_error(problem);
  return fd;
}

std::string gpu_slot_device() {
  for (const char* var : {"MGPU_GPU_SLOT_KEY", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"})
    if (auto v = first_entry(var)) return *v;
  if (auto v = first_entry("CUDA_VISIBLE_DEVICES")) return *v;
  return "0";
}

}  // namespace mgpu::grade
