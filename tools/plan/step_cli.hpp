// The flags of `mgpu plan --hardware NAME|FILE`: the step-time model (plan/step_time.hpp) on the
// layout the other flags describe, printed after the memory report.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "plan/options.hpp"

namespace mgpu::planner {

/// Raw values of the step-time flags as CLI11 fills them.
struct StepFlags {
  std::string hardware;  ///< empty: no step time
  double vocab = 0, interleave = 1, ffn = 0, kv_heads = 0;
  double first_stage_layers = 0, last_stage_layers = 0;
  bool swiglu = false, flash_attention = false, dp_overlap = false;
};

/// Adds the "step time on hardware" option group to `app`.
void add_step_flags(CLI::App& app, StepFlags& flags);

/// With --hardware: one step of the layout `o` (validated; it needs the model shape and --vocab)
/// priced on that hardware, where the time goes, TFLOP/s per GPU, MFU and HFU, as text; the global
/// batch is m b dp (--micro-batches x --micro-batch x dp). With --tokens, also the days the whole
/// run takes at that step time. Without --hardware: empty, and any
/// other step flag is a UsageError. Throws UsageError for a missing shape or vocabulary.
std::string step_time_text(const CLI::App& app, const StepFlags& flags, const Options& o);

}  // namespace mgpu::planner
