// `mgpu plan --reproduce`: the published runs of tools/plan/anchors.json, priced on the one A100
// preset. The model's one fitted constant (compute_overhead) is fitted on Table 1 of Narayanan
// et al. 2021 and nothing else; Korthikanti et al. 2022's eight step times and its 22B layer are
// held out and judged by tolerance alone. And the hardware presets are data with a source for
// every number, the GEMM plateau a published matmul sweep's.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan/cli.hpp"
#include "plan/hardware.hpp"
#include "plan/reproduce.hpp"

using namespace mgpu::planner;

namespace {

struct Count {
  int rows = 0, within15 = 0, within20 = 0;
};

Count count(const std::vector<AnchorResult>& results, const std::string& group) {
  Count c;
  for (const auto& r : results) {
    if (r.anchor.group != group) continue;
    ++c.rows;
    c.within15 += std::abs(r.error) <= 0.15;
    c.within20 += std::abs(r.error) <= 0.20;
    MESSAGE(r.anchor.name << ": published " << r.anchor.published << ", predicted " << r.predicted
                          << " (" << 100 * r.error << "%)");
  }
  return c;
}

}  // namespace

TEST_CASE(
    "one constant is fitted, on Narayanan Table 1 alone, Korthikanti's held-out rows hold 20% on "
    "every row and 15% on 8 of 10") {
  const auto anchors = load_anchors(default_anchors_path());
  const auto results = reproduce(anchors);
  for (const auto& a : anchors) {
    CHECK(!a.source.empty());
    CHECK(a.fitted == (a.group == "table1"));
  }
  // The preset carries the value the fit gives, so it cannot have been tuned to other rows.
  const double fitted = fit_compute_overhead(anchors);
  CHECK(load_hardware("a100-80gb").compute_overhead == doctest::Approx(fitted).epsilon(0.02));
  // The fit reads the fitted rows only: moving every held-out row's published number leaves it
  // where it was, moving the fitted rows moves it.
  auto moved = anchors;
  for (auto& a : moved)
    if (!a.fitted) a.published *= 1.5;
  CHECK(fit_compute_overhead(moved) == fitted);
  for (auto& a : moved)
    if (a.fitted) a.published *= 0.9;
  CHECK(fit_compute_overhead(moved) > fitted);

  const Count table1 = count(results, "table1");
  CHECK(table1.rows == 10);
  CHECK(table1.within15 == 10);
  Count held;
  for (const char* group : {"step", "layer"}) {
    const Count c = count(results, group);
    held.rows += c.rows;
    held.within15 += c.within15;
    held.within20 += c.within20;
  }
  CHECK(held.rows == 10);
  CHECK(held.within20 == 10);
  CHECK(held.within15 >= 8);
  // Rows that only differ by hardware-independent choices share one preset: no row is tuned.
  for (const auto& a : anchors)
    if (a.group != "llama3") CHECK(a.hardware == "a100-80gb");
}

TEST_CASE("torchtitan's FSDP runs, held out, are within 15% in tokens per GPU per second") {
  const auto anchors = load_anchors(default_anchors_path());
  const auto results = reproduce(anchors);
  const Count fsdp = count(results, "fsdp");
  CHECK(fsdp.rows == 3);
  CHECK(fsdp.within15 == 3);
  for (const auto& r : results)
    if (r.anchor.group == "fsdp") {
      CHECK(r.anchor.layout.zero_stage == 3);
      // The rate is the step's tokens over its seconds and GPUs.
      const RunLayout& l = r.anchor.layout;
      CHECK(r.predicted ==
            doctest::Approx(static_cast<double>(r.anchor.model.global_batch * r.anchor.model.seq) /
                            (r.step.seconds * static_cast<double>(l.dp))));
    }
}

TEST_CASE("Llama 3 405B on H100, held out and on a preset nothing was fitted on, is within 15%") {
  const auto anchors = load_anchors(default_anchors_path());
  const Count llama3 = count(reproduce(anchors), "llama3");
  CHECK(llama3.rows == 3);
  CHECK(llama3.within15 == 3);
  for (const auto& a : anchors)
    if (a.group == "llama3") {
      CHECK(!a.fitted);
      CHECK(a.hardware == "h100-sxm");
    }
}

