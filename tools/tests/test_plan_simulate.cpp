// `mgpu plan --simulate`: the step run on the simulated cluster against the analytic model it
// shares its per-operation seconds with. With communication free the two must agree exactly,
// since the schedule's fill and drain is then exactly the model's bubble; with communication on
// they differ only by what the timeline adds (sends overlapping compute, the collective's ring
// latencies), within 3% on the published runs. Context parallelism and ZeRO 2 and 3 are
// checked the same way with communication free, and on real links by each group's bytes, which
// the simulation sends and the step model counts apart. The trace is the simulated cluster's own.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "gpt_model.hpp"
#include "plan/cli.hpp"
#include "plan/hardware.hpp"
#include "plan/reproduce.hpp"
#include "plan/simulate.hpp"

using namespace mgpu::planner;
using tools_test::gpt;

TEST_CASE("with communication free the simulated step is the analytic step exactly") {
  const Hardware free = without_communication(load_hardware("a100-80gb"));
  struct Case {
    RunModel model;
    RunLayout layout;
  };
  const Case cases[] = {
      {gpt(24, 4096, 32, 16), {.tp = 4, .pp = 1, .dp = 2, .micro_batch = 2}},
      {gpt(32, 4096, 32, 16), {.tp = 8, .pp = 4, .dp = 1, .micro_batch = 2}},
      {gpt(32, 4096, 32, 32),
       {.tp = 4,
        .pp = 4,
        .dp = 2,
        .micro_batch = 2,
        .interleave = 2,
        .recompute = Recompute::full}},
      {gpt(48, 6144, 48, 36),
       {.tp = 8,
        .pp = 2,
        .dp = 3,
        .micro_batch = 1,
        .interleave = 3,
        .recompute = Recompute::selective,
        .sequence_parallel = true}},
      {gpt(30, 4096, 32, 24),
       {.tp = 2, .pp = 3, .dp = 2, .micro_batch = 1, .zero_stage = 1, .dp_overlap = false}},
  };
  for (const Case& c : cases) {
    const SimulatedStep s = simulate_step(c.model, c.layout, free);
    CAPTURE(c.layout.pp);
    CAPTURE(c.layout.interleave);
    CAPTURE(c.layout.dp);
    CHECK(s.analytic.p2p == 0);
    CHECK(s.analytic.exposed_dp == 0);
    if (c.layout.pp > 1) CHECK(s.analytic.bubble > 0);  // the schedule has something to match
    CHECK(s.ranks == c.layout.pp * c.layout.dp);
    CHECK(s.seconds == doctest::Approx(s.analytic.seconds).epsilon(1e-12));
  }
}

namespace {

// Layouts with context parallelism and ZeRO 2 and 3, pipelined, replicated, interleaved or not.
struct Sharded {
  const char* name;
  RunModel model;
  RunLayout layout;
};

std::vector<Sharded> sharded_layouts() {
  return {
      {"cp 2, ZeRO 1",
       gpt(24, 4096, 32, 8),
       {.tp = 2, .pp = 2, .dp = 2, .cp = 2, .micro_batch = 1, .zero_stage = 1}},
      {"cp 4, interleaved, full recompute",
       gpt(32, 4096, 32, 8),
       {.tp = 2,
        .pp = 4,
        .dp = 1,
        .cp = 4,
        .micro_batch = 1,
        .interleave = 2,
        .recompute = Recompute::full}},
      {"ZeRO 2, cp 2, interleaved, overlapped",
       gpt(24, 4096, 32, 16),
       {.tp = 4,
        .pp = 2,
        .dp = 2,
        .cp = 2,
        .micro_batch = 2,
        .interleave = 2,
        .zero_stage = 2,
        .dp_overlap = true}},
      {"ZeRO 2",
       gpt(30, 4096, 32, 18),
       {.tp = 2, .pp = 3, .dp = 3, .micro_batch = 1, .zero_stage = 2}},
      {"ZeRO 3",
       gpt(24, 4096, 32, 8),
       {.tp = 4, .pp = 2, .dp = 2, .micro_batch = 1, .zero_stage = 3}},
      {"ZeRO 3, cp 4, interleaved, overlapped, selective, flash",
       gpt(32, 4096, 32, 8),
       {.tp = 2,
        .pp = 2,
        .dp = 2,
        .cp = 4,
        .micro_batch = 1,
        .interleave = 2,
        .recompute = Recompute::selective,
        .flash_attention = true,
        .zero_stage = 3,
        .dp_overlap = true}},
      // 7 layers in 2 chunks on the end stages: 3.5 layers a chunk, as the step model counts.
      {"ZeRO 3, cp 2, uneven stages interleaved",
       gpt(30, 4096, 32, 8),
       {.tp = 2,
        .pp = 4,
        .dp = 1,
        .cp = 2,
        .micro_batch = 1,
        .interleave = 2,
        .first_stage_layers = 7,
        .last_stage_layers = 7,
        .zero_stage = 3}},
  };
}

}  // namespace

