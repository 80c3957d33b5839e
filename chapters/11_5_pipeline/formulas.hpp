// 11.5 Pipeline parallelism: the bubble, how many micro-batches hide it, how many activations
// each stage keeps in flight, and what crosses stage boundaries.
// The running pipeline chapter measures its virtual clock and memory ledger against these.
#pragma once

#include <cstdint>

#include "mgpu/course.hpp"  // TransformerShape

/// Section 11.5: pipeline (inter-layer) parallelism.
namespace mgpu::pipeline {

/// Pipeline schedules whose in-flight activations are modelled here.
enum class Schedule {
  gpipe,        ///< all forwards, then all backwards (Huang et al. 2019)
  one_f_one_b,  ///< warm-up forwards, then alternate one forward and one backward (PipeDream-Flush)
};

/// Fraction of a GPipe (or 1F1B) step that a stage sits idle, with p stages and m micro-batches
/// of equal cost: (p - 1) / (m + p - 1).
///
/// The step takes m + p - 1 slots per pass, of which each stage is busy for m. p = 1 gives 0;
/// the fraction falls towards 0 as m grows and rises towards 1 as p grows.
/// Example: p = 4, m = 8 gives 3/11 = 0.2727.
/// @throws std::invalid_argument when p or m is below 1.
double gpipe_bubble_fraction(std::int64_t p, std::int64_t m);

/// The smallest number of micro-batches m for which gpipe_bubble_fraction(p, m) is strictly
/// below `target`. Example: p = 4, target 0.1: 3/(m + 3) < 0.1 needs m > 27, so 28.
/// p = 1 gives 1 (no bubble at all).
/// @throws std::invalid_argument when p is below 1 or target is not in (0, 1].
std::int64_t min_micro_batches_for_bubble(std::int64_t p, double target);

/// Bubble fraction of the interleaved 1F1B schedule where each stage holds v model chunks
/// (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
/// Megatron-LM", section 2.2.2): (p - 1) / (v*m + p - 1). The fill and drain shrink v-fold
/// because each slot is a chunk of 1/v of a stage; v = 1 is gpipe_bubble_fraction. The price is
/// v times as many point-to-point messages. (Megatron-LM also requires m to be a multiple of p
/// for this schedule; the formula does not.)
/// @throws std::invalid_argument when p, m or v is below 1.
double interleaved_bubble_fraction(std::int64_t p, std::int64_t m, std::int64_t v);

/// Idle time relative to useful compute time, the form Narayanan et al. 2021 quote:
/// (p - 1) / (v*m). It is bubble/(1 - bubble) for interleaved_bubble_fraction.
/// @throws std::invalid_argument when p, m or v is below 1.
double bubble_to_compute_ratio(std::int64_t p, std::int64_t m, std::int64_t v = 1);

/// Wall time of one pipelined step when each stage spends forward_seconds and backward_seconds
/// per micro-batch (all stages equal, communication free): (m + p - 1) * (forward + backward).
/// Dividing the busy part m * (forward + backward) by it gives 1 - gpipe_bubble_fraction.
/// @throws std::invalid_argument when p or m is below 1, or either time is negative.
double pipeline_step_seconds(std::int64_t p, std::int64_t m, double forward_seconds,
                             double backward_seconds);

/// Seconds every stage of a ZB-H1 pipeline waits in one step (Qi et al. 2024):
/// (p - 1) (T_F + T_B - T_W), for T_F = forward_seconds, T_B = input_backward_seconds (the input
/// half of a micro-batch's backward through one stage) and T_W = weight_backward_seconds (its
/// weight half), all stages equal, communication free, m >= p and T_W <= min(T_F, T_B) (see
/// zb_h1_schedule). 1F1B, whose backward is B and W together, waits (p - 1) (T_F + T_B + T_W).
/// Example: p = 4, T_F = T_B = T_W = 1 gives 3, a third of 1F1B's 9.
/// @throws std::invalid_argument when p is below 1, a time is negative, or T_W exceeds T_F or T_B
///         (the formula does not hold there).
double zb_h1_bubble_seconds(std::int64_t p, double forward_seconds, double input_backward_seconds,
                            double weight_backward_seconds);

/// Seconds the stage that waits most spends waiting between its first action and its last in a
/// ZB-H2 step (zb_h2_schedule), when a forward, an input half and a weight half each take
/// pass_seconds on every stage and messages are free: max(0, 2p - 1 - m) pass_seconds. Zero
/// once m >= 2p - 1: the bubble of a step when steps run back to back, which they can only when
/// the optimizer step is validated afterwards instead of synchronising every stage before it
/// (otherwise each step also pays its fill and drain). (One step on its own also
/// waits for the first forward to reach each stage and for the last stages to finish: every
/// stage waits max(p - 1, 2p - 1 - m) pass_seconds in all.)
/// Example: p = 4, m = 8 gives 0; p = 4, m = 4 gives 3 pass_seconds.
/// @throws std::invalid_argument when p or m is below 1 or pass_seconds is negative.
double zb_h2_bubble_seconds(std::int64_t p, std::int64_t m, double pass_seconds);

/// Micro-batches whose activations stage `stage` (0-based, 0 = first) holds at its peak.
/// - GPipe runs all m forwards before any backward: m on every stage.
/// - 1F1B: min(m, p - stage), however large m grows. The first stage holds the most, min(m, p).
/// @throws std::invalid_argument when p or m is below 1, or stage is not in [0, p).
std::int64_t in_flight_micro_batches(Schedule schedule, std::int64_t p, std::int64_t m,
                                     std::int64_t stage);

/// Layers each stage holds: layers / p.
/// @throws std::invalid_argument when layers or p is below 1, or p does not divide layers
///         ("p=3 does not divide layers=32: stages must have equal depth").
std::int64_t layers_per_stage(std::int64_t layers, std::int64_t p);

/// Bytes stage `stage` sends per step over the pipeline boundaries: each micro-batch sends its
/// output activation (seq * micro_batch * hidden elements) forward to stage + 1 and its input
/// gradient (same size) backward to stage - 1. The first stage only sends forward and the last
/// only backward: m * A for them, 2 * m * A in between, 0 when p = 1, where
/// A = seq * micro_batch * hidden * bytes_per_element.
/// @throws std::invalid_argument when p or m is below 1, stage is not in [0, p), a shape field
///         is below 1 or bytes_per_element is not positive.
double boundary_bytes_sent_per_stage(const TransformerShape& shape, std::int64_t p, std::int64_t m,
                                     std::int64_t stage, double bytes_per_element);

}  // namespace mgpu::pipeline
