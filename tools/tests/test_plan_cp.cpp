// `mgpu plan --cp`: the layout tp x cp x pp x dp, activations per GPU divided by cp, ZeRO and the
// gradient collectives over dp x cp, and ring attention's keys, values and their gradients on the
// traffic list. Every expected number is written out from the course text's closed forms (the
// activation formula of 11.1, the ring's c - 1 hops of s/c tokens), not from the planner's code.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "plan/cli.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"

using namespace mgpu::planner;

namespace {

// 70B on 64 GPUs: tp 8 x cp 4 x pp 1 x dp 2, one 32k-token sequence per micro-batch.
constexpr double kS = 32768, kB = 1, kH = 8192, kA = 64, kL = 80, kT = 8, kC = 4;

Options long_context(Recompute recompute, std::int64_t cp = 4, std::int64_t gpus = 64) {
  Options o;
  o.params = 70e9;
  o.gpus = gpus;
  o.tp = 8;
  o.cp = cp;
  o.zero_stage = 1;
  o.micro_batches = 1;
  o.shape = ModelShape{{.seq = 32768, .micro_batch = 1, .hidden = 8192, .heads = 64, .layers = 80},
                       recompute,
                       false};
  return o;
}

double bytes_of(const Plan& p, const std::string& group) {
  double sum = 0;
  for (const auto& t : p.traffic)
    if (t.group == group) sum += *t.bytes;
  return sum;
}

// Ring attention per layer and micro-batch, bf16: c - 1 hops of this rank's s/c tokens' keys
// and values (h/t wide each) forward; keys, values and their two gradients backward.
constexpr double kRingForward = (kC - 1) * 2 * (kS / kC) * kB * (kH / kT) * 2;
constexpr double kRingBackward = 2 * kRingForward;

}  // namespace

TEST_CASE("cp divides every activation of a layer by cp and leaves the training state alone") {
  const Plan p = make_plan(long_context(Recompute::none));
  CHECK(p.dp == 2);
  CHECK(p.grad_group == 8);
  // Korthikanti et al.: s b h (10 + 24/t + 5 a s / (h t)) bytes per layer, unsplit; / cp.
  const double per_layer = kS * kB * kH * (10 + 24 / kT + 5 * kA * kS / (kH * kT));
  CHECK(p.memory->activation_bytes == doctest::Approx(kL * per_layer / kC));
  // ZeRO-1 over the 8 ranks holding the same weights (dp 2 x cp 4): 4 Psi' + 12 Psi' / 8.
  const double share = 70e9 / kT;
  CHECK(p.memory->state_bytes() == doctest::Approx(4 * share + 12 * share / 8));

  // The same state as plain data parallelism over 8, activations 4 times smaller.
  Options flat = long_context(Recompute::none, 1);
  const Plan q = make_plan(flat);
  CHECK(q.dp == 8);
  CHECK(q.memory->state_bytes() == doctest::Approx(p.memory->state_bytes()));
  CHECK(q.memory->activation_bytes == doctest::Approx(kC * p.memory->activation_bytes));
}

TEST_CASE("cp traffic: the ring's keys and values forward, and their gradients backward") {
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    CAPTURE(to_string(r));
    const Plan p = make_plan(long_context(r));
    const double forwards = r == Recompute::full ? 2 : 1;  // full recompute reruns the ring
    CHECK(bytes_of(p, "cp") == doctest::Approx(kL * (forwards * kRingForward + kRingBackward)));
    // Tensor parallel now moves only this rank's s/c tokens: 4 (6 with full recompute)
    // all-reduces of s/c b h bf16 per layer, each 2 (t-1)/t of it.
    const double all_reduces = r == Recompute::full ? 6 : 4;
    CHECK(bytes_of(p, "tp") ==
          doctest::Approx(kL * all_reduces * 2 * (kT - 1) / kT * (kS / kC) * kB * kH * 2));
    // ZeRO-1 over dp x cp = 8: (7/8) Psi' (g + w).
    CHECK(bytes_of(p, "dp") == doctest::Approx(7.0 / 8 * 70e9 / kT * 4));
  }
  // One cp rank sends nothing round a ring.
  const Plan one = make_plan(long_context(Recompute::none, 1));
  CHECK(bytes_of(one, "cp") == 0);
}

