// The flags of `mgpu plan --hardware NAME|FILE`: the step-time model (plan/step_time.hpp) on the
// layout the other flags describe, printed after the memory report.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "plan/model.hpp"
#include "plan/options.hpp"
#include "plan/step_time.hpp"

namespace mgpu::planner {

/// Raw values of the step-time flags as CLI11 fills them. The model's and the layout's flags
/// (--kv-heads, --ffn, --swiglu, --flash-attention, --first-stage-layers, --last-stage-layers,
/// --vocab, --interleave) are the memory report's (plan/cli.cpp): both halves read one Options.
struct StepFlags {
  std::string hardware;  ///< empty: no step time
  bool dp_overlap = false;
  bool simulate = false;  ///< also run the step on the simulated cluster (plan/simulate.hpp)
  std::string trace;      ///< with simulate: the Chrome trace of the simulated step
};

/// Adds the "step time on hardware" option group to `app`.
void add_step_flags(CLI::App& app, StepFlags& flags);

/// The hardware --hardware names, nullopt without it; any other step flag without --hardware is
/// a UsageError naming the fix. Throws UsageError as load_hardware for an unknown name.
std::optional<Hardware> step_hardware(const CLI::App& app, const StepFlags& flags);

/// What the hardware decides for the memory report too, unless a flag says otherwise: the
/// capacity (--gpu-memory defaults to the GPU's memory) and the server (--gpus-per-node defaults
/// to the hardware's GPUs per server; a different one is a UsageError, since the step would
/// price links the memory report does not assume).
void apply_hardware(const CLI::App& app, const Hardware& hw, Options& o);

/// One step of a layout priced on a hardware description: what step_time() was given and what
/// it returned, and the memory report's verdict on the same layout. A layout the memory report
/// says does not fit is not priced: the two halves never disagree on whether it can run.
struct StepReport {
  Hardware hardware;
  RunModel model;
  RunLayout layout;
  bool priced = false;  ///< false: the memory report says it does not fit, `step` is empty
  StepTime step;
  std::int64_t micro_batches = 0;  ///< m, from --micro-batches
  Row<layout::GpuMemory> memory;   ///< the memory report's busiest GPU (Plan::memory)
  std::int64_t memory_stage = 0;   ///< its stage (Plan::memory_stage)
  Row<bool> fits;                  ///< Plan::fits: the same verdict, never a second one
  double capacity_bytes = 0;       ///< --gpu-memory, the hardware's memory by default
};

/// With hardware: one step of the plan's layout (validated; it needs the model shape and
/// --vocab) priced on it, unless the plan's memory does not fit (then priced is false); the
/// global batch is m b dp (--micro-batches x --micro-batch x dp). Without: nullopt. Throws
/// UsageError for a missing shape or vocabulary.
std::optional<StepReport> step_report(const StepFlags& flags, const Plan& plan,
                                      const std::optional<Hardware>& hardware);

/// The step as text: whether it fits (the memory report's verdict), where the time goes,
/// TFLOP/s per GPU, MFU and HFU; with --tokens, also the days the whole run takes at that step
/// time.
std::string step_time_text(const StepReport& r, const Options& o);

/// The same step as JSON, in SI units: {"hardware", "priced" (false: not priced because the
/// memory does not fit, and only the memory fields follow), "global_batch", "micro_batches",
/// "seconds_per_component": {compute, exposed_tp, exposed_cp, bubble, p2p, exposed_dp,
/// optimizer}, "seconds_per_step", "tflops_per_gpu", "mfu", "hfu", "model_flops",
/// "hardware_flops", "run_days" (null without --tokens), and the per-GPU numbers it shares with
/// the memory report: "stage_layers", "params_per_gpu", "memory_bytes_per_gpu", "memory_stage",
/// "capacity_bytes", "fits", "traffic_bytes_per_step": {tp, pp, cp, dp}}; the components add up
/// to seconds_per_step.
nlohmann::ordered_json step_time_json(const StepReport& r, const Options& o);

}  // namespace mgpu::planner
