// The step-time model against what must hold whatever the hardware: on an ideal machine (every
// GEMM at one fixed efficiency, memory and links free) a step is its FLOPs over the rate; the
// FLOP counts are the papers' closed forms; the bubble is (p-1)/v of a stage's micro-batch;
// sequence parallelism and ZeRO-3 cost the collective counts the course derives. Expectations
// are the formulas written out here.
#include <doctest/doctest.h>

#include "gpt_model.hpp"
#include "plan/step_time.hpp"

using namespace mgpu::planner;
using tools_test::gpt;

namespace {

// A machine where only the GEMM rate costs time: fixed efficiency `e` at any size, memory and
// links a million times faster than any real one, no latency.
Hardware ideal(double e) {
  Hardware h;
  h.name = "ideal";
  h.peak_flops = 1e15;
  h.hbm_bytes_per_s = 1e21;
  h.memory_bytes = 1e12;
  h.gpus_per_server = 8;
  h.nvlink_bytes_per_s = 1e21;
  h.network_bytes_per_s = 1e21;
  h.nvlink_latency_s = h.network_latency_s = 0;
  h.gemm.points = {{1, e}};
  h.hbm_efficiency = h.nvlink_efficiency = h.network_efficiency = 1;
  return h;
}

}  // namespace

TEST_CASE(
    "FLOPs per step are the papers' closed forms: 72 B s L h^2 (...) and, with full "
    "recompute, 96 B s L h^2 (1 + s/6h + V/16Lh)") {
  const RunModel md = gpt(48, 6144, 64, 64);
  RunLayout l{.tp = 8, .pp = 2, .dp = 4, .micro_batch = 2, .recompute = Recompute::full};
  const StepTime st = step_time(md, l, ideal(0.5));
  const double B = 64, s = 2048, L = 48, h = 6144, V = 51200;
  CHECK(st.model_flops ==
        doctest::Approx(72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))));
  CHECK(st.hardware_flops ==
        doctest::Approx(96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))));
  CHECK(st.paper_flops == doctest::Approx(st.hardware_flops));
  CHECK(st.params == doctest::Approx(12 * L * h * h + V * h));
}

TEST_CASE("on an ideal machine without a pipeline a step is its FLOPs over the GEMM rate") {
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    const RunModel md = gpt(24, 4096, 32, 64);
    const RunLayout l{.tp = 4, .pp = 1, .dp = 2, .micro_batch = 4, .recompute = r};
    const StepTime st = step_time(md, l, ideal(0.5));
    CAPTURE(to_string(r));
    // 8 GPUs, each running 1/(tp dp) of the FLOPs at half of 1e15 FLOP/s.
    CHECK(st.seconds == doctest::Approx(st.hardware_flops / (8 * 0.5e15)).epsilon(1e-6));
    CHECK(st.hfu == doctest::Approx(0.5).epsilon(1e-6));
    CHECK(st.exposed_tp + st.bubble + st.p2p + st.exposed_dp + st.optimizer < 1e-6 * st.seconds);
  }
}

TEST_CASE("the bubble is (p-1)/v of a stage's micro-batch: bubble / compute = (p-1) / (v m)") {
  const RunModel md = gpt(48, 4096, 32, 256);
  for (std::int64_t v : {1, 2, 3}) {
    const RunLayout l{.tp = 1, .pp = 4, .dp = 2, .micro_batch = 2, .interleave = v};
    const StepTime st = step_time(md, l, ideal(0.6));
    const double m = 256 / (2 * 2);
    CAPTURE(v);
    // Even stages; the last one's logits make it the busiest by a little, so the others' time is
    // (p-1) stages of layers only: compare against the layers' share.
    const double layers_time = st.layer_forward + st.layer_backward;
    CHECK(st.bubble == doctest::Approx(3.0 * 12 * layers_time / static_cast<double>(v)));
    CHECK(st.bubble / (m * 12 * layers_time) ==
          doctest::Approx(3.0 / (static_cast<double>(v) * m)));
  }
}

TEST_CASE("uneven first and last stages: the busiest stage sets the pace, the rest is bubble") {
  const RunModel md = gpt(30, 2048, 16, 64);
  const RunLayout l{
      .tp = 1, .pp = 4, .dp = 1, .micro_batch = 1, .first_stage_layers = 6, .last_stage_layers = 6};
  const StepTime st = step_time(md, l, ideal(0.6));
  const double layer = st.layer_forward + st.layer_backward;
  // Stages of 6, 9, 9, 6 layers: a middle stage is busiest; the others hold 6 + 9 + 6 layers and
  // the last stage's logits, which the bubble includes.
  CHECK(st.compute == doctest::Approx(64 * 9 * layer));
  CHECK(st.bubble > 21 * layer);
  CHECK_THROWS_AS(step_time(md, {.tp = 1, .pp = 4, .first_stage_layers = 7, .last_stage_layers = 6},
                            ideal(0.6)),
                  UsageError);
}

TEST_CASE("sequence parallelism adds a quarter to the exposed tp time, full recompute a half") {
  Hardware hw = ideal(0.6);
  hw.nvlink_bytes_per_s = 100e9;  // only the tensor-parallel collectives cost time on NVLink
  const RunModel md = gpt(16, 4096, 32, 8);
  const auto tp_time = [&](Recompute r, bool sp) {
    return step_time(md, {.tp = 8, .micro_batch = 1, .recompute = r, .sequence_parallel = sp}, hw)
        .exposed_tp;
  };
  const double plain = tp_time(Recompute::none, false);
  // One all-reduce of s b h bf16 over 8 GPUs sends 2 * 7/8 of it; 4 per layer per micro-batch.
  CHECK(plain == doctest::Approx(8 * 16 * 4 * (2 * 7.0 / 8 * 2048 * 4096 * 2) / 100e9));
  CHECK(tp_time(Recompute::none, true) / plain == doctest::Approx(5.0 / 4));
  CHECK(tp_time(Recompute::full, false) / plain == doctest::Approx(6.0 / 4));
  CHECK(tp_time(Recompute::full, true) / plain == doctest::Approx(7.0 / 4));
}

TEST_CASE("ZeRO-3 sends m (g + 2w) / 2g times the bytes of a gradient all-reduce") {
  Hardware hw = ideal(0.6);
  hw.network_bytes_per_s = 10e9;
  const RunModel md = gpt(8, 2048, 16, 64);
  const auto dp_time = [&](int stage) {
    return step_time(md, {.tp = 1, .pp = 1, .dp = 16, .micro_batch = 1, .zero_stage = stage}, hw)
        .exposed_dp;
  };
  const double m = 64 / 16;
  CHECK(dp_time(1) == doctest::Approx(dp_time(0)));
  CHECK(dp_time(2) / dp_time(0) == doctest::Approx((m * 2 + 2) / 4));
  CHECK(dp_time(3) / dp_time(0) == doctest::Approx(m * (2 + 2 * 2) / 4));
}
