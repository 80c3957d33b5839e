// 11.3 ZeRO stages 1, 2 and 3 on the simulated cluster: the course model trained by a
// data-parallel group whose optimizer state, gradients and finally weights are sharded over the
// ranks, with FSDP-style gather-use-discard of each unit's weights and optional prefetch.
#pragma once

#include "11_3_zero/formulas.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::zero {

/// The precision recipe the running chapter trains with by default (Precision::fp32): fp32
/// weights and gradients and Adam's two fp32 moments, no separate master copy (the fp32 weights
/// are the master), {4, 4, 0, 8}. fp32 throughout keeps every stage bitwise comparable with
/// plain data parallelism; compare the ledger with zero_state_per_gpu(params, kZeroRecipe, stage,
/// N).
inline constexpr PrecisionRecipe kZeroRecipe = kFp32Adam;

/// The recipe of Precision::bf16_mixed, the course text's: bf16 weights and gradients, an fp32
/// master copy and Adam's two fp32 moments, {2, 2, 4, 8}. Its ledger shows the text's 16 Psi,
/// 4 Psi + 12 Psi/N, 2 Psi + 14 Psi/N and 16 Psi/N.
inline constexpr PrecisionRecipe kZeroMixedRecipe = kBf16MixedAdam;

/// What a ZeroState stores its weights and gradients in.
enum class Precision {
  fp32,        ///< kZeroRecipe: fp32 weights and gradients, no master copy
  bf16_mixed,  ///< kZeroMixedRecipe: bf16 weights and gradients, fp32 master and moments
};

/// How the flat parameter buffer is split over N ranks: unit by unit, as FSDP shards each
/// wrapped module's flat parameter. Unit u (count_u elements) is padded to N * s_u elements with
/// s_u = ceil(count_u / N); rank r owns elements [r * s_u, (r + 1) * s_u) of the padded unit,
/// clipped to count_u (the last ranks may own fewer, or none). A rank's shard buffer is the
/// concatenation of its unit shards: s_0 elements for unit 0, then s_1 for unit 1, ...
/// The padding is at most N - 1 elements per unit, so a shard exceeds P/N by fewer than one
/// element per unit.
struct ShardLayout {
  int ranks = 1;                         ///< N, the data-parallel group size
  std::vector<std::size_t> unit_shard;   ///< s_u per unit
  std::vector<std::size_t> unit_offset;  ///< where unit u's shard starts in a rank's shard buffer
  std::size_t shard_size = 0;            ///< sum of s_u: the length of every rank's shard buffer
};

/// Given: the elements of unit `u` that group rank `r` owns, as [first, last) relative to the
/// start of the unit, clipped to the unit's real length `unit_count` (may be empty).
struct OwnedRange {
  std::size_t first = 0;  ///< first owned element, relative to the unit
  std::size_t last = 0;   ///< one past the last owned element
  /// Number of owned elements.
  [[nodiscard]] std::size_t size() const { return last - first; }
};

/// Given: OwnedRange of group rank `r` in unit `u` of `layout`, for a unit of `unit_count`
/// elements.
inline OwnedRange owned_range(const ShardLayout& layout, int u, int r, std::size_t unit_count) {
  const std::size_t s = layout.unit_shard.at(static_cast<std::size_t>(u));
  const std::size_t first = std::min(unit_count, static_cast<std::size_t>(r) * s);
  const std::size_t last = std::min(unit_count, first + s);
  return {first, last};
}

