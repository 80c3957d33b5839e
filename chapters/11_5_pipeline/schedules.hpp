// 11.5 Pipeline schedules as data, and an executor that runs any of them across stage ranks:
// each stage holds a contiguous range of the course model's units, receives activations from
// the stage before it, sends them on, and sends input gradients back the other way.
// The data types and the given helpers (check_schedule, schedule_in_flight, stage_units,
// split_micro_batches) are in schedule_given.hpp; this file is the contract of your TODOs.
#pragma once

#include "11_5_pipeline/formulas.hpp"
#include "11_5_pipeline/schedule_given.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"

#include <span>
#include <vector>

namespace mgpu::pipeline {

// ------------------------------------------------------------------ schedules

/// GPipe (Huang et al. 2019): every stage runs the forwards of micro-batches 0..m-1, then their
/// backwards in the same order 0..m-1. Every stage holds all m micro-batches at its peak.
///
/// TODO(11.5 gpipe_schedule).
/// @throws std::invalid_argument when p or m is below 1.
PipelineSchedule gpipe_schedule(int p, int m);

/// 1F1B (PipeDream-Flush, Narayanan et al. 2021): GPipe's bubble with far less activation memory.
/// The schedule is the valid one (check_schedule accepts it) in which, on every stage s:
/// - the forwards take the micro-batches in order 0..m-1, and so do the backwards;
/// - the stage never holds more than min(m, p - s) micro-batches at once (schedule_in_flight);
/// - it never runs a backward while a forward is left that it could run within that limit.
/// (Taking the micro-batches in another order shared by all stages, say m-1 down to 0, is the
/// same schedule: see PipelineSchedule.)
///
/// TODO(11.5 one_f_one_b_schedule).
/// @throws std::invalid_argument when p or m is below 1.
PipelineSchedule one_f_one_b_schedule(int p, int m);

/// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's "virtual pipeline"): each stage holds
/// v model chunks (stage s's chunk c is model chunk c*p + s, see PipelineSchedule), so filling
/// and draining the pipeline takes slots of one chunk, 1/v of a stage, and the bubble falls to
/// (p - 1) / (v*m + p - 1). Megatron's order, on every stage s:
/// - the stage runs m*v chunk-forwards and m*v chunk-backwards. The forwards take the
///   micro-batches in groups of p (0..p-1, then p..2p-1, ...): a group goes through chunk 0, its
///   micro-batches in order, then through chunk 1 in the same order, up to chunk v-1, before the
///   next group starts. The backwards take the same groups in the same order, but the chunks from
///   v-1 down to 0: gradients enter at the last chunk.
/// - before its first backward the stage runs as many forwards (at most m*v) as fit before the
///   gradient that backward needs could be back, if every chunk-forward and chunk-backward took
///   one slot and messages were free; from then on it runs one backward, one forward, in turn,
///   while forwards remain, then the backwards left.
/// The result passes check_schedule, deadlock check included. v = 1 is a valid pipeline too, not
/// the same as one_f_one_b_schedule (which caps memory rather than filling time).
/// Example, p = 2, m = 2, v = 2, as Fk.c / Bk.c for micro-batch k on chunk c: stage 0 runs
/// F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0; stage 1 runs F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0.
///
/// TODO(11.5 interleaved_one_f_one_b_schedule).
/// @throws std::invalid_argument when p, m or v is below 1, or m is not a multiple of p
///         (Megatron's requirement: the micro-batches go through the chunks in groups of p).
PipelineSchedule interleaved_one_f_one_b_schedule(int p, int m, int v);

/// ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with every
/// backward split into its input half (B, Pass::backward_input) and its weight half (W,
/// Pass::backward_weight), the weight halves moved into time the stage would spend waiting.
/// The schedule is the one valid schedule (check_schedule) with these properties on every
/// stage s:
/// - no Pass::backward appears; the forwards take the micro-batches in order 0..m-1, and so do
///   the input halves and the weight halves;
/// - with its weight halves left out and each input half read as a backward, the program is
///   1F1B's (one_f_one_b_schedule);
/// - the stage never holds more than min(m, p) micro-batches (schedule_in_flight, which holds
///   one until its weight half): 1F1B's peak, that of its first stage;
/// - up to the stage's last forward, a weight half appears only right before a forward that
///   would otherwise take the stage past that bound: each is as late as the memory allows;
/// - after the last forward, each input half that does not directly follow it comes right after
///   one weight half whenever one is pending there, filling that wait for a gradient; the weight
///   halves still pending after the last input half end the program.
/// So the later stages now hold as many micro-batches as the first. On the virtual clock, with
/// each stage spending T_F, T_B and T_W seconds per micro-batch on F, B and W and free messages,
/// for m >= p and T_W <= min(T_F, T_B) (true of every unit of the course model), the step takes
/// m (T_F + T_B + T_W) + zb_h1_bubble_seconds(p, T_F, T_B, T_W): every stage waits
/// (p - 1)(T_F + T_B - T_W), where 1F1B waits (p - 1)(T_F + T_B + T_W).
///
/// TODO(11.5 zb_h1_schedule) (after TODO(11.5 zb_h1_bubble_seconds) in formulas.hpp).
/// @throws std::invalid_argument when p or m is below 1.
PipelineSchedule zb_h1_schedule(int p, int m);

/// ZB-H2 (Qi et al. 2024): the zero-bubble schedule that spends memory to remove the bubble.
/// Every backward in two halves as in zb_h1_schedule, each stage allowed to hold almost twice
/// 1F1B's peak. The schedule is a valid one (check_schedule) in which, on every stage s:
/// - no Pass::backward appears; the forwards take the micro-batches in order 0..m-1, and so do
///   the input halves and the weight halves;
/// - the stage never holds more than min(m, 2p - 1) micro-batches (schedule_in_flight, which holds
///   one until its weight half), and it does hold that many at its peak;
/// - played in slots (every forward, input half and weight half takes one slot, messages are
///   free, and each action starts in the first slot where its stage is free and its input exists),
///   the stage never sits out a slot in which it could run something; never runs a forward or a
///   weight half in a slot where the gradient for its next input half has arrived; and never runs
///   a weight half in a slot where its next forward's input has arrived and fits the bound.
/// Those rules fix the schedule, and with it what it achieves: played in slots, no stage waits
/// between its first action and its last once m >= 2p - 1; for smaller m, the stage that waits
/// most waits 2p - 1 - m slots there. One step on its own takes 3m + max(p - 1, 2p - 1 - m)
/// slots: for m >= p the only wait left is the forward fill.
/// On the virtual clock, with a stage spending the same T seconds on a forward, an input half and
/// a weight half (the course model's FFN-only blocks) and free messages, the most any stage waits
/// between its first and its last action is zb_h2_bubble_seconds(p, m, T): the bubble of a step
/// when steps run back to back, each stage starting the next as soon as it has finished (ZB-H1
/// leaves (p - 1) T there, 1F1B 3 (p - 1) T). Back to back assumes the optimizer step is
/// validated afterwards rather than synchronised across stages first; without that, each step
/// also pays its fill and drain.
///
/// TODO(11.5 zb_h2_schedule) (after TODO(11.5 zb_h2_bubble_seconds) in formulas.hpp).
/// @throws std::invalid_argument when p or m is below 1.
PipelineSchedule zb_h2_schedule(int p, int m);

// ------------------------------------------------------------------ the executor

/// What one stage keeps between the actions of one step; run_pipeline makes one per step and
/// hands it to every forward and backward action of the stage's program. A stage of p = pp.size()
/// runs model chunks j = c*p + pp.rank() for its chunks c (PipelineSchedule).
struct StageState {
  /// For m micro-batches and v chunks per stage, holding nothing yet.
  StageState(int micro_batches_, int chunks_)
      : micro_batches(micro_batches_),
        chunks(chunks_),
        caches(static_cast<std::size_t>(micro_batches_) * static_cast<std::size_t>(chunks_)),
        loss_grads(static_cast<std::size_t>(micro_batches_)) {}

