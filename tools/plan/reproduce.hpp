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
  std::string group;     ///< rows judged together: "table1", "step", "layer"
  std::string source;    ///< the paper and table, and where the layout was read
  std::string hardware;  ///< a preset name
  /// What was measured: "tflops_per_gpu" (the paper's 96 B s L h^2 (...) FLOPs per GPU per
  /// second, in TFLOP/s), "step_seconds", "layer_forward_ms", "layer_backward_ms" or "mfu_percent"
  /// (model FLOPs over peak, in percent).
  std::string measure;
  double published = 0;  ///< the paper's number, in the measure's unit
  RunModel model;
  RunLayout layout;
};

/// An anchor with the model's number for it.
struct AnchorResult {
  Anchor anchor;
  double predicted = 0;  ///< in the measure's unit
  double error = 0;      ///< predicted / published - 1
  StepTime step;
};

/// Reads an anchors file; throws std::invalid_argument naming the row and field on a bad one.
std::vector<Anchor> load_anchors(const std::string& path);

/// The default anchors file, tools/plan/anchors.json.
std::string default_anchors_path();

/// Prices every anchor on its hardware preset.
std::vector<AnchorResult> reproduce(const std::vector<Anchor>& anchors);

/// The table `--reproduce` prints: one line per row (published, predicted, error) and, per
/// group, how many rows are within 15% and 20%, then where each row's time goes.
std::string render_reproduce(const std::vector<AnchorResult>& results);

/// `mgpu plan --reproduce [FILE]`: prints render_reproduce for FILE (default the anchors file).
/// Returns 0, or 2 with a message on `err` for an unreadable or malformed file.
int run_reproduce_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mgpu::planner
