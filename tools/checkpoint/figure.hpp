// The text's checkpoint-memory lab, measured: forward and backward of the course model with a
// checkpoint every k blocks, run by the 11.6 chapter code on the simulated cluster, its activation
// peak read off the memory ledger and its recomputed FLOPs off the virtual clock, beside the
// chapter's formulas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "errors.hpp"

namespace mgpu::checkpoint_figure {

/// A flag was missing, out of range or inconsistent (tools/errors.hpp).
using UsageError = tools::UsageError;

/// Largest --layers accepted. Up to kFullSweepLayers every k is measured; above it only the k
/// the report needs (see run_figure), so a run stays within seconds.
inline constexpr std::int64_t kMaxLayers = 1024;

/// Largest L for which run_figure measures every k from 1 to L.
inline constexpr std::int64_t kFullSweepLayers = 64;

/// What to run.
struct FigureOptions {
  std::int64_t layers = 32;       ///< L, the model's blocks
  std::optional<std::int64_t> k;  ///< only this interval; nullopt: every k from 1 to L
  bool sweep = false;  ///< also measure the best peak for a range of L (the SVG's panel 2)
};

/// Throws UsageError naming the fix unless L is in [1, kMaxLayers] and k, when given, in [1, L].
void validate(const FigureOptions& o);

/// One interval k, measured and predicted.
struct Row {
  std::int64_t k = 0;            ///< checkpoint every k blocks
  std::size_t peak_bytes = 0;    ///< ledger peak of Category::activations during the step
  double predicted_bytes = 0;    ///< the chapter's exact peak for checkpointed_forward_backward
  std::int64_t units_model = 0;  ///< 11.6 checkpointed_peak_units(L, k) = ceil(L/k) + k
  double extra_flops = 0;        ///< compute on the clock beyond the plain step, in FLOPs
};

/// The best peak for one model depth, for the SVG's second panel.
struct SweepPoint {
  std::int64_t layers = 0;       ///< L
  std::int64_t k = 0;            ///< the k measured: the one with the smallest predicted peak
  double measured_units = 0;     ///< its ledger peak / block_saved_bytes
  std::int64_t units_model = 0;  ///< min over k of ceil(L/k) + k, at best_checkpoint_interval(L)
};

/// Everything the report and the SVG show. Sizes are of the course model run by the tool: FFN
/// blocks without attention whose saved activations B are close to their input C, the units
/// model's assumption (one unit per checkpoint and per block).
struct Figure {
  FigureOptions options;                ///< what was run
  std::int64_t tokens = 0;              ///< tokens in the batch
  double checkpoint_bytes = 0;          ///< C, 11.6 block_checkpoint_bytes
  double block_bytes = 0;               ///< B, 11.6 block_saved_bytes: one "block unit"
  double embed_bytes = 0;               ///< E, the embedding's saved input
  std::size_t plain_peak_bytes = 0;     ///< activation peak of Model::forward_backward
  double plain_flops = 0;               ///< FLOPs of the plain step on the clock
  double predicted_extra_flops = 0;     ///< L block forwards (model unit_forward_flops)
  double predicted_extra_fraction = 0;  ///< recompute_extra_flops_fraction(L, L), diluted by the
                                        ///< embedding and head, which are never recomputed
  std::vector<Row> rows;                ///< by k
  bool capped = false;                  ///< true: L > kFullSweepLayers, only some k measured
  std::vector<std::int64_t> best_measured;   ///< every measured k with the smallest ledger peak
  std::vector<std::int64_t> best_predicted;  ///< every k in [1, L] with the smallest exact peak
  std::vector<std::int64_t> best_units;      ///< every k in [1, L] with the smallest ceil(L/k)+k
  std::int64_t chapter_best_units = 0;       ///< 11.6 best_checkpoint_interval(L)
  std::int64_t chapter_best_bytes = 0;       ///< 11.6 best_checkpoint_interval_bytes(L, C, B)
  std::vector<SweepPoint> sweep;             ///< when options.sweep: L from 1 up to options.layers
};

/// The chapter's exact activation peak of checkpointed_forward_backward for L blocks and interval
/// k: checkpointed_peak_bytes(L, k, C, B) + E + C, less one C when k does not divide L (the
/// checkpoints before the last full segment, its k caches, whose first holds its own checkpoint,
/// and the gradients into and out of a block's backward).
double predicted_peak_bytes(std::int64_t layers, std::int64_t k, double checkpoint_bytes,
                            double block_bytes, double embed_bytes);

/// Runs the plain step and the checkpointed one for each k (every k from 1 to L, or only
/// options.k; above kFullSweepLayers only k = 1, L, and those within 3 of the predicted bests),
/// each on a fresh one-rank cluster, through 11.6 checkpointed_forward_backward.
/// @throws UsageError for bad options; mgpu::NotImplemented when a chapter function the run needs
///         is a TODO; std::runtime_error when a step leaves activations allocated.
Figure run_figure(const FigureOptions& o);

/// The report: a row per k, the best k measured and predicted, the recompute cost.
std::string render_text(const Figure& f);

/// Two panels as a standalone SVG document: (1) the measured peak against k, in block units,
/// with the predicted curve and the best k marked; (2) when f.sweep is filled, the best measured
/// peak against L with the units model's minimum and 2 sqrt(L).
std::string render_svg(const Figure& f);

}  // namespace mgpu::checkpoint_figure
