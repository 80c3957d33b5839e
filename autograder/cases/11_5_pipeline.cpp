// Graded cases of 11.5's formulas: the pipeline bubble (GPipe, interleaved), the micro-batches a
// target bubble needs, step time, activations in flight per schedule, and boundary traffic.
#include "11_5_pipeline/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace pp = mgpu::pipeline;

MGPU_CASE("11_5.bubble") {
  std::int64_t p = ctx.uniform_int(1, 64);
  std::int64_t m = ctx.uniform_int(1, 256);
  std::int64_t v = ctx.uniform_int(1, 8);
  ctx.emit("gpipe", pp::gpipe_bubble_fraction(p, m));
  ctx.emit("interleaved", pp::interleaved_bubble_fraction(p, m, v));
  ctx.emit("bubble_to_compute", pp::bubble_to_compute_ratio(p, m, v));
  ctx.emit("text_example_p4_m8", pp::gpipe_bubble_fraction(4, 8));
}

MGPU_CASE("11_5.min_micro_batches") {
  std::vector<double> out;
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<double>(pp::min_micro_batches_for_bubble(ctx.uniform_int(1, 64), ctx.uniform_real(0.01, 0.9))));
  ctx.emit("micro_batches", out);
  ctx.emit_rejects("rejects_target_zero", [] { pp::min_micro_batches_for_bubble(4, 0.0); });
}

MGPU_CASE("11_5.step_seconds") {
  std::int64_t p = ctx.uniform_int(1, 32);
  std::int64_t m = ctx.uniform_int(1, 128);
  double f = ctx.log_uniform(1e-4, 1e-1);
  ctx.emit("seconds", pp::pipeline_step_seconds(p, m, f, 2 * f));
}

MGPU_CASE("11_5.in_flight") {
  std::int64_t p = ctx.uniform_int(1, 16);
  std::int64_t m = ctx.uniform_int(1, 64);
  std::vector<double> gpipe, ofob;
  for (std::int64_t stage = 0; stage < p; ++stage) {
    gpipe.push_back(static_cast<double>(pp::in_flight_micro_batches(pp::Schedule::gpipe, p, m, stage)));
    ofob.push_back(static_cast<double>(pp::in_flight_micro_batches(pp::Schedule::one_f_one_b, p, m, stage)));
  }
  ctx.emit("gpipe", gpipe);
  ctx.emit("one_f_one_b", ofob);
}

MGPU_CASE("11_5.layers_and_boundary_bytes") {
  std::int64_t p = ctx.pick<std::int64_t>({1, 2, 4, 8});
  std::int64_t layers = p * ctx.uniform_int(1, 12);
  std::int64_t m = ctx.uniform_int(1, 32);
  pp::TransformerShape s;
  s.seq = ctx.pick<std::int64_t>({512, 2048});
  s.micro_batch = ctx.uniform_int(1, 8);
  s.hidden = ctx.pick<std::int64_t>({1024, 4096});
  s.layers = layers;
  ctx.emit("layers_per_stage", static_cast<double>(pp::layers_per_stage(layers, p)));
  std::vector<double> bytes;
  for (std::int64_t stage = 0; stage < p; ++stage) bytes.push_back(pp::boundary_bytes_sent_per_stage(s, p, m, stage, 2));
  ctx.emit("boundary_bytes", bytes);
  ctx.emit_rejects("rejects_uneven_stages", [] { pp::layers_per_stage(32, 3); });
}
