// The wrapper every lab main runs in; see lab_main.hpp.
#include "common/lab_main.hpp"

#include "common/report.hpp"

#include <mgpu/not_implemented.hpp>

#include <cstdio>
#include <exception>

#ifndef MGPU_IMPL_NAME
#define MGPU_IMPL_NAME "unknown"
#endif

namespace mgpu::gpu {

const char* built_impl() { return MGPU_IMPL_NAME; }

int guarded_main(const std::string& lab, const std::function<int()>& body) {
  try {
    return body();
  } catch (const mgpu::NotImplemented& e) {
    std::printf("%s\n%s\n", e.what(),
                ResultLine(lab).add("impl", built_impl()).add("check", "not_implemented").add("note", e.what()).str().c_str());
    return lab_not_implemented;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::printf("%s\n", ResultLine(lab).add("impl", built_impl()).add("check", "error").str().c_str());
    return lab_fail;
  }
}

std::string timing_note(const DeviceCluster& cluster) {
  if (cluster.timing_representative()) return "";
  return "note: " + std::to_string(cluster.ranks()) +
         " ranks emulated on one GPU: results are checked, but timings are not representative";
}

}  // namespace mgpu::gpu
