// Tests of gpu_measure_hardware: the measurements file it writes is the one `mgpu plan
// --calibrate` reads (checked with the planner's own parser and calibration), and on a GPU the
// GEMM sweep gives times that make such a file.
#include "allreduce_bw/bench.hpp"
#include "common/lab_main.hpp"
#include "device.hpp"
#include "measure_hardware/measurements.hpp"
#include "plan/calibrate.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using namespace mgpu::gpu;
namespace planner = mgpu::planner;

TEST_CASE("GEMM sides double from the smallest and end at the largest") {
  CHECK(gemm_dims(256, 2048) == std::vector<int>{256, 512, 1024, 2048});
  CHECK(gemm_dims(256, 1500) == std::vector<int>{256, 512, 1024, 1500});
  CHECK(gemm_dims(64, 64) == std::vector<int>{64});
  CHECK_THROWS_AS(gemm_dims(0, 64), std::invalid_argument);
  CHECK_THROWS_AS(gemm_dims(128, 64), std::invalid_argument);
}

TEST_CASE("the measurements file calibrates a preset back to the rates it was timed at") {
  const planner::Hardware base = planner::load_hardware("a100-80gb");
  // GEMMs timed at a known fraction of peak by size, all-reduces at a known bus bandwidth.
  const auto fraction = [](int d) { return d < 1024 ? 0.4 : 0.65; };
  std::vector<GemmTiming> gemm;
  for (int d : gemm_dims(256, 4096))
    gemm.push_back({d, d, d, 2.0 * d * d * d / (fraction(d) * base.peak_flops)});
  const int ranks = 8;
  const double busbw = 0.7 * base.nvlink_bytes_per_s;  // bytes/s
  std::vector<BwRow> bw;
  for (std::size_t bytes : size_sweep(1u << 20, 64u << 20, 4)) {
    const double seconds = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / busbw;
    bw.push_back(make_row("all_reduce", bytes, bytes / 4, DType::f32, seconds * 1e6, 0, ranks));
    bw.push_back(make_row("all_gather", bytes, bytes / 4, DType::f32, 1.0, 0, ranks));
  }
  const auto j = measurements_json("test: a made-up server", gemm, bw, ranks, false);
  CHECK(j["gemm"].size() == gemm.size());
  CHECK(j["all_reduce"].size() == bw.size() / 2);  // the all-gather rows are left out
  CHECK(j["gemm"][0]["flops"].get<double>() == doctest::Approx(2.0 * 256 * 256 * 256));

  const planner::Measurements m = planner::parse_measurements(j, "test");
  const planner::Hardware h = planner::calibrate(base, m);
  CHECK(h.gemm.at(2.0 * 256 * 256 * 256) == doctest::Approx(0.4));
  CHECK(h.gemm.at(2.0 * 4096 * 4096 * 4096) == doctest::Approx(0.65));
  CHECK(h.nvlink_efficiency == doctest::Approx(0.7));
  CHECK(h.sources.at("nvlink_efficiency").find("a made-up server") != std::string::npos);
}

TEST_CASE("emulated or single-rank all-reduces are not written: they say nothing about links") {
  const std::vector<BwRow> bw{make_row("all_reduce", 1u << 20, 1u << 18, DType::f32, 50, 0, 2)};
  const std::vector<GemmTiming> gemm{{512, 512, 512, 1e-4}};
  CHECK(measurements_json("s", gemm, bw, 2, true)["all_reduce"].empty());
  CHECK(measurements_json("s", gemm, bw, 1, false)["all_reduce"].empty());
  CHECK(measurements_json("s", gemm, bw, 2, false)["all_reduce"].size() == 1);
}

MGPU_DEVICE_TEST_CASE("a GEMM sweep on the device makes a file the planner reads") {
  MGPU_REQUIRE_DEVICE();
  DeviceCluster cluster({1, Backend::emulated});
  const auto per_rank = run_ranks(
      cluster, [](DeviceComm& comm) { return gemm_sweep(comm, gemm_dims(256, 1024), 1, 3); });
  REQUIRE(per_rank[0].size() == 3);
  for (const GemmTiming& g : per_rank[0]) CHECK(g.seconds > 0);
  const auto j = measurements_json("device test", per_rank[0], {}, 1, true);
  const planner::Measurements m = planner::parse_measurements(j, "device test");
  CHECK(m.gemm.size() == 3);
}
