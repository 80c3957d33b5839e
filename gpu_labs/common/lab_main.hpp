// What every lab program does around its body: turn "not implemented" and errors into a
// RESULT line that gpu_labs/check.sh can read, and a matching exit status.
#pragma once

#include "common/comm.hpp"

#include <functional>
#include <string>

namespace mgpu::gpu {

/// Exit status of a lab program: 0 pass, 1 failed check or error, 2 exercise not implemented.
enum LabExit { lab_pass = 0, lab_fail = 1, lab_not_implemented = 2 };

/// Runs `body` (which prints its own RESULT line and returns a LabExit). If it throws
/// mgpu::NotImplemented, prints `RESULT lab=<lab> impl=... check=not_implemented ...` and returns
/// 2; any other exception: the message on stderr, `check=error`, and 1.
int guarded_main(const std::string& lab, const std::function<int()>& body);

/// "solution" or "student": the MGPU_IMPL this program was built with.
const char* built_impl();

/// The two options every lab takes; each main registers them with CLI11.
struct CommonOptions {
  int ranks = 0;                 ///< --ranks: 0 means one per visible GPU
  std::string backend = "auto";  ///< --backend auto|nccl|emulated
  /// The ClusterOptions these options describe.
  ClusterOptions cluster() const { return {ranks, parse_backend(backend)}; }
};

/// The line printed under every lab's timings when they come from the emulation.
std::string timing_note(const DeviceCluster& cluster);

}  // namespace mgpu::gpu
