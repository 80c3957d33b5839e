// Shared formatting of the chapter demos; see common.hpp.
#include "common.hpp"

#include <fmt/core.h>

#include <string_view>

#include "mgpu/not_implemented.hpp"

namespace mgpu::demo {

std::string human_bytes(double bytes) {
  if (bytes >= 1 << 20) return fmt::format("{:.2f} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:.1f} KiB", bytes / (1 << 10));
  return fmt::format("{:.0f} B", bytes);
}

std::string us(double seconds) { return fmt::format("{:.1f} us", seconds * 1e6); }

std::string predict(const std::function<double()>& formula,
                    const std::function<std::string(double)>& show) {
  try {
    return show(formula());
  } catch (const NotImplemented&) {
    return "TODO";
  }
}

ClusterConfig slow_cluster(int ranks, double flops, double bandwidth) {
  ClusterConfig cc;
  cc.world_size = ranks;
  cc.flops_per_second = flops;
  cc.intra_node_bandwidth = bandwidth;
  cc.inter_node_bandwidth = bandwidth / 9;
  return cc;
}

// MGPU_DEMO_IMPL is set by CMake to the build's MGPU_IMPL.
bool reference_build() { return std::string_view(MGPU_DEMO_IMPL) == "solution"; }
std::string whose() { return reference_build() ? "the reference" : "your"; }

}  // namespace mgpu::demo
