// Shared by the GPU labs' device tests. Where no CUDA device can be used, a device test is
// skipped (doctest counts it under "skipped", and the reason is printed once), never passed.
// With MGPU_REQUIRE_GPU=1 in the environment a device test runs regardless and fails with that
// reason, so a GPU machine that cannot actually run CUDA is never mistaken for a green run.
#pragma once

#include "common/comm.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mgpu::gpu::test {

/// True when MGPU_REQUIRE_GPU is set to anything but "" or "0".
inline bool gpu_required() {
  const char* v = std::getenv("MGPU_REQUIRE_GPU");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

/// Whether device tests are skipped, given what the device query found and whether a GPU is
/// required: skipped only when no device can be used and none is required.
inline bool skip_device_tests(const DeviceQuery& query, bool required) {
  return !query.usable() && !required;
}

/// The device query, made once per test program. When no device can be used, prints one line
/// with the query's error name, code and message, and whether the device tests skip or fail, to
/// stderr: stdout is the program's list of test cases when CTest asks for it.
inline const DeviceQuery& device_query() {
  static const DeviceQuery query = [] {
    const DeviceQuery q = DeviceCluster::query_devices();
    if (!q.usable()) {
      std::fprintf(stderr, "gpu_labs: device tests %s: %s\n",
                   gpu_required() ? "FAIL (MGPU_REQUIRE_GPU is set)"
                                  : "skipped (set MGPU_REQUIRE_GPU=1 to fail them)",
                   q.describe().c_str());
    }
    return q;
  }();
  return query;
}

/// The decorator's argument: evaluated when the test registers, before main.
inline bool skip_device_tests() { return skip_device_tests(device_query(), gpu_required()); }

}  // namespace mgpu::gpu::test

/// A test that needs a CUDA device: in test suite "device" (`-ts=device` runs only these), and
/// skipped where no device can be used unless MGPU_REQUIRE_GPU is set.
#define MGPU_DEVICE_TEST_CASE(name)               \
  TEST_CASE(name* doctest::test_suite("device") * \
            doctest::skip(::mgpu::gpu::test::skip_device_tests()))

/// First line of every device test: fails it with the query's reason when there is no usable
/// device (reached only when MGPU_REQUIRE_GPU is set, since the test is skipped otherwise).
#define MGPU_REQUIRE_DEVICE()                                 \
  REQUIRE_MESSAGE(::mgpu::gpu::test::device_query().usable(), \
                  ::mgpu::gpu::test::device_query().describe())
