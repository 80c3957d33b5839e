// `mgpu plan --simulate`: the step of plan/step_time.hpp run on the runtime's simulated cluster
// on the virtual clock, so that the bubble and the waits come out of the real schedule's
// timeline instead of a formula. One rank thread per (cp rank, pipeline stage, data-parallel
// replica) stands for every GPU of its tensor-parallel group (they all do the same work at the
// same time): it is charged the step model's per-operation seconds for its layers, exposed
// tensor-parallel collectives included, and sends, passes ring attention's blocks and runs the
// data-parallel collectives on its own 1/t share with the runtime's timing-only calls, which
// carry a byte count and no buffer.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "plan/step_time.hpp"

namespace mgpu::planner {

/// How to run the simulation.
struct SimulateOptions {
  std::string trace_path;  ///< non-empty: write the step's Chrome trace there
};

/// The simulated step beside the analytic one.
struct SimulatedStep {
  StepTime analytic;      ///< step_time() of the same run
  double seconds = 0;     ///< the simulated step: the last rank's end on the virtual clock
  double pipeline = 0;    ///< when the last rank finished its last backward
  double compute = 0;     ///< on the rank that ends last: its layers' compute
  double exposed_tp = 0;  ///< its tensor-parallel collectives (charged as exposed)
  double waiting = 0;     ///< its idle time: fill and drain, sends, ring and data-parallel waits
  double optimizer = 0;   ///< its optimizer step
  int ranks = 0;          ///< rank threads, cp x pp x dp
  int last_rank = 0;      ///< the rank that ends last
  int last_stage = 0;     ///< its pipeline stage
  /// Bytes sent per step in each group by the rank that sent the most there: the sends between
  /// stages ("pp"), ring attention's ("cp"), the data-parallel collectives ("dp"), as the runtime
  /// metered them; the step model counts the same as StepTime::pp_bytes, cp_bytes, dp_bytes.
  double pp_bytes = 0, cp_bytes = 0, dp_bytes = 0;
  double wall_seconds = 0;  ///< host time the simulation took
};

/// The same hardware with every link free: zero latency and unlimited bandwidth, so both the
/// analytic model and the simulation price communication at nothing.
Hardware without_communication(Hardware hw);

/// Runs one step of `layout` on the simulated cluster. The schedule is 1F1B, interleaved with
/// v model chunks per stage when layout.interleave > 1, each of 1/v of the stage's layers (a
/// fraction of a layer when v does not divide them, as the step model counts). With cp > 1 every
/// layer runs ring attention's steps (StageTime::ring_forward, ring_backward) round its cp group.
/// The data-parallel collectives, over the dp x cp ranks holding the same weights, are the step
/// model's: ZeRO 0 all-reduces the gradients and ZeRO 1 reduce-scatters them and gathers the
/// weights after the schedule (ZeRO 0 with dp_overlap from the start of the stage's last backward);
/// ZeRO 2 reduce-scatters after every micro-batch's backward and gathers the weights at the end;
/// ZeRO 3 gathers each layer's weights before its forward and its backward and reduce-scatters its
/// gradients after it, every micro-batch (with dp_overlap, ZeRO 2 and 3's run behind the compute).
/// Then the optimizer runs. Throws UsageError for a layout step_time() rejects or more than 4096
/// rank threads.
SimulatedStep simulate_step(const RunModel& model, const RunLayout& layout, const Hardware& hw,
                            const SimulateOptions& options = {});

/// The simulation as text: simulated against analytic seconds, and where the last rank's time
/// went.
std::string simulate_text(const SimulatedStep& s);

/// `mgpu plan --reproduce --simulate [--only TEXT] [FILE]`: simulates every anchor step (the
/// rows whose name contains TEXT) and prints rank threads, analytic and simulated seconds, their
/// difference and the host seconds each took. Returns 0, or 2 with a message on `err`.
int run_simulate_reproduce_cli(const std::vector<std::string>& args, std::ostream& out,
                               std::ostream& err);

}  // namespace mgpu::planner