/// One rank's training state for a ZeRO stage, every buffer in the rank's ledger.
///
/// Precision::fp32 (the `weights` and `grads` buffers; nothing under Category::master):
///
/// | stage | weights (Category::weights) | grads (Category::grads) | adam_m, adam_v (optimizer) |
/// |-------|-----------------------------|-------------------------|----------------------------|
/// | 0     | full, P                     | full, P                 | full, P each               |
/// | 1     | full, P                     | full, P                 | shard, S each              |
/// | 2     | full, P                     | shard, S                | shard, S each              |
/// | 3     | shard, S                    | shard, S                | shard, S each              |
///
/// Precision::bf16_mixed (`weights16` and `grads16` in bf16 take the place of `weights` and
/// `grads`, which stay empty; `master` is fp32 and sharded with the optimizer state):
///
/// | stage | weights16 | grads16  | master (Category::master) | adam_m, adam_v |
/// |-------|-----------|----------|---------------------------|----------------|
/// | 0     | full, P   | full, P  | full, P                   | full, P each   |
/// | 1     | full, P   | full, P  | shard, S                  | shard, S each  |
/// | 2     | full, P   | shard, S | shard, S                  | shard, S each  |
/// | 3     | shard, S  | shard, S | shard, S                  | shard, S each  |
///
/// P = model.num_params(), S = layout.shard_size. Full buffers use the model's layout; shard
/// buffers the ShardLayout's. Transient buffers of a step (gathered units, padded staging
/// copies, one unit's gradient, a unit's weights widened to fp32 for the compute) go under
/// Category::comm, which zero_state_per_gpu does not count.
struct ZeroState {
  int stage = 0;                          ///< 0 (plain data parallelism), 1, 2 or 3
  Precision precision = Precision::fp32;  ///< which set of buffers below is allocated
  ShardLayout layout;                     ///< how shards are cut
  model::AdamConfig adam;                 ///< optimizer hyper-parameters
  std::int64_t steps = 0;                 ///< Adam steps taken (the bias correction counts from 1)
  Buffer<float> weights;                  ///< fp32 weights, see the table (empty in bf16_mixed)
  Buffer<float> grads;                    ///< fp32 gradients, see the table (empty in bf16_mixed)
  Buffer<bf16> weights16;                 ///< bf16 working weights, see the table (empty in fp32)
  Buffer<bf16> grads16;                   ///< bf16 gradients, see the table (empty in fp32)
  Buffer<float> master;                   ///< fp32 master weights, see the table (empty in fp32)
  Buffer<float> adam_m;                   ///< Adam's first moment, see the table
  Buffer<float> adam_v;                   ///< Adam's second moment, see the table
};

/// A unit's weights being all-gathered: `full` holds N * s_u elements (Category::comm) whose
/// first count_u are the unit in the model's layout once `done` has been waited.
template <class T>
struct BasicGathered {
  Buffer<T> full;  ///< the padded, gathered unit
  Request done;    ///< wait before reading `full`
};

/// An fp32 unit being gathered (Precision::fp32).
using Gathered = BasicGathered<float>;
/// A bf16 unit being gathered (Precision::bf16_mixed): half the bytes on the wire.
using Gathered16 = BasicGathered<bf16>;

/// The shard layout of `model` over `ranks` ranks.
///
/// TODO 7 of 11.3. s_u = ceil(count_u / N) for every unit, unit_offset the running sum of the
/// s_u before it, shard_size the total.
/// @throws std::invalid_argument when ranks < 1 (the message names the value).
ShardLayout plan_shards(const model::Model& model, int ranks);

/// This rank's training state for ZeRO stage `stage` over the group `dp`, allocated in
/// rank.memory() as the ZeroState table says.
///
/// TODO 8 of 11.3. Every rank computes the same initial parameters (model.init_params with
/// `seed`), so no communication is needed: full-weight stages keep them all; stage 3 builds
/// them in a temporary Category::comm buffer and keeps only its owned range of each unit
/// (owned_range), at the unit's unit_offset in the shard. Gradients and moments start at zero.
/// @throws std::invalid_argument when stage is not 0..3 (check_stage from checks.hpp).
///
/// TODO 15 of 11.3 (make_zero_state_mixed), with `precision` = Precision::bf16_mixed: the
/// second table of ZeroState. The fp32 master (full at stage 0, the owned ranges at stages 1-3)
/// holds the parameters as model.init_params makes them, weights16 their bf16 rounding
/// (model::to_bf16) in its layout; `weights` and `grads` stay empty.
ZeroState make_zero_state(Rank& rank, Comm& dp, const model::Model& model, int stage,
                          std::uint64_t seed, const model::AdamConfig& adam = {},
                          Precision precision = Precision::fp32);

/// Starts the all-gather of unit `u`'s weights from each rank's owned part `owned` (the
/// owned_range of this rank, owned.size() elements, possibly fewer than s_u or none).
///
/// TODO 9 of 11.3. Allocate `full` (N * s_u elements, Category::comm, zero), copy `owned` into
/// this rank's slot [r * s_u, r * s_u + owned.size()), then post dp.iall_gather with that slot
/// (all s_u elements) as input and `full` as output (in place) and return without waiting.
/// @throws std::invalid_argument when owned.size() differs from this rank's owned_range.
Gathered gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                     const ShardLayout& layout, int u, std::span<const float> owned);

/// gather_unit for bf16 weights (Precision::bf16_mixed): the same layout and the same posted,
/// unwaited in-place all-gather, of bf16 elements, so it sends half the bytes of the fp32 one.
///
/// TODO 16 of 11.3 (gather_unit_bf16).
/// @throws std::invalid_argument as gather_unit.
Gathered16 gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                       const ShardLayout& layout, int u, std::span<const bf16> owned);

