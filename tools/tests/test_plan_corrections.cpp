// The planner's traffic and compute where the simple counts are wrong: sequence parallelism adds
// one all-reduce's worth per layer (the backward gathers its saved input shards again), ZeRO
// stages 2 and 3 repeat their collectives in every micro-batch, and selective recompute reruns
// the attention core. Every expectation below is the formula written out, not the planner's code.
#include <doctest/doctest.h>

#include <algorithm>

#include "layout_3d.hpp"
#include "plan/model.hpp"

using namespace mgpu::planner;
using tools_test::layout_3d;

namespace {

double bytes_of(const Plan& p, const std::string& kind) {
  for (const auto& t : p.traffic)
    if (t.kind == kind) return *t.bytes;
  return 0;
}

}  // namespace

TEST_CASE("sequence parallelism costs 5 all-reduce equivalents per layer, 7 with full recompute") {
  const struct {
    Recompute recompute;
    bool sp;
    double all_reduces;
  } cases[] = {{Recompute::none, false, 4},
               {Recompute::none, true, 5},
               {Recompute::selective, true, 5},
               {Recompute::full, false, 6},
               {Recompute::full, true, 7}};
  for (const auto& c : cases) {
    const Options o = layout_3d(1, c.recompute, c.sp);
    const Plan p = make_plan(o);
    // One all-reduce of the layer's bf16 activation s b h moves 2 (t-1)/t of it per GPU.
    const double activation = 4096.0 * 1 * 8192 * 2;
    const double per_all_reduce = 2.0 * 7 / 8 * activation;
    const double expected = 80.0 / 4 * 16 * c.all_reduces * per_all_reduce;
    CAPTURE(to_string(c.recompute));
    CAPTURE(c.sp);
    CHECK(bytes_of(p, "tp_all_reduce") == doctest::Approx(expected));
    CHECK(tp_all_reduces_per_layer(c.recompute, c.sp) == c.all_reduces);
  }
}

TEST_CASE("ZeRO stages 2 and 3 repeat their collectives in every micro-batch, stage 1 does not") {
  Options o;
  o.params = 8e9;
  o.gpus = 64;
  o.micro_batches = 8;
  const double d = 64, m = 8, w = 2, g = 2;  // bf16 weights and gradients
  const double share = (d - 1) / d * o.params;
  o.zero_stage = 1;
  Plan p = make_plan(o);
  CHECK(bytes_of(p, "zero_reduce_scatter") == doctest::Approx(share * g));
  CHECK(bytes_of(p, "zero_all_gather_forward") == doctest::Approx(share * w));
  o.zero_stage = 2;
  p = make_plan(o);
  CHECK(bytes_of(p, "zero_reduce_scatter") == doctest::Approx(m * share * g));
  CHECK(bytes_of(p, "zero_all_gather_forward") == doctest::Approx(share * w));
  CHECK(*p.dp_traffic_vs_plain == doctest::Approx((m * g + w) / (2 * g)));
  o.zero_stage = 3;
  p = make_plan(o);
  CHECK(bytes_of(p, "zero_reduce_scatter") == doctest::Approx(m * share * g));
  CHECK(bytes_of(p, "zero_all_gather_forward") == doctest::Approx(m * share * w));
  CHECK(bytes_of(p, "zero_all_gather_backward") == doctest::Approx(m * share * w));
  CHECK(*p.dp_traffic_vs_plain == doctest::Approx(m * (g + 2 * w) / (2 * g)));
  CHECK(p.notes.empty());  // no pipeline: gradient accumulation alone is not warned about
}

TEST_CASE("ZeRO 2 or 3 with a pipeline is warned about, ZeRO 1 with a pipeline is not") {
  for (int stage = 0; stage <= 3; ++stage) {
    const Plan p = make_plan(layout_3d(stage, Recompute::none, false));
    const bool warned = std::any_of(p.notes.begin(), p.notes.end(), [](const std::string& n) {
      return n.find("ZeRO stage") != std::string::npos &&
             n.find("micro-batches") != std::string::npos;
    });
    CAPTURE(stage);
    CHECK(warned == (stage >= 2));
  }
}

TEST_CASE(
    "selective recompute adds the attention core's forward, 4s / (3 (24h + 4s)), to the time") {
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    Options o = layout_3d(1, r, true);
    o.tokens = 1e12;
    o.gpu_flops = 1e15;
    o.mfu = 0.5;
    const Plan p = make_plan(o);
    const double s = 4096, h = 8192;
    const double extra = r == Recompute::none   ? 0.0
                         : r == Recompute::full ? 1.0 / 3
                                                : 4 * s / (3 * (24 * h + 4 * s));
    const double bubble = (4.0 - 1) / (16 + 4 - 1);
    const double expected = 6 * 70e9 * 1e12 * (1 + extra) / (128 * 1e15 * 0.5) / (1 - bubble);
    CAPTURE(to_string(r));
    CHECK(p.recompute_extra_fraction == doctest::Approx(extra));
    CHECK(*p.seconds == doctest::Approx(expected));
  }
  // At s 4096, h 8192 the attention core is 4s / (24h + 4s) = 7.7% of a forward, so 2.6% of a step.
  CHECK(selective_recompute_extra_fraction({.seq = 4096, .hidden = 8192}) ==
        doctest::Approx(0.0256).epsilon(0.01));
}
