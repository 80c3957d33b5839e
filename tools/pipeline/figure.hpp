// The text's pipeline-bubble figure, measured: one training step of a pipeline schedule run by
// the 11.5 executor on the simulated cluster, its per-stage idle time read off the virtual clock
// and its in-flight activations off the memory ledger, beside the chapter's formulas.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "11_5_pipeline/schedules.hpp"
#include "errors.hpp"

namespace mgpu::pipeline_figure {

/// Which of the chapter's schedule functions builds the programs.
enum class ScheduleKind {
  gpipe,        ///< pipeline::gpipe_schedule
  one_f_one_b,  ///< pipeline::one_f_one_b_schedule
  interleaved,  ///< pipeline::interleaved_one_f_one_b_schedule, v chunks per stage
  zb_h1,        ///< pipeline::zb_h1_schedule: 1F1B with the backward in halves (zero bubble)
  zb_h2,        ///< pipeline::zb_h2_schedule: up to 2p - 1 held, no wait inside a stage's step
};

/// A flag was missing, out of range or inconsistent (tools/errors.hpp).
using UsageError = tools::UsageError;

/// Parses "gpipe", "1f1b", "interleaved", "zb-h1" or "zb-h2".
/// @throws UsageError for anything else, listing the names.
ScheduleKind parse_schedule(const std::string& name);

/// The name parse_schedule accepts for `kind`.
std::string schedule_flag(ScheduleKind kind);

/// The name people write: "GPipe", "1F1B" or "interleaved 1F1B".
std::string schedule_title(ScheduleKind kind);

/// What to run. The cluster's compute rate is fixed (1 GFLOP/s); links have `latency` seconds
/// per message and practically unlimited bandwidth, so with latency 0 only the schedule makes
/// stages wait and the measured bubble is the formula's.
struct FigureOptions {
  ScheduleKind schedule = ScheduleKind::one_f_one_b;  ///< which schedule
  int stages = 4;                                     ///< p
  int micro_batches = 8;                              ///< m
  int chunks = 1;                                     ///< v (only interleaved may exceed 1)
  double latency = 0;                                 ///< seconds per point-to-point message
};

/// Largest --stages accepted: the simulation runs one thread per stage.
inline constexpr int kMaxStages = 64;

/// Throws UsageError naming the fix unless `o` describes a pipeline the schedule can build:
/// p in [1, kMaxStages], m >= 1, v >= 1, v = 1 unless interleaved, m a multiple of p when
/// interleaved, latency finite and >= 0.
void validate(const FigureOptions& o);

/// The chapter's schedule for `o` (validated first).
pipeline::PipelineSchedule make_schedule(const FigureOptions& o);

/// One forward or backward action as it ran: the compute spans of its units on the clock.
struct Box {
  int stage = 0;                                  ///< which stage ran it
  pipeline::Pass pass = pipeline::Pass::forward;  ///< forward, backward, or a half of one
  int micro_batch = 0;                            ///< 0-based micro-batch
  int chunk = 0;                                  ///< the stage's chunk, 0..v-1
  double start = 0;                               ///< virtual seconds, first unit's start
  double end = 0;                                 ///< virtual seconds, last unit's end
};

/// What one stage did in the step.
struct StageResult {
  double busy_seconds = 0;              ///< compute time on the clock
  double bubble = 0;                    ///< 1 - busy / step time, as the 11.5 tests measure it
  double in_flight_measured = 0;        ///< ledger peak of activations / one (chunk-)micro-batch's
  std::int64_t in_flight_schedule = 0;  ///< pipeline::schedule_in_flight of the stage's program
  /// Seconds the stage waited between its first action's start and its last action's end.
  double inner_wait_seconds = 0;
};

/// A chapter formula's value, or the chapter function still to write.
struct Formula {
  std::optional<double> value;  ///< nullopt while `pending` is a TODO
  std::string pending;          ///< e.g. "11.5 gpipe_bubble_fraction"; empty when computed
};

/// Everything the report and the SVG show.
struct Figure {
  FigureOptions options;            ///< what was run
  std::vector<StageResult> stages;  ///< by stage
  std::vector<Box> boxes;           ///< every action of every stage, in program order per stage
  double step_seconds = 0;          ///< the cluster's makespan
  double bubble = 0;                ///< mean of the stages' bubbles
  double bubble_worst = 0;          ///< largest |stage bubble - mean|
  Formula formula;                  ///< (p-1)/(m+p-1), or (p-1)/(v m+p-1) interleaved
  std::string formula_text;         ///< "(p-1)/(m+p-1)" or "(p-1)/(v*m+p-1)"
  std::string trace_json;           ///< the Chrome trace, when asked for
  /// ZB-H1 only: one stage's seconds per micro-batch for a forward, an input half and a weight
  /// half (from the model's FLOPs), the wait per stage that zb_h1_bubble_seconds gives for them,
  /// and the wait 1F1B's (p-1)(T_F + T_B + T_W) would leave.
  double t_forward = 0, t_input = 0, t_weight = 0;
  Formula wait;
  double one_f_one_b_wait = 0;
  /// ZB-H2 only (with t_forward, t_input, t_weight above): the longest wait inside one stage's
  /// part of the step, measured and by zb_h2_bubble_seconds for T = T_F, and what ZB-H1's and
  /// 1F1B's formulas leave inside their first stage.
  double inner_wait_measured = 0;
  Formula inner_wait;
  double zb_h1_inner_wait = 0;
};

/// Runs one step of `o`'s schedule through pipeline::run_pipeline on a p-rank cluster with a
/// model of p*v equal blocks (one per chunk), one sequence per micro-batch.
/// @param with_trace keep the cluster's Chrome trace in Figure::trace_json.
/// @throws UsageError for bad options; mgpu::NotImplemented when a chapter function the run needs
///         is a TODO; std::runtime_error when the executor's timeline does not follow the schedule.
Figure run_figure(const FigureOptions& o, bool with_trace = false);

/// The answer to "how many micro-batches bring the bubble below `target`?".
struct TargetAnswer {
  std::int64_t micro_batches = 0;  ///< fewest m with bubble(p, m, v) strictly below target
  std::int64_t multiple_of_p =
      0;                  ///< the fewest such m that is a multiple of p (interleaved's rule)
  double bubble = 0;      ///< the bubble at micro_batches
  bool searched = false;  ///< true: found by bisection on interleaved_bubble_fraction (v > 1),
                          ///< false: pipeline::min_micro_batches_for_bubble answered (v = 1)
};

/// Fewest micro-batches whose bubble is strictly below `target` for p stages and v chunks
/// (the chapter's definition: 3/(m+3) < 0.1 gives 28 for p = 4).
/// @throws UsageError when p < 1, v < 1 or target is not in [1e-9, 1]; mgpu::NotImplemented when
/// the
///         chapter's formula is a TODO.
TargetAnswer fewest_micro_batches(int p, int v, double target);

/// The report: per-stage table, the bubble beside its formula, the step time.
std::string render_text(const Figure& f);

/// The timeline as a standalone SVG document: a row per stage, a box per action (forward blue,
/// backward orange, a darker shade per chunk, numbered "k" or "k.c"), idle as empty space, a
/// time axis in microseconds and the bubble and its formula in the title.
std::string render_svg(const Figure& f);

}  // namespace mgpu::pipeline_figure