TEST_CASE(
    "a row's predicted time, the fitted overhead and the residual add up to what was published") {
  for (const auto& r : reproduce(load_anchors(default_anchors_path()))) {
    CAPTURE(r.anchor.name);
    CHECK(r.overhead_seconds > 0);
    if (r.anchor.measure == "step_seconds")
      CHECK(r.step.seconds + r.residual_seconds == doctest::Approx(r.anchor.published));
    if (r.anchor.measure == "layer_backward_ms")
      CHECK(1e3 * (r.step.layer_backward + r.residual_seconds) ==
            doctest::Approx(r.anchor.published));
    // A rate row: the published rate is the model's FLOPs over the published time.
    if (r.anchor.measure == "tflops_per_gpu")
      CHECK(r.predicted * r.step.seconds / (r.step.seconds + r.residual_seconds) ==
            doctest::Approx(r.anchor.published));
  }
}

TEST_CASE("each preset's GEMM plateau is the number its source cites, not a fitted one") {
  for (const auto& name : hardware_presets()) {
    const Hardware h = load_hardware(name);
    CAPTURE(name);
    const double plateau = h.gemm.points.back().second;
    const std::string& source = h.sources.at("gemm_efficiency");
    CHECK(source.find(fmt::format("{:.3f}", plateau)) != std::string::npos);
    CHECK(source.find("Maximum Achievable Matmul FLOPS") != std::string::npos);
  }
}

TEST_CASE("--reproduce prints every row and the per-step breakdown, a bad file is exit 2") {
  std::ostringstream out, err;
  CHECK(run_plan_cli({"--reproduce"}, out, err) == 0);
  const auto anchors = load_anchors(default_anchors_path());
  for (const auto& a : anchors) CHECK(out.str().find(a.name) != std::string::npos);
  CHECK(out.str().find("Where the time goes") != std::string::npos);
  std::ostringstream out2, err2;
  CHECK(run_plan_cli({"--reproduce", "/nonexistent/anchors.json"}, out2, err2) == 2);
  CHECK(err2.str().find("cannot be read") != std::string::npos);
}

TEST_CASE("every preset loads, gives every number a source, and survives a round trip") {
  const auto names = hardware_presets();
  CHECK(names.size() >= 3);
  for (const auto& name : names) {
    const Hardware h = load_hardware(name);
    CAPTURE(name);
    CHECK(h.name == name);
    CHECK(h.sources.size() == 14);  // 13 numbers and the GEMM curve, each with its source
    for (const auto& [field, source] : h.sources) CHECK(source.size() > 10);
    const Hardware back = parse_hardware(hardware_to_json(h), "round trip");
    CHECK(back.peak_flops == h.peak_flops);
    CHECK(back.compute_overhead == h.compute_overhead);
    CHECK(back.fused_attention_efficiency == h.fused_attention_efficiency);
    CHECK(back.network_bytes_per_s == h.network_bytes_per_s);
    CHECK(back.gemm.points == h.gemm.points);
    CHECK(back.sources == h.sources);
  }
}

TEST_CASE("a hardware file without a source, or with a bad number, is refused by name") {
  nlohmann::json j = hardware_to_json(load_hardware("a100-80gb"));
  j["hbm_bytes_per_s"].erase("source");
  CHECK_THROWS_WITH_AS(parse_hardware(j, "x.json"), doctest::Contains("hbm_bytes_per_s"),
                       std::invalid_argument);
  j = hardware_to_json(load_hardware("a100-80gb"));
  j["nvlink_efficiency"]["value"] = 1.5;
  CHECK_THROWS_WITH_AS(parse_hardware(j, "x.json"), doctest::Contains("nvlink_efficiency"),
                       std::invalid_argument);
  CHECK_THROWS_AS(load_hardware("no-such-gpu"), mgpu::tools::UsageError);
}

TEST_CASE("the GEMM curve interpolates in log size and is flat beyond its ends") {
  EfficiencyCurve c{{{1e9, 0.2}, {1e11, 0.6}}};
  CHECK(c.at(1e6) == 0.2);
  CHECK(c.at(1e10) == doctest::Approx(0.4));
  CHECK(c.at(1e14) == 0.6);
}

TEST_CASE("--reproduce --simulate runs Llama 3's ZeRO 2 row, 7-layer end stages in 2 chunks") {
  std::ostringstream out, err;
  REQUIRE(run_plan_cli({"--reproduce", "--simulate", "--only", "8,192 GPUs"}, out, err) == 0);
  CHECK(out.str().find("405B, 8K, 8,192 GPUs") != std::string::npos);
  CHECK(out.str().find("not simulated") == std::string::npos);
}