/// Reduce-scatters unit `u`'s gradient `unit_grads` (count_u elements, this rank's sum over its
/// slice) into `shard_grads` (s_u elements): afterwards it holds the average over the group of
/// the elements this rank owns, zero in the padding.
///
/// TODO 10 of 11.3. Copy unit_grads into a zero-padded Category::comm buffer of N * s_u elements
/// and dp.reduce_scatter it into shard_grads with ReduceOp::avg (in and out must not overlap).
/// @throws std::invalid_argument when the lengths are not count_u and s_u.
void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const float> unit_grads,
                         std::span<float> shard_grads);

/// A unit's gradient on its way to the shard: `padded` (N * s_u elements, Category::comm) is the
/// zero-padded copy the reduce-scatter reads, so it must stay alive until `done` has been waited;
/// release it right after. Destroying the struct waits `done` before freeing `padded` (members
/// are destroyed last to first).
template <class T>
struct BasicReducing {
  Buffer<T> padded;  ///< the staging copy the collective reads; free it only after `done`
  Request done;      ///< wait before reading the shard or releasing `padded`
};

/// An fp32 unit gradient being reduce-scattered (Precision::fp32).
using Reducing = BasicReducing<float>;
/// A bf16 unit gradient being reduce-scattered (Precision::bf16_mixed).
using Reducing16 = BasicReducing<bf16>;

/// The most gradient reduce-scatters an overlapped stage-2 step keeps in flight (posted, not yet
/// waited). Two is double buffering: one reduce-scatter on the wire and the next queued behind
/// it, so the comm stream never idles for want of work while a unit's backward computes. Posting
/// every unit without a bound would hide just as much, but the staging copies of all units
/// together are a full gradient again, the very buffer stage 2 exists to remove.
inline constexpr std::size_t kMaxReduceScattersInFlight = 2;

/// reduce_scatter_unit without the wait: copies unit_grads into `padded` and posts
/// dp.ireduce_scatter(padded, shard_grads, avg), returning at once. `unit_grads` may be released
/// as soon as this returns; `shard_grads` holds the average only once `done` has been waited.
/// reduce_scatter_unit is this followed by done.wait().
///
/// TODO 19 of 11.3 (zero2_overlap), with the overlap in zero_step and mixed_step.
/// @throws std::invalid_argument as reduce_scatter_unit.
Reducing start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                   const ShardLayout& layout, int u,
                                   std::span<const float> unit_grads, std::span<float> shard_grads);

/// start_reduce_scatter_unit for bf16 gradients: a bf16 padded copy and a bf16 reduce-scatter.
///
/// TODO 19 of 11.3 (zero2_overlap).
/// @throws std::invalid_argument as reduce_scatter_unit.
Reducing16 start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                     const ShardLayout& layout, int u,
                                     std::span<const bf16> unit_grads, std::span<bf16> shard_grads);

/// reduce_scatter_unit for bf16 gradients (Precision::bf16_mixed): the padded copy is a bf16
/// Category::comm buffer and the reduce-scatter runs on bf16 (the runtime sums in fp32 and
/// rounds once, as NCCL does), so it sends half the bytes of the fp32 one.
///
/// TODO 17 of 11.3 (reduce_scatter_unit_bf16).
/// @throws std::invalid_argument as reduce_scatter_unit.
void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const bf16> unit_grads,
                         std::span<bf16> shard_grads);

/// The sequences of `global` that group rank `rank` of `ranks` trains on: contiguous, equal
/// slices in rank order that together are the whole batch, the split plain data parallelism
/// uses. Equal slices make the mean of the slice losses the batch's loss, which is what lets
/// every stage end with plain data parallelism's weights.
///
/// TODO 11 of 11.3 (the same idea as 11.2's local_batch, written again so that this chapter
/// stands on its own).
/// @throws std::invalid_argument when ranks < 1, rank is outside [0, ranks), or the batch does
///         not split evenly; the message names the batch size and the rank count and says to
///         pick a batch size divisible by the rank count.
model::Batch zero_local_batch(const model::Batch& global, int rank, int ranks);

