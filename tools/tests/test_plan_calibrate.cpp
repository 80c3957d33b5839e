// `mgpu plan --calibrate`: measurements of a made-up server, generated here from a known GEMM
// efficiency and a known link (latency plus bytes over bus bandwidth), come back out of the
// calibrated file as that efficiency and that link, and the file is one --hardware reads.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan/calibrate.hpp"
#include "plan/cli.hpp"
#include "plan/step_time.hpp"

using namespace mgpu::planner;

namespace {

// A server whose GEMMs reach 30% of the A100 peak at 1e9 FLOPs and 80% from 1e11, and whose
// 8-GPU all-reduce costs 15 us plus the ring's bytes at 250 GB/s of bus bandwidth.
nlohmann::json synthetic_measurements() {
  const double peak = 312e12;
  nlohmann::json j;
  j["source"] = "test: a made-up server";
  j["gemm"] = nlohmann::json::array();
  for (const auto& [flops, e] : {std::pair{1e9, 0.3}, {1e10, 0.55}, {1e11, 0.8}, {1e12, 0.8}})
    j["gemm"].push_back({{"flops", flops}, {"seconds", flops / (e * peak)}});
  j["all_reduce"] = nlohmann::json::array();
  for (double bytes : {8.0, 1e6, 1e8, 1e9})
    j["all_reduce"].push_back(
        {{"bytes", bytes}, {"ranks", 8}, {"seconds", 15e-6 + 2 * 7.0 / 8 * bytes / 250e9}});
  return j;
}

}  // namespace

TEST_CASE("calibrating recovers the GEMM curve and the link the measurements were made from") {
  const Hardware base = load_hardware("a100-80gb");
  const Hardware h = calibrate(base, parse_measurements(synthetic_measurements(), "test"));
  CHECK(h.gemm.at(1e9) == doctest::Approx(0.3));
  CHECK(h.gemm.at(1e10) == doctest::Approx(0.55));
  CHECK(h.gemm.at(3e11) == doctest::Approx(0.8));
  CHECK(h.nvlink_latency_s == doctest::Approx(15e-6).epsilon(1e-3));
  CHECK(h.nvlink_efficiency == doctest::Approx(250e9 / 300e9).epsilon(1e-3));
  CHECK(h.sources.at("gemm_efficiency").find("made-up server") != std::string::npos);
  CHECK(h.peak_flops == base.peak_flops);  // what was not measured stays the preset's
  CHECK(h.sources.at("peak_bf16_flops") == base.sources.at("peak_bf16_flops"));
}

TEST_CASE(
    "--calibrate writes a file that --hardware reads, and a step on it uses the measurements") {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string measured = (dir / "mgpu-test-measured.json").string();
  const std::string written = (dir / "mgpu-test-calibrated.json").string();
  std::ofstream(measured) << synthetic_measurements().dump();
  std::ostringstream out, err;
  REQUIRE(run_plan_cli({"--calibrate", "a100-80gb", measured, written}, out, err) == 0);
  const Hardware h = load_hardware(written);
  CHECK(h.name == "a100-80gb-calibrated");
  CHECK(h.gemm.at(1e9) == doctest::Approx(0.3));
  // The measured curve, below the preset's (the preset's plateau is the best published matmul
  // sweep, 0.869), gives a slower step for the same run.
  const RunModel md{
      .layers = 24, .hidden = 4096, .heads = 32, .seq = 2048, .vocab = 51200, .global_batch = 64};
  const RunLayout l{.tp = 8, .dp = 1, .micro_batch = 4};
  CHECK(step_time(md, l, h).seconds > step_time(md, l, load_hardware("a100-80gb")).seconds);
  std::filesystem::remove(measured);
  std::filesystem::remove(written);
}

TEST_CASE("measurements without a source, or faster than the preset's peak, are refused") {
  nlohmann::json j = synthetic_measurements();
  j.erase("source");
  CHECK_THROWS_AS(parse_measurements(j, "m.json"), std::invalid_argument);
  j = synthetic_measurements();
  j["gemm"][0]["seconds"] = 1e9 / 400e12;  // 400 TFLOP/s on a 312 TFLOP/s preset
  CHECK_THROWS_WITH_AS(calibrate(load_hardware("a100-80gb"), parse_measurements(j, "m.json")),
                       doctest::Contains("peak is too low"), std::invalid_argument);
  std::ostringstream out, err;
  CHECK(run_plan_cli({"--calibrate", "a100-80gb"}, out, err) == 2);
}
