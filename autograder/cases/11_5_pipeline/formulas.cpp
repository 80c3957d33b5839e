// Graded cases of 11.5's formulas: the pipeline bubble (GPipe, interleaved), the micro-batches a
// target bubble needs, step time, activations in flight per schedule, and boundary traffic.
#include <algorithm>

#include "11_5_pipeline/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace pp = mgpu::pipeline;

namespace {

// (p, m) edge points every formula case runs before its drawn ones: one stage, one micro-batch,
// fewer micro-batches than stages, as many, and the text's example.
constexpr std::int64_t kEdges[][2] = {{1, 1}, {1, 7}, {4, 1}, {8, 3}, {3, 3}, {4, 8}, {2, 2}};

}  // namespace

MGPU_CASE("11_5.bubble") {
  std::vector<double> gpipe, interleaved, ratio;
  for (const auto& e : kEdges) {
    gpipe.push_back(pp::gpipe_bubble_fraction(e[0], e[1]));
    interleaved.push_back(pp::interleaved_bubble_fraction(e[0], e[1], 2));
    ratio.push_back(pp::bubble_to_compute_ratio(e[0], e[1], 1));
  }
  for (int i = 0; i < 3; ++i) {
    std::int64_t p = ctx.uniform_int(1, 64), m = ctx.uniform_int(1, 256), v = ctx.uniform_int(1, 8);
    gpipe.push_back(pp::gpipe_bubble_fraction(p, m));
    interleaved.push_back(pp::interleaved_bubble_fraction(p, m, v));
    ratio.push_back(pp::bubble_to_compute_ratio(p, m, v));
  }
  ctx.emit("gpipe", gpipe);
  ctx.emit("interleaved", interleaved);
  ctx.emit("bubble_to_compute", ratio);
  ctx.emit("text_example_p4_m8", pp::gpipe_bubble_fraction(4, 8));
}

MGPU_CASE("11_5.min_micro_batches") {
  // Exact boundaries first: the target equals the bubble at some m (3/30 == 0.1 in doubles too,
  // both being the double nearest the same rational), where the header's "strictly below" asks
  // for m + 1; then targets just above and below the boundary, p = 1 and target 1.
  const std::vector<std::pair<std::int64_t, double>> fixed = {
      {4, 0.1},        {4, 0.25}, {2, 0.5}, {3, 0.5}, {5, 0.2}, {4, 0.1 + 1e-9},
      {4, 0.1 - 1e-9}, {1, 0.1},  {1, 1.0}, {8, 1.0}, {2, 0.9}, {64, 0.01}};
  std::vector<double> at_edges;
  for (const auto& [p, target] : fixed)
    at_edges.push_back(static_cast<double>(pp::min_micro_batches_for_bubble(p, target)));
  ctx.emit("at_fixed_targets", at_edges);
  // Drawn boundaries: the bubble of a drawn (p, m) as the target, so the answer is m + 1.
  std::vector<double> boundaries, drawn;
  for (int i = 0; i < 4; ++i) {
    const std::int64_t p = ctx.uniform_int(2, 64), m = ctx.uniform_int(1, 200);
    const double target = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
    boundaries.push_back(static_cast<double>(pp::min_micro_batches_for_bubble(p, target)));
  }
  for (int i = 0; i < 4; ++i)
    drawn.push_back(static_cast<double>(
        pp::min_micro_batches_for_bubble(ctx.uniform_int(1, 64), ctx.uniform_real(0.01, 0.9))));
  ctx.emit("at_drawn_boundaries", boundaries);
  ctx.emit("at_drawn_targets", drawn);
  ctx.emit_rejects("rejects_target_zero", [] { pp::min_micro_batches_for_bubble(4, 0.0); });
}

MGPU_CASE("11_5.step_seconds") {
  std::vector<double> seconds;
  for (const auto& e : kEdges) seconds.push_back(pp::pipeline_step_seconds(e[0], e[1], 0.25, 0.5));
  std::int64_t p = ctx.uniform_int(1, 32);
  std::int64_t m = ctx.uniform_int(1, 128);
  double f = ctx.log_uniform(1e-4, 1e-1);
  seconds.push_back(pp::pipeline_step_seconds(p, m, f, 2 * f));
  ctx.emit("seconds", seconds);
  // The points above all take the backward as twice the forward; these do not (a free forward, a
  // free backward, a backward cheaper than the forward, a drawn ratio), so a formula that prices
  // the backward from the forward instead of using backward_seconds is caught.
  const double ratio = ctx.uniform_real(0.5, 3);
  ctx.emit("seconds_any_backward",
           std::vector<double>{pp::pipeline_step_seconds(2, 3, 0.0, 0.75),
                               pp::pipeline_step_seconds(4, 8, 0.5, 0.0),
                               pp::pipeline_step_seconds(3, 5, 0.5, 0.25),
                               pp::pipeline_step_seconds(p, m, f, ratio * f)});
}