  int micro_batches;  ///< m: each micro-batch's loss counts 1/m of the step's
  int chunks;         ///< v: chunks per stage
  /// caches[k*v + c]: one model::UnitCache per unit of chunk c, filled by the forward of
  /// micro-batch k on chunk c and emptied by its backward (or, when the backward runs in two
  /// halves, by its backward-weight): its saved activations, which the ledger counts under
  /// Category::activations for that long and no longer.
  std::vector<std::vector<model::UnitCache>> caches;
  /// loss_grads[k]: on the stage that holds the last model chunk, from micro-batch k's forward
  /// to its backward (or backward-input) there, the gradient of k's loss times 1/m with respect to
  /// the head's output (tokens, d_out), a Category::activations buffer; empty otherwise.
  std::vector<Buffer<float>> loss_grads;
  /// The sum of loss/m over the micro-batches whose forward has run the last model chunk here.
  double loss = 0;
};

/// Runs forward action `a` of stage s = pp.rank() in a p = pp.size() stage pipeline: micro-batch
/// k = a.micro_batch (`micro_batch`) through model chunk j = a.chunk*p + s of p*v
/// (v = state.chunks), whose units are stage_units(model, p*v, j).
/// - Model chunk 0 starts from the micro-batch's inputs; any other takes its input from what the
///   forward of k on model chunk j - 1 sent (on stage (j - 1) % p).
/// - After it returns, state.caches[k*v + a.chunk] holds the chunk's saved activations, and
///   either the chunk's output has been sent on for the forward of k on model chunk j + 1, or,
///   on the last model chunk, state.loss has grown by k's loss / m and state.loss_grads[k] holds
///   that scaled loss's gradient (see StageState).
/// - Reads only the chunk's units of `params` (the full flat buffer in the model's layout).
/// - Tags its messages so that every receive gets the message meant for it, whatever order the
///   neighbours run their actions in.
/// @throws std::invalid_argument when p*v does not divide the model's layers (stage_units).
void run_forward_action(Rank& rank, Comm& pp, const model::Model& model, StageState& state,
                        const Action& a, std::span<const float> params,
                        const model::Batch& micro_batch);

/// Runs backward action `a` of stage s = pp.rank(): micro-batch k = a.micro_batch back through
/// model chunk j = a.chunk*p + s, whose forward this stage has run with the same `state`.
/// a.pass is Pass::backward (the whole backward), Pass::backward_input (B) or
/// Pass::backward_weight (W, which this stage's B of k on the same chunk has preceded).
/// - The gradient of the chunk's output (needed by backward and B) is state.loss_grads[k] on the
///   last model chunk, and what the backward or B of k on model chunk j + 1 sent otherwise.
/// - After a backward returns, the gradient of k's loss / m with respect to the chunk's units'
///   weights has been ADDED into their ranges of `grads` (nothing else is written),
///   state.caches[k*v + a.chunk] is empty (its activations freed) and so is state.loss_grads[k];
///   unless j = 0, the gradient with respect to the chunk's input has been sent for the backward
///   (or B) of k on model chunk j - 1.
/// - B does the same sending and freeing of state.loss_grads[k], and writes nothing into `grads`:
///   every unit's cache is left weight pending (model::UnitCache), so the activations stay on the
///   ledger. W then adds the weight gradients into `grads`, as the backward would have, and
///   empties the caches; it neither sends nor receives.
/// - Tags its messages as run_forward_action does.
/// @throws std::invalid_argument when p*v does not divide the model's layers (stage_units).
void run_backward_action(Rank& rank, Comm& pp, const model::Model& model, StageState& state,
                         const Action& a, std::span<const float> params, std::span<float> grads,
                         const model::Batch& micro_batch);

/// Runs stage pp.rank()'s program of `schedule` for one training step and returns the mean loss
/// over the micro-batches on the stage holding the last model chunk (0 on the others).
///
/// With p = pp.size() and v = schedule.chunks, the stage's chunk c is model chunk
/// j = c*p + pp.rank() of the p*v, and its units are stage_units(model, p*v, j) (for v = 1 that
/// is stage_units(model, p, stage)). `params` and `grads` are full flat buffers in the model's
/// layout of which only this stage's units are read and written. Gradients are ACCUMULATED into
/// `grads`: once every stage has run, their ranges together hold model.forward_backward's
/// gradient of the mean loss on the whole batch (added to what was there).
/// Each (micro-batch, chunk)'s saved activations stay in the ledger (Category::activations) from
/// its forward to its backward (or backward-weight), so a stage's activation peak follows
/// schedule_in_flight of its program, plus the boundary buffers in transit. Messages pair correctly
/// for every schedule that check_schedule accepts, whatever order each stage takes the
/// micro-batches in.
///
/// TODO(11.5 run_pipeline), after TODO(11.5 run_forward_action) and TODO(11.5 run_backward_action).
/// @throws std::invalid_argument when the schedule is invalid (check_schedule), its p is not
///         pp.size(), its m is not micro_batches.size(), or p*v does not divide the model's layers.
double run_pipeline(Rank& rank, Comm& pp, const model::Model& model,
                    const PipelineSchedule& schedule, std::span<const float> params,
                    std::span<float> grads, std::span<const model::Batch> micro_batches);

}  // namespace mgpu::pipeline
