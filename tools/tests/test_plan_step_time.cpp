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

// A machine where only the GEMM rate costs time: fixed efficiency `e` at any size (fused
// attention too), memory and links a million times faster than any real one, no latency.
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
  h.fused_attention_efficiency = e;
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

TEST_CASE(
    "context parallelism: each rank computes 1/c of the work, and its ring sends are waited "
    "for only beyond one block's compute") {
  // On the ideal machine links are free: the step is the FLOPs over the rate, cp or not.
  const RunModel md = gpt(8, 2048, 16, 16);
  for (std::int64_t c : {1, 2, 4}) {
    CAPTURE(c);
    const StepTime st =
        step_time(md, {.tp = 2, .pp = 1, .dp = 2, .cp = c, .micro_batch = 1}, ideal(0.5));
    CHECK(st.seconds ==
          doctest::Approx(st.hardware_flops / (4 * static_cast<double>(c) * 0.5e15)).epsilon(1e-6));
    CHECK(st.exposed_cp == 0);
  }
  // With compute free and the server's links at 10 GB/s, the ring is all that takes time: its
  // bytes over the link. Each step of the forward's c - 1 sends the rank's keys and values, b s/c
  // tokens of kv heads x head_dim / t bf16 each; the backward twice that.
  Hardware slow = ideal(0.5);
  slow.peak_flops = 1e30;
  slow.nvlink_bytes_per_s = 10e9;
  RunModel gqa = gpt(4, 2048, 16, 4);
  gqa.kv_heads = 4;
  const RunLayout l{.tp = 2, .pp = 1, .dp = 1, .cp = 4, .micro_batch = 1, .flash_attention = true};
  const StepTime st = step_time(gqa, l, slow);
  const double kv_bytes = 2 * (2048.0 / 4) * (4.0 * 128 / 2) * 2;
  CHECK(st.cp_bytes == doctest::Approx(4 * 4 * 3 * (1 + 2) * kv_bytes));
  CHECK(st.exposed_cp == doctest::Approx(st.cp_bytes / 10e9));
  // The keys and values of 4 KV heads are 4/16 of the full heads' bytes.
  RunModel mha = gqa;
  mha.kv_heads = 16;
  CHECK(st.cp_bytes / step_time(mha, l, slow).cp_bytes == doctest::Approx(4.0 / 16));
  // Full recompute runs the forward's ring again.
  RunLayout full = l;
  full.recompute = Recompute::full;
  CHECK(step_time(gqa, full, slow).cp_bytes / st.cp_bytes == doctest::Approx(4.0 / 3));
  CHECK_THROWS_AS(step_time(gpt(4, 2048, 16, 4), {.cp = 3}, slow), UsageError);  // 2048 % 6
}

TEST_CASE(
    "ZeRO's bytes per step: once at stages 0 and 1, the gradients every micro-batch at 2, "
    "everything every micro-batch at 3") {
  const RunModel md = gpt(8, 2048, 16, 64);
  const double m = 64.0 / 16, n = 16, f = (n - 1) / n;
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    const StepTime st = step_time(
        md, {.tp = 1, .pp = 1, .dp = 16, .micro_batch = 1, .zero_stage = stage}, ideal(0.5));
    const double P = st.stages.front().params;  // g = w = 2 bytes
    const double expected = stage == 0   ? 2 * f * P * 2
                            : stage == 1 ? f * P * (2 + 2)
                            : stage == 2 ? f * P * (m * 2 + 2)
                                         : m * f * P * (2 + 2 * 2);
    CHECK(st.dp_bytes == doctest::Approx(expected));
  }
  // With dp x cp ranks holding the same weights, the group is dp x cp.
  const StepTime cp = step_time(gpt(8, 2048, 16, 16),
                                {.tp = 1, .pp = 1, .dp = 4, .cp = 4, .micro_batch = 1}, ideal(0.5));
  CHECK(cp.dp_bytes == doctest::Approx(2 * (15.0 / 16) * cp.stages.front().params * 2));
}

TEST_CASE(
    "ZeRO-3 gathers layer by layer: each pays the latency, and prefetching hides all but "
    "one layer's collectives per pass") {
  Hardware hw = ideal(0.5);
  hw.network_latency_s = 1e-5;  // bandwidth free: only the collectives' count costs
  const RunModel md = gpt(8, 2048, 16, 64);
  const RunLayout zero3{.tp = 1, .pp = 1, .dp = 16, .micro_batch = 1, .zero_stage = 3};
  const double m = 4, L = 8;
  CHECK(step_time(md, zero3, hw).exposed_dp == doctest::Approx(m * L * 3 * 1e-5));
  RunLayout zero1 = zero3;
  zero1.zero_stage = 1;
  CHECK(step_time(md, zero1, hw).exposed_dp == doctest::Approx(2 * 1e-5));
  // Slow compute, links at 10 GB/s and no latency: with --dp-overlap, each pass waits for its
  // first layer's gather (the backward also for its last reduce-scatter), 1/L of it all.
  Hardware overlap = ideal(0.001);
  overlap.network_bytes_per_s = 10e9;
  const double all = step_time(md, zero3, overlap).exposed_dp;
  RunLayout prefetched = zero3;
  prefetched.dp_overlap = true;
  CHECK(step_time(md, prefetched, overlap).exposed_dp == doctest::Approx(all / L));
  CHECK(all > 0);
}