MGPU_CASE("11_5.in_flight") {
  // Every stage of each edge point, then of a drawn one, stage after stage.
  std::vector<double> gpipe, ofob;
  auto add = [&](std::int64_t p, std::int64_t m) {
    for (std::int64_t stage = 0; stage < p; ++stage) {
      gpipe.push_back(
          static_cast<double>(pp::in_flight_micro_batches(pp::Schedule::gpipe, p, m, stage)));
      ofob.push_back(
          static_cast<double>(pp::in_flight_micro_batches(pp::Schedule::one_f_one_b, p, m, stage)));
    }
  };
  for (const auto& e : kEdges) add(e[0], e[1]);
  add(ctx.uniform_int(1, 16), ctx.uniform_int(1, 64));
  ctx.emit("gpipe", gpipe);
  ctx.emit("one_f_one_b", ofob);
}

MGPU_CASE("11_5.layers_and_boundary_bytes") {
  // p = 1 (nothing crosses a boundary), p = 3 with m < p, then a drawn p and m; stage after stage.
  mgpu::TransformerShape s;
  s.seq = ctx.pick<std::int64_t>({512, 2048});
  s.micro_batch = ctx.uniform_int(1, 8);
  s.hidden = ctx.pick<std::int64_t>({1024, 4096});
  std::vector<double> layers, bytes;
  const std::int64_t drawn_p = ctx.pick<std::int64_t>({1, 2, 4, 8});
  const std::int64_t points[][2] = {{1, 4}, {3, 2}, {drawn_p, ctx.uniform_int(1, 32)}};
  for (const auto& [p, m] : points) {
    s.layers = p * ctx.uniform_int(1, 12);
    layers.push_back(static_cast<double>(pp::layers_per_stage(s.layers, p)));
    for (std::int64_t stage = 0; stage < p; ++stage)
      bytes.push_back(pp::boundary_bytes_sent_per_stage(s, p, m, stage, 2));
  }
  ctx.emit("layers_per_stage", layers);
  ctx.emit("boundary_bytes", bytes);
  // Every stage of p = 4 at other element sizes than the 2 bytes above (fp32, fp8), so that the
  // bytes_per_element argument must be used, not assumed.
  std::vector<double> other_sizes;
  for (double element : {4.0, 1.0})
    for (std::int64_t stage = 0; stage < 4; ++stage)
      other_sizes.push_back(pp::boundary_bytes_sent_per_stage(s, 4, 3, stage, element));
  ctx.emit("boundary_bytes_fp32_fp8", other_sizes);
  ctx.emit_rejects("rejects_uneven_stages", [] { pp::layers_per_stage(32, 3); });
}

MGPU_CASE("11_5.zb_h1_bubble_seconds") {
  // Equal halves, the text's p = 4, a free weight half, a weight half equal to the forward or to
  // the input half (the formula's edge), then drawn points with T_W below both.
  std::vector<double> seconds{
      pp::zb_h1_bubble_seconds(1, 1.0, 1.0, 1.0),  pp::zb_h1_bubble_seconds(4, 1.0, 1.0, 1.0),
      pp::zb_h1_bubble_seconds(4, 0.5, 0.75, 0.0), pp::zb_h1_bubble_seconds(8, 0.5, 0.75, 0.5),
      pp::zb_h1_bubble_seconds(3, 0.75, 0.5, 0.5), pp::zb_h1_bubble_seconds(2, 0.0, 0.0, 0.0)};
  for (int i = 0; i < 3; ++i) {
    const double f = ctx.log_uniform(1e-4, 1e-1), b = ctx.uniform_real(0.5, 2.0) * f;
    seconds.push_back(pp::zb_h1_bubble_seconds(ctx.uniform_int(1, 64), f, b,
                                               ctx.uniform_real(0.0, 1.0) * std::min(f, b)));
  }
  ctx.emit("seconds", seconds);
  ctx.emit_rejects("rejects_zero_stages", [] { pp::zb_h1_bubble_seconds(0, 1, 1, 1); });
  ctx.emit_rejects("rejects_negative_time", [] { pp::zb_h1_bubble_seconds(4, 1, -1, 0.5); });
  ctx.emit_rejects("rejects_weight_above_forward", [] { pp::zb_h1_bubble_seconds(4, 1, 2, 1.5); });
  ctx.emit_rejects("rejects_weight_above_input", [] { pp::zb_h1_bubble_seconds(4, 2, 1, 1.5); });
}