TEST_CASE(
    "cp and ZeRO 2 and 3: free communication gives the analytic step, real links what "
    "the model counts") {
  const Hardware real = load_hardware("a100-80gb");
  const Hardware free = without_communication(real);
  double worst = 0;
  for (const Sharded& c : sharded_layouts()) {
    CAPTURE(c.name);
    const RunLayout& l = c.layout;
    const SimulatedStep f = simulate_step(c.model, l, free);
    CHECK(f.ranks == l.cp * l.pp * l.dp);
    CHECK(f.analytic.exposed_cp == 0);
    CHECK(f.analytic.exposed_dp == 0);
    CHECK(f.analytic.bubble > 0);
    CHECK(f.seconds == doctest::Approx(f.analytic.seconds).epsilon(0.03));
    worst = std::max(worst, std::abs(f.seconds / f.analytic.seconds - 1));

    // On real links the ring's blocks and the ZeRO collectives are sent, and each group's bytes
    // are what the step model counts for it: a simulation that left out the ring's exchange or
    // ZeRO 3's gathers would send fewer.
    const SimulatedStep s = simulate_step(c.model, l, real);
    CHECK(s.seconds >= f.seconds);
    CHECK(s.analytic.pp_bytes > 0);
    CHECK(s.pp_bytes == doctest::Approx(s.analytic.pp_bytes).epsilon(1e-6));
    CHECK((s.analytic.cp_bytes > 0) == (l.cp > 1));
    CHECK(s.cp_bytes == doctest::Approx(s.analytic.cp_bytes).epsilon(1e-6));
    CHECK(s.analytic.dp_bytes > 0);
    CHECK(s.dp_bytes == doctest::Approx(s.analytic.dp_bytes).epsilon(1e-6));
    // Where the data-parallel collectives come after the schedule (ZeRO 0 and 1) the two
    // timelines also agree on real links, on the same links: with dp 1 the gradient group is the
    // cp group, inside a server. ZeRO 2 and 3's collectives inside each micro-batch also stretch
    // the fill and drain and share the network lane with the sends, which the model does not
    // charge.
    if (l.zero_stage < 2) CHECK(s.seconds == doctest::Approx(s.analytic.seconds).epsilon(0.03));
    MESSAGE(
        fmt::format("{}: free {:+.2e}, real links {:+.2f}% (simulated {:.4f} s, analytic {:.4f} s)",
                    c.name, f.seconds / f.analytic.seconds - 1,
                    100 * (s.seconds / s.analytic.seconds - 1), s.seconds, s.analytic.seconds));
  }
  MESSAGE(fmt::format("worst simulated / analytic - 1 with communication free: {:.2e}", worst));
}

TEST_CASE("with communication the simulation is within 3% of the model on the published runs") {
  std::map<std::string, Hardware> presets;
  int rows = 0;
  for (const Anchor& a : load_anchors(default_anchors_path())) {
    if (a.group != "table1" && a.group != "step") continue;
    if (!presets.count(a.hardware)) presets.emplace(a.hardware, load_hardware(a.hardware));
    const SimulatedStep s = simulate_step(a.model, a.layout, presets.at(a.hardware));
    CAPTURE(a.name);
    CHECK(s.seconds == doctest::Approx(s.analytic.seconds).epsilon(0.03));
    ++rows;
  }
  CHECK(rows == 18);  // ten Table 1 rows, eight Korthikanti steps
}

TEST_CASE("--simulate prints the simulated step and --trace writes its Chrome trace") {
  const std::string path = "test_plan_simulate_trace.json";
  std::ostringstream out, err;
  const int status = run_plan_cli({"--params",
                                   "6.7e9",
                                   "--gpus",
                                   "64",
                                   "--layers",
                                   "32",
                                   "--hidden",
                                   "4096",
                                   "--heads",
                                   "32",
                                   "--seq",
                                   "2048",
                                   "--tp",
                                   "8",
                                   "--pp",
                                   "4",
                                   "--micro-batch",
                                   "1",
                                   "--micro-batches",
                                   "8",
                                   "--interleave",
                                   "2",
                                   "--vocab",
                                   "51200",
                                   "--hardware",
                                   "a100-80gb",
                                   "--simulate",
                                   "--trace",
                                   path},
                                  out, err);
  REQUIRE_MESSAGE(status == 0, err.str());
  CHECK(out.str().find("simulated cluster (8 rank threads") != std::string::npos);
  std::ifstream in(path);
  REQUIRE(in);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::set<int> ranks;
  std::set<std::string> lanes;
  int forwards = 0;
  for (const auto& e : trace.at("traceEvents")) {
    ranks.insert(e.at("pid").get<int>());
    if (e.at("name") == "thread_name") lanes.insert(e.at("args").at("name").get<std::string>());
    if (e.at("name").get<std::string>().rfind("fwd ", 0) == 0) ++forwards;
  }
  CHECK(ranks.size() == 8);
  CHECK(lanes.count("network") == 1);  // a server holds one rank of tp 8: every send crosses
  CHECK(forwards == 8 * 8 * 2);        // every rank: m micro-batches through v chunks
  std::remove(path.c_str());

  std::ostringstream out2, err2;
  CHECK(run_plan_cli({"--params", "6.7e9", "--gpus", "8", "--layers", "32", "--hidden", "4096",
                      "--heads", "32", "--seq", "2048", "--hardware", "a100-80gb", "--vocab",
                      "51200", "--trace", "x.json"},
                     out2, err2) == kExitUsage);
  CHECK(err2.str().find("--simulate") != std::string::npos);
}

TEST_CASE("--reproduce --simulate prints the selected anchor rows, a bad argument is exit 2") {
  std::ostringstream out, err;
  REQUIRE(run_plan_cli({"--reproduce", "--simulate", "--only", "22B"}, out, err) == 0);
  CHECK(out.str().find("22B, full recompute") != std::string::npos);
  CHECK(out.str().find("22B, selective + sp") != std::string::npos);
  CHECK(out.str().find("175B") == std::string::npos);
  CHECK(out.str().find("layer") == std::string::npos);  // layer rows time no step
  std::ostringstream out2, err2;
  CHECK(run_plan_cli({"--reproduce", "--simulate", "--bogus"}, out2, err2) == 2);
  CHECK(err2.str().find("--bogus") != std::string::npos);
}