/// One training step at state.stage on this rank's slice of `global`; returns the slice's loss.
/// Every stage ends with the same weights as plain data parallelism (stage 0), up to fp32
/// rounding.
///
/// TODO 12 of 11.3.
/// - stage 0: zero the grads, model.forward_backward on the slice, dp.all_reduce(avg), Adam
///   (model::adam_step) over everything.
/// - stage 1: as stage 0 up to backward; then per unit reduce_scatter_unit the unit's gradient
///   into a Category::comm staging shard, Adam on the owned range of the full weights with the
///   shard moments, and gather_unit the updated owned range back into the full weights.
/// - stage 2: the full gradient never exists: drive the units yourself (model.input,
///   unit_forward with caches, loss_backward, unit_backward) and give each unit's backward a
///   Category::comm gradient buffer of count_u, reduce-scattered into state.grads right after;
///   then Adam and the gather as in stage 1.
/// - stage 3: return fsdp_step(...).
/// - state.precision == Precision::bf16_mixed, any stage: return mixed_step(...).
///
/// TODO 19 of 11.3 (zero2_overlap): with `overlap` at stage 2, post each unit's reduce-scatter
/// with start_reduce_scatter_unit as soon as its backward ends, so that it travels on the comm
/// stream while the backward of the units before it computes. Keep at most
/// kMaxReduceScattersInFlight of them in flight: when that many are pending, wait the oldest
/// and release its staging copy before posting the next. Wait every one before Adam reads
/// state.grads. The same reductions in the same order, so the weights, gradients and bytes are
/// bitwise those without `overlap`; only the step time falls. Stages 0, 1 and 3 ignore
/// `overlap` (as stages 0-2 ignore `prefetch`).
/// @throws std::invalid_argument when the batch does not split over the group (zero_local_batch).
double zero_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch = false, bool overlap = false);

/// One ZeRO-3 (FSDP) step: weights live only as shards; each unit is gathered, used, released.
///
/// TODO 13 of 11.3. Forward: for each unit, gather_unit, wait, unit_forward with its first
/// count_u elements, release the gathered buffer. Backward (last unit first): gather the unit
/// again, unit_backward into a Category::comm gradient buffer, release both, reduce_scatter_unit
/// into state.grads at the unit's offset. Then Adam over the whole shard (padding has zero
/// weights and gradients and stays zero). With `prefetch`, post the next unit's gather
/// (the next in forward order, the previous one in backward) before computing the current unit,
/// so it travels while the compute stream works: at most two gathered units are alive.
double fsdp_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch);

/// One bf16 mixed-precision step (state.precision == Precision::bf16_mixed) at any stage, on this
/// rank's slice of `global`; returns the slice's loss. The model computes in fp32, so each unit's
/// bf16 weights (stage 3: gathered in bf16 with gather_unit) are widened (model::to_float) into a
/// Category::comm fp32 buffer of count_u right before its forward, and again before its
/// backward, and released after it. A unit's fp32 gradient (Category::comm) is rounded to bf16
/// (model::to_bf16) as soon as its backward ends:
/// - stages 0 and 1 into state.grads16 at the unit's offset; after the backward, stage 0
///   all-reduces grads16 (avg, in bf16) and stage 1 reduce-scatters each unit of it into a
///   Category::comm bf16 staging shard;
/// - stages 2 and 3 into a Category::comm bf16 buffer of count_u, reduce-scattered right away
///   into grads16 at the unit's unit_offset.
/// Then Adam: the reduced bf16 gradient of what this rank owns (everything at stage 0) is widened
/// into a Category::comm fp32 buffer and model::adam_step_mixed steps the fp32 master and moments
/// and writes the rounded weights into weights16 (full layout at stages 0-2, shard at stage 3).
/// Stages 1 and 2 then all-gather each unit's updated bf16 owned range into weights16, as the
/// fp32 stages do. With `prefetch` at stage 3, the next unit's gather is posted before the
/// current unit computes, as in fsdp_prefetch. With `overlap` at stage 2, each unit's bf16
/// reduce-scatter is posted (start_reduce_scatter_unit) and waited as zero_step's overlap says
/// (TODO 19, zero2_overlap).
///
/// Against an fp32 run from the same start, every weight differs by about its bf16 rounding
/// plus what the rounded gradients changed in Adam's steps; the loss falls alike.
///
/// TODO 18 of 11.3 (mixed_step).
/// @throws std::invalid_argument when state.precision is not bf16_mixed, or as zero_step.
double mixed_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                  const model::Batch& global, bool prefetch = false, bool overlap = false);

/// The full parameters (model layout, num_params elements) as every rank sees them: a copy of
/// state.weights for stages 0..2, the per-unit all-gather of the shards for stage 3 (a
/// collective: every rank of `dp` must call it). With Precision::bf16_mixed the same from
/// weights16, widened to fp32 (exactly): the weights the next forward computes with.
///
/// TODO 14 of 11.3.
std::vector<float> full_weights(Rank& rank, Comm& dp, const model::Model& model,
                                const ZeroState& state);

}  // namespace mgpu::zero