// ---------------------------------------------------------------- validation bounds, both sides
MGPU_CASE("11_5.formula_bounds") {
  // Each documented range checked just outside each end (the inside ends, target 1 and stage
  // p - 1, run in the value cases): a target above 1 or below 0 is no bubble fraction, and a
  // stage is 0 to p - 1.
  ctx.emit_rejects("rejects_target_above_one",
                   [] { pp::min_micro_batches_for_bubble(4, 1.0 + 1e-9); });
  ctx.emit_rejects("rejects_target_negative", [] { pp::min_micro_batches_for_bubble(4, -0.5); });
  ctx.emit("accepts_target_one", static_cast<double>(pp::min_micro_batches_for_bubble(4, 1.0)));
  ctx.emit_rejects("in_flight_rejects_stage_p",
                   [] { pp::in_flight_micro_batches(pp::Schedule::one_f_one_b, 4, 8, 4); });
  ctx.emit_rejects("in_flight_rejects_stage_negative",
                   [] { pp::in_flight_micro_batches(pp::Schedule::gpipe, 4, 8, -1); });
  ctx.emit("in_flight_last_stage",
           static_cast<double>(pp::in_flight_micro_batches(pp::Schedule::one_f_one_b, 4, 8, 3)));
  // The same stage range for the boundary bytes (its inside ends, stages 0 and p - 1, are priced in
  // 11_5.layers_and_boundary_bytes): past either end a stage would send one direction's bytes.
  const mgpu::TransformerShape shape{.seq = 512, .micro_batch = 1, .hidden = 1024, .layers = 8};
  ctx.emit_rejects("boundary_rejects_stage_p",
                   [&] { pp::boundary_bytes_sent_per_stage(shape, 4, 8, 4, 2); });
  ctx.emit_rejects("boundary_rejects_stage_negative",
                   [&] { pp::boundary_bytes_sent_per_stage(shape, 4, 8, -1, 2); });
  // A stage runs at least one chunk; a pass takes no negative time, and may take none.
  ctx.emit_rejects("interleaved_rejects_zero_chunks",
                   [] { pp::interleaved_bubble_fraction(4, 8, 0); });
  ctx.emit_rejects("step_seconds_rejects_negative_backward",
                   [] { pp::pipeline_step_seconds(4, 8, 1.0, -1.0); });
  ctx.emit("step_seconds_free_passes", pp::pipeline_step_seconds(4, 8, 0.0, 0.0));
}

MGPU_CASE("11_5.zb_h2_bubble_seconds") {
  // One stage, m below, at and above the first stage's round trip 2p - 1, the text's p = 4, a
  // zero pass time, then drawn points on both sides of 2p - 1.
  std::vector<double> seconds{
      pp::zb_h2_bubble_seconds(1, 1, 1.0), pp::zb_h2_bubble_seconds(4, 1, 1.0),
      pp::zb_h2_bubble_seconds(4, 4, 1.0), pp::zb_h2_bubble_seconds(4, 6, 0.5),
      pp::zb_h2_bubble_seconds(4, 7, 1.0), pp::zb_h2_bubble_seconds(4, 8, 1.0),
      pp::zb_h2_bubble_seconds(8, 3, 0.0), pp::zb_h2_bubble_seconds(2, 2, 0.25)};
  for (int i = 0; i < 4; ++i) {
    const std::int64_t p = ctx.uniform_int(1, 64);
    seconds.push_back(
        pp::zb_h2_bubble_seconds(p, ctx.uniform_int(1, 4 * p), ctx.log_uniform(1e-4, 1e-1)));
  }
  ctx.emit("seconds", seconds);
  ctx.emit_rejects("rejects_zero_stages", [] { pp::zb_h2_bubble_seconds(0, 4, 1); });
  ctx.emit_rejects("rejects_zero_micro_batches", [] { pp::zb_h2_bubble_seconds(4, 0, 1); });
  ctx.emit_rejects("rejects_negative_time", [] { pp::zb_h2_bubble_seconds(4, 8, -1); });
}
