// Shared by the GPU labs' device tests: skip, never fail, where there is no CUDA device.
#pragma once

#include "common/comm.hpp"

#include <cstdio>

namespace mgpu::gpu::test {

/// True when a CUDA device is visible. The first time it is false, prints one line saying why
/// the device tests are skipped; each device test then returns early.
inline bool have_device() {
  static const bool have = [] {
    const int n = DeviceCluster::device_count();
    if (n == 0) std::printf("gpu_labs: no CUDA device visible, device tests skipped (host tests still run)\n");
    return n > 0;
  }();
  return have;
}

}  // namespace mgpu::gpu::test
