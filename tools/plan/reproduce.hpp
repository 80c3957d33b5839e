// `mgpu plan --reproduce`: published training runs (tools/plan/anchors.json, each row with its
// source) priced by the step-time model on their hardware preset, printed beside what the
// papers measured. The rows carry the run's shape and layout only, never a throughput to aim at.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "plan/step_time.hpp"

namespace mgpu::planner {

/// One published measurement of one run.
struct Anchor {
  std::string name;      ///< e.g. "Table 1, 145.6B"
  std::string group;     ///< rows judged together: "table1", "step", "layer", "llama3"
  std::string source;    ///< the paper and table, and where the layout was read
  std::string hardware;  ///< a preset name
  /// What was measured: "tflops_per_gpu" (the paper's 96 B s L h^2 (...) FLOPs per GPU per
  /// second, in TFLOP/s), "step_seconds", "layer_forward_ms", "layer_backward_ms" or "mfu_percent"
  /// (model FLOPs over peak, in percent).
  std::string measure;
  double published = 0;  ///< the paper's number, in the measure's unit
  /// Whether the row is in the file's "fitted_group", the rows hardware.compute_overhead is
  /// fitted on; every other row is held out: the model never saw it.
  bool fitted = false;
  RunModel model;
  RunLayout layout;
};

/// An anchor with the model's number for it.
struct AnchorResult {
  Anchor anchor;
  double predicted = 0;  ///< in the measure's unit
  double error = 0;      ///< predicted / published - 1
  /// The time the measure stands for (a step, or one layer's pass), in seconds: what the
  /// hardware file's fitted compute_overhead adds to the modelled kernels, and what is left
  /// between the published run and the model (positive: the run was slower than the model).
  /// The two are the unmodelled time: one attributed to compute, one not attributed.
  double overhead_seconds = 0, residual_seconds = 0;
  StepTime step;
};

/// Reads an anchors file; throws std::invalid_argument naming the row and field on a bad one.
std::vector<Anchor> load_anchors(const std::string& path);

/// The default anchors file, tools/plan/anchors.json.
std::string default_anchors_path();

/// Prices every anchor on its hardware preset.
std::vector<AnchorResult> reproduce(const std::vector<Anchor>& anchors);

/// The compute_overhead at which the fitted rows' errors, in time, have a geometric mean of
/// zero, found by bisection in [0, 1] on those rows' preset. Throws std::invalid_argument when
/// no row is fitted, when the fitted rows span presets, or when no overhead in [0, 1] fits
/// (the model slower than the runs even without one: the error names the preset to fix).
double fit_compute_overhead(const std::vector<Anchor>& anchors);

/// The table `--reproduce` prints: one line per row (published, predicted, error) and, per
/// group, how many rows are within 15% and 20%, then where each row's time goes.
std::string render_reproduce(const std::vector<AnchorResult>& results);

/// `mgpu plan --reproduce [FILE]`: prints render_reproduce for FILE (default the anchors file).
/// Returns 0, or 2 with a message on `err` for an unreadable or malformed file.
int run_reproduce_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mgpu::planner
