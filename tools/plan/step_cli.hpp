// The flags of `mgpu plan --hardware NAME|FILE`: the step-time model (plan/step_time.hpp) on the
// layout the other flags describe, printed after the memory report.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "plan/options.hpp"
#include "plan/step_time.hpp"

namespace mgpu::planner {

/// Raw values of the step-time flags as CLI11 fills them.
struct StepFlags {
  std::string hardware;  ///< empty: no step time
  double vocab = 0, interleave = 1, ffn = 0, kv_heads = 0;
  double first_stage_layers = 0, last_stage_layers = 0;
  bool swiglu = false, flash_attention = false, dp_overlap = false;
  bool simulate = false;  ///< also run the step on the simulated cluster (plan/simulate.hpp)
  std::string trace;      ///< with simulate: the Chrome trace of the simulated step
};

/// Adds the "step time on hardware" option group to `app`.
void add_step_flags(CLI::App& app, StepFlags& flags);

/// One step of a layout priced on a hardware description: what step_time() was given and what
/// it returned.
struct StepReport {
  Hardware hardware;
  RunModel model;
  RunLayout layout;
  StepTime step;
  std::int64_t micro_batches = 0;  ///< m, from --micro-batches
};

/// With --hardware: one step of the layout `o` (validated; it needs the model shape and --vocab)
/// priced on that hardware; the global batch is m b dp (--micro-batches x --micro-batch x dp).
/// Without --hardware: nullopt, and any other step flag is a UsageError. Throws UsageError for a
/// missing shape or vocabulary, or a layout the model does not fit.
std::optional<StepReport> step_report(const CLI::App& app, const StepFlags& flags,
                                      const Options& o);

/// The step as text: where the time goes, TFLOP/s per GPU, MFU and HFU; with --tokens, also the
/// days the whole run takes at that step time.
std::string step_time_text(const StepReport& r, const Options& o);

/// The same step as JSON, in SI units: {"hardware", "global_batch", "micro_batches",
/// "seconds_per_component": {compute, exposed_tp, bubble, p2p, exposed_dp, optimizer},
/// "seconds_per_step", "tflops_per_gpu", "mfu", "hfu", "model_flops", "hardware_flops",
/// "run_days" (null without --tokens)}; the components add up to seconds_per_step.
nlohmann::ordered_json step_time_json(const StepReport& r, const Options& o);

}  // namespace mgpu::planner
