// Graded cases of 11.6's formulas: peak activation memory with a checkpoint every k layers, the
// best interval, and the extra compute of recomputation.
#include "11_6_checkpointing/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace ck = mgpu::checkpointing;

MGPU_CASE("11_6.peak_units") {
  // Every k of fixed layer counts (1, 2, a prime, one with many divisors) and of a drawn one:
  // each k that divides L and each that leaves a shorter last segment.
  std::vector<double> peaks, plain;
  for (std::int64_t layers : {std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, std::int64_t{12},
                              static_cast<std::int64_t>(ctx.uniform_int(1, 64))}) {
    for (std::int64_t k = 1; k <= layers; ++k)
      peaks.push_back(static_cast<double>(ck::checkpointed_peak_units(layers, k)));
    plain.push_back(static_cast<double>(ck::no_checkpoint_peak_units(layers)));
  }
  ctx.emit("checkpointed", peaks);
  ctx.emit("no_checkpoint", plain);
  ctx.emit_rejects("rejects_k_above_layers", [&] { ck::checkpointed_peak_units(7, 8); });
}

MGPU_CASE("11_6.best_interval") {
  // Fixed ties first: at L = 6 the peaks of k = 2 and k = 3 are equal (3 + 2 = 2 + 3), at L = 1000
  // k = 28 to 36 all give 64, so a scan that keeps the last best instead of the first is caught;
  // the byte version ties the same way when a checkpoint and a layer cost the same.
  std::vector<double> best, best_bytes, peak_bytes;
  for (std::int64_t layers :
       {std::int64_t{1}, std::int64_t{2}, std::int64_t{6}, std::int64_t{16}, std::int64_t{1000}}) {
    best.push_back(static_cast<double>(ck::best_checkpoint_interval(layers)));
    best_bytes.push_back(static_cast<double>(ck::best_checkpoint_interval_bytes(layers, 3e6, 3e6)));
  }
  best_bytes.push_back(static_cast<double>(ck::best_checkpoint_interval_bytes(6, 1e6, 0)));
  best_bytes.push_back(static_cast<double>(ck::best_checkpoint_interval_bytes(6, 0, 0)));
  for (int i = 0; i < 5; ++i) {
    std::int64_t layers = ctx.uniform_int(1, 128);
    double cb = ctx.log_uniform(1e6, 1e9), lb = ctx.log_uniform(1e6, 1e10);
    best.push_back(static_cast<double>(ck::best_checkpoint_interval(layers)));
    best_bytes.push_back(static_cast<double>(ck::best_checkpoint_interval_bytes(layers, cb, lb)));
    peak_bytes.push_back(
        ck::checkpointed_peak_bytes(layers, ctx.uniform_int(1, static_cast<int>(layers)), cb, lb));
  }
  ctx.emit("best", best);
  ctx.emit("best_bytes", best_bytes);
  ctx.emit("peak_bytes", peak_bytes);
}

MGPU_CASE("11_6.recompute_fraction") {
  // Edges: nothing recomputed, everything at the usual ratio 2 and at ratio 0; then draws.
  std::int64_t layers = ctx.uniform_int(1, 96);
  std::vector<double> out{ck::recompute_extra_flops_fraction(0, layers),
                          ck::recompute_extra_flops_fraction(layers, layers),
                          ck::recompute_extra_flops_fraction(layers, layers, 0.0)};
  for (int i = 0; i < 4; ++i)
    out.push_back(ck::recompute_extra_flops_fraction(ctx.uniform_int(0, static_cast<int>(layers)),
                                                     layers, ctx.uniform_real(1, 3)));
  ctx.emit("fraction", out);
  // Fixed counts strictly between 0 and L: the draws above can all land on 0 or L (L = 1 makes
  // that certain), where a share computed in integers, recomputed_layers / layers, is still right.
  ctx.emit("fraction_part_of_layers",
           std::vector<double>{ck::recompute_extra_flops_fraction(3, 12),
                               ck::recompute_extra_flops_fraction(7, 8, 1.0),
                               ck::recompute_extra_flops_fraction(1, 96, 0.5)});
  ctx.emit_rejects("rejects_more_recomputed_than_layers",
                   [&] { ck::recompute_extra_flops_fraction(layers + 1, layers); });
  ctx.emit_rejects("rejects_negative_recomputed",
                   [&] { ck::recompute_extra_flops_fraction(-1, layers); });
}

// ---------------------------------------------------------------- validation bounds, both sides
MGPU_CASE("11_6.formula_bounds") {
  // Each documented range just outside each end, with its inside end where the value cases do not
  // fix it: k is 1 to L for the peak in units and in bytes (k = 0 and k = L + 1 rejected; k = 1
  // and k = L priced); a layer count is at least 1 (0 rejected, 1 in the value cases); a size or a
  // backward ratio is at least 0 (0 priced there, below 0 rejected here).
  ctx.emit_rejects("peak_units_rejects_k_zero", [] { ck::checkpointed_peak_units(7, 0); });
  ctx.emit_rejects("peak_bytes_rejects_k_zero",
                   [] { ck::checkpointed_peak_bytes(7, 0, 1e6, 3e6); });
  ctx.emit_rejects("peak_bytes_rejects_k_above_layers",
                   [] { ck::checkpointed_peak_bytes(7, 8, 1e6, 3e6); });
  ctx.emit("peak_bytes_k_one_and_layers",
           std::vector<double>{ck::checkpointed_peak_bytes(7, 1, 1e6, 3e6),
                               ck::checkpointed_peak_bytes(7, 7, 1e6, 3e6)});
  ctx.emit_rejects("peak_bytes_rejects_negative_checkpoint",
                   [] { ck::checkpointed_peak_bytes(7, 2, -1, 3e6); });
  ctx.emit_rejects("no_checkpoint_rejects_zero_layers", [] { ck::no_checkpoint_peak_units(0); });
  // layer_bytes = 0 takes the early answer (L), which must still check L.
  ctx.emit_rejects("best_bytes_rejects_zero_layers",
                   [] { ck::best_checkpoint_interval_bytes(0, 1e6, 0); });
  ctx.emit_rejects("fraction_rejects_zero_layers",
                   [] { ck::recompute_extra_flops_fraction(0, 0); });
  ctx.emit_rejects("fraction_rejects_negative_ratio",
                   [] { ck::recompute_extra_flops_fraction(1, 4, -0.5); });
}
