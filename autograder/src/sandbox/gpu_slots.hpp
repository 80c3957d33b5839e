// A counting lock on a GPU: at most K labs run on one device at a time, across every thread,
// batch worker and grader process of the machine. ZeRO-3 at a real shape takes tens of GB of
// device memory, so `grade-batch --jobs 7` must not start seven of them on one 80 GB card.
// The lock is K lock files per device in a machine-wide folder, each held with flock: the kernel
// releases a slot when its holder exits, however it exits, so a killed grader never leaves a
// device blocked.
#pragma once

#include <string>

namespace mgpu::grade {

/// One of the `slots` places on `device`, held from construction to destruction.
class GpuSlot {
 public:
  /// Waits until one of the lock files gpu-<device>-<k>.lock, k < slots, in the folder `dir_fd`
  /// can be locked, and holds it. `device` is a key such as gpu_slot_device() gives (only
  /// letters, digits, '-', '_' and '.' are kept). Throws when a lock file cannot be opened.
  GpuSlot(int dir_fd, const std::string& device, int slots);
  ~GpuSlot();
  GpuSlot(const GpuSlot&) = delete;
  GpuSlot& operator=(const GpuSlot&) = delete;
  int index() const { return index_; }  ///< which of the slots is held

 private:
  int fd_ = -1;
  int index_ = -1;
};

/// The folder of the slots' lock files, opened once for the process: MGPU_GPU_LOCK_DIR when set;
/// else, as root, the folder the case uids' leases live in (/run/mgpu-grade, one for the whole
/// machine); else $XDG_RUNTIME_DIR/mgpu-grade or /tmp/mgpu-grade-<uid>. A folder made here is
/// 0700; one that is a link, not ours or writable by others is refused, naming the fix.
int gpu_slot_folder();

/// The key of the device the labs run on, for the slots: MGPU_GPU_SLOT_KEY when set; else the
/// first GPU of Slurm's allocation (SLURM_STEP_GPUS, SLURM_JOB_GPUS: physical indices, so two jobs
/// each given one GPU of a node, both with CUDA_VISIBLE_DEVICES=0, do not share slots); else the
/// first entry of CUDA_VISIBLE_DEVICES (an index or a GPU UUID); else "0", the device every
/// lab's rank 0 and every emulated rank runs on.
std::string gpu_slot_device();

}  // namespace mgpu::grade