TEST_CASE(
    "a layer's backward is priced from its own operations: under twice the forward where the "
    "attention core and memory-bound kernels show, tending to twice where the GEMMs dominate") {
  const Hardware a100 = load_hardware("a100-80gb");
  const auto ratio = [&](const RunModel& md) {
    // One GPU, nothing recomputed: the layer's times are its compute alone.
    const RunLayout l{.tp = 1, .pp = 1, .dp = 1, .micro_batch = 1};
    const StepTime st = step_time(md, l, a100);
    return st.layer_backward / st.layer_forward;
  };
  // A narrow layer over long sequences: the unfused softmax's a s bytes per token and the
  // s x s score GEMMs are a large share of the forward.
  RunModel narrow = gpt(2, 1024, 16, 1);
  narrow.seq = 8192;
  const double memory_bound = ratio(narrow);
  CAPTURE(memory_bound);
  CHECK(memory_bound > 1);
  CHECK(memory_bound < 1.9);
  // A wide layer over short sequences: the four weight GEMMs are nearly all of it.
  RunModel wide = gpt(2, 16384, 128, 8);
  wide.seq = 512;
  const double gemm_bound = ratio(wide);
  CAPTURE(gemm_bound);
  CHECK(gemm_bound > 1.95);
  CHECK(gemm_bound <= 2);
  CHECK(gemm_bound > memory_bound);
}

TEST_CASE(
    "fused causal attention performs half the core's FLOPs, at the fused-attention efficiency, "
    "not the GEMM curve's") {
  // Compute only (ideal links and memory): the step's seconds less the same layout's without
  // the attention core's cost tell the core's time apart from the weight GEMMs'.
  RunModel md = gpt(4, 2048, 16, 8);
  md.seq = 8192;
  const RunLayout l{.tp = 2, .pp = 1, .dp = 1, .micro_batch = 1, .flash_attention = true};
  const auto seconds = [&](double gemm, double attention) {
    Hardware hw = ideal(gemm);
    hw.fused_attention_efficiency = attention;
    return step_time(md, l, hw).seconds;
  };
  const double both_half = seconds(0.5, 0.5), attention_quarter = seconds(0.5, 0.25);
  // The core's time at efficiency 0.5: what doubling it by halving the efficiency added.
  const double core = attention_quarter - both_half;
  // Per GPU per step: 8 sequences, 4 layers, a/t = 8 heads of 128, forward 4 s^2 dh per head
  // halved by the mask, backward 2.5 times the forward.
  const double B = 8, L = 4, s = 8192, dh = 128, heads = 8;
  const double flops = B * L * heads * (4 * s * s * dh / 2) * (1 + 2.5);
  CHECK(core == doctest::Approx(flops / 0.5e15).epsilon(1e-9));
  // The GEMM curve no longer prices the core: halving it moves only the weight GEMMs.
  CHECK(seconds(0.25, 0.5) - both_half == doctest::Approx(both_half - core).epsilon(1e-9));
}

TEST_CASE(
    "a data-parallel collective across servers leaves through every NIC of the group's ranks in "
    "a server: k ranks per server send 1/k each over the network") {
  Hardware hw = ideal(0.5);
  hw.peak_flops = 1e30;  // compute free: the step is the all-reduce (no overlap)
  hw.network_bytes_per_s = 10e9;
  hw.nvlink_bytes_per_s = 1e21;
  const RunModel md = gpt(8, 2048, 16, 64);
  // 64 GPUs in servers of 8: tp 8 leaves one rank of each dp group per server; tp 1 eight.
  const StepTime one = step_time(md, {.tp = 8, .pp = 1, .dp = 8, .micro_batch = 1}, hw);
  const StepTime eight = step_time(md, {.tp = 1, .pp = 1, .dp = 64, .micro_batch = 1}, hw);
  const double P = one.stages.front().params;
  CHECK(one.exposed_dp == doctest::Approx(2 * (7.0 / 8) * P * 2 / 10e9));
  CHECK(eight.exposed_dp ==
        doctest::Approx(2 * (63.0 / 64) * eight.stages.front().params * 2 / 8 / 10e9));
  // The bytes each rank sends are the ring's either way; only the links they cross differ.
  CHECK(eight.dp_bytes == doctest::Approx(2 * (63.0 / 64) * eight.stages.front().params * 2));
  // With NVLink slower than the NICs together, the rings' NVLink hops set the pace instead.
  hw.nvlink_bytes_per_s = 20e9;
  const StepTime nvlink_bound = step_time(md, {.tp = 1, .pp = 1, .dp = 64, .micro_batch = 1}, hw);
  CHECK(nvlink_bound.exposed_dp ==
        doctest::Approx(2 * (63.0 / 64) * eight.stages.front().params * 2 * (7.0 / 8) / 20e9));
}
