// `mgpu plan --simulate`: the step run on the simulated cluster against the analytic model it
// shares its per-operation seconds with. With communication free the two must agree exactly,
// since the schedule's fill and drain is then exactly the model's bubble; with communication on
// they differ only by what the timeline adds (sends overlapping compute, the collective's ring
// latencies), within 3% on the published runs. The trace is the simulated cluster's own.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

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