TEST_CASE("cp placement: inside a server while tp x cp divides it, across servers beyond") {
  Options o = long_context(Recompute::selective);
  CHECK_FALSE(cp_within_server(o));  // 8 x 4 = 32 GPUs, 8 per server
  o.tp = 2;
  CHECK(cp_within_server(o));  // 2 x 4 = 8
  o.tp = 1;
  o.cp = 8;
  CHECK(cp_within_server(o));
  o.cp = 16;
  CHECK_FALSE(cp_within_server(o));
}

TEST_CASE("mgpu plan --cp: refusals name the fix, and text, JSON and SVG show the layout") {
  using tools_test::run_cli;
  const std::vector<std::string> shape{"--layers", "80", "--hidden", "8192",
                                       "--heads",  "64", "--seq",    "32768"};
  auto args = [&](std::vector<std::string> a) {
    a.insert(a.end(), shape.begin(), shape.end());
    return a;
  };
  tools_test::check_refused(
      run_plan_cli, kExitUsage,
      args({"--params", "70e9", "--gpus", "12", "--tp", "2", "--cp", "4"}),
      "tp*cp*pp = 2*4*1 = 8: dp = gpus/(tp*cp*pp) must be whole; use --gpus 8 or 16");
  tools_test::check_refused(run_plan_cli, kExitUsage,
                            {"--params", "70e9", "--gpus", "48", "--cp", "3", "--layers", "80",
                             "--hidden", "8192", "--heads", "64", "--seq", "4096"},
                            "not divisible by 2 x --cp = 6");
  tools_test::check_refused(run_plan_cli, kExitUsage,
                            {"--params", "70e9", "--gpus", "8", "--cp", "0"}, "--cp 2");
  // The step-time model prices ring attention too, and the simulation runs it: one rank thread
  // per cp rank and replica.
  const auto priced = run_cli(
      run_plan_cli,
      args({"--params", "70e9", "--gpus", "64", "--tp", "8", "--cp", "4", "--zero", "1",
            "--recompute", "full", "--hardware", "a100-80gb", "--vocab", "51200", "--simulate"}));
  REQUIRE(priced.status == kExitOk);
  CHECK(priced.out.find("exposed cp") != std::string::npos);
  CHECK(priced.out.find("simulated cluster (8 rank threads") != std::string::npos);

  const auto text =
      run_cli(run_plan_cli, args({"--params", "70e9", "--gpus", "64", "--tp", "8", "--cp", "4",
                                  "--zero", "1", "--recompute", "selective"}));
  REQUIRE(text.status == kExitOk);
  CHECK(text.out.find("64 GPUs = tp 8 x cp 4 x pp 1 x dp 2") != std::string::npos);
  CHECK(text.out.find("cp 4 across servers") != std::string::npos);
  CHECK(text.out.find("ring-attention keys and values") != std::string::npos);
  // ZeRO's collectives span the weights' holders, dp x cp, and the traffic rows say so.
  CHECK(text.out.find("ZeRO gradient reduce-scatter") != std::string::npos);
  CHECK(text.out.find("dp x cp group") != std::string::npos);
  CHECK(text.out.find(" dp group") == std::string::npos);

  const auto json =
      run_cli(run_plan_cli,
              args({"--params", "70e9", "--gpus", "64", "--tp", "2", "--cp", "4", "--json", "-"}));
  REQUIRE(json.status == kExitOk);
  const auto j = nlohmann::json::parse(json.out);
  CHECK(j.at("inputs").at("cp") == 4);
  CHECK(j.at("inputs").at("dp") == 8);
  CHECK(j.at("gradient_group") == 32);
  CHECK(j.at("cp_placement") == "within_server");
  // tp 2: h/t = 4096 wide, L layers, one micro-batch, no recompute.
  const double ring = kL * 3 * (3 * 2 * (kS / 4) * kB * (kH / 2) * 2);
  CHECK(j.at("traffic_bytes_per_step").at("cp_ring").get<double>() == doctest::Approx(ring));

  const std::string svg = render_svg(make_plan(long_context(Recompute::selective)));
  CHECK(svg.find("tp 8 x cp 4 (across servers) x pp 1") != std::string::npos);
}
