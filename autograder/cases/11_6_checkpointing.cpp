// Graded cases of 11.6's formulas: peak activation memory with a checkpoint every k layers, the
// best interval, and the extra compute of recomputation.
#include "11_6_checkpointing/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace ck = mgpu::checkpointing;

MGPU_CASE("11_6.peak_units") {
  std::int64_t layers = ctx.uniform_int(1, 64);
  std::vector<double> peaks;
  for (std::int64_t k = 1; k <= layers; ++k) peaks.push_back(static_cast<double>(ck::checkpointed_peak_units(layers, k)));
  ctx.emit("checkpointed", peaks);
  ctx.emit("no_checkpoint", static_cast<double>(ck::no_checkpoint_peak_units(layers)));
  ctx.emit_rejects("rejects_k_above_layers", [&] { ck::checkpointed_peak_units(layers, layers + 1); });
}

MGPU_CASE("11_6.best_interval") {
  std::vector<double> best, best_bytes, peak_bytes;
  for (int i = 0; i < 5; ++i) {
    std::int64_t layers = ctx.uniform_int(1, 128);
    double cb = ctx.log_uniform(1e6, 1e9), lb = ctx.log_uniform(1e6, 1e10);
    best.push_back(static_cast<double>(ck::best_checkpoint_interval(layers)));
    best_bytes.push_back(static_cast<double>(ck::best_checkpoint_interval_bytes(layers, cb, lb)));
    peak_bytes.push_back(ck::checkpointed_peak_bytes(layers, ctx.uniform_int(1, static_cast<int>(layers)), cb, lb));
  }
  ctx.emit("best", best);
  ctx.emit("best_bytes", best_bytes);
  ctx.emit("peak_bytes", peak_bytes);
}

MGPU_CASE("11_6.recompute_fraction") {
  std::int64_t layers = ctx.uniform_int(1, 96);
  std::vector<double> out;
  for (int i = 0; i < 4; ++i)
    out.push_back(ck::recompute_extra_flops_fraction(ctx.uniform_int(0, static_cast<int>(layers)), layers, ctx.uniform_real(1, 3)));
  out.push_back(ck::recompute_extra_flops_fraction(layers, layers));
  ctx.emit("fraction", out);
}
