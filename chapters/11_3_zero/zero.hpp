// 11.3 ZeRO stages 1, 2 and 3 on the simulated cluster: the course model trained by a
// data-parallel group whose optimizer state, gradients and finally weights are sharded over the
// ranks, with FSDP-style gather-use-discard of each unit's weights and optional prefetch.
#pragma once

#include "11_3_zero/formulas.hpp"
#include "mgpu/bf16.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/traffic.hpp"

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

/// Given: the elements of unit `u` that group rank `r` owns, relative to the start of the unit,
/// clipped to the unit's real length `unit_count`: a Chunk (mgpu/traffic.hpp, the same piece of a
/// buffer as a ring's chunk in 11.2), which may be empty. For a unit of `unit_count` elements.
inline Chunk owned_range(const ShardLayout& layout, int u, int r, std::size_t unit_count) {
  const std::size_t s = layout.unit_shard.at(static_cast<std::size_t>(u));
  const std::size_t first = std::min(unit_count, static_cast<std::size_t>(r) * s);
  const std::size_t last = std::min(unit_count, first + s);
  return {.offset = first, .count = last - first};
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
/// TODO(11.3 plan_shards). s_u = ceil(count_u / N) for every unit, unit_offset the running sum of
/// the s_u before it, shard_size the total.
/// @throws std::invalid_argument when ranks < 1 (the message names the value).
ShardLayout plan_shards(const model::Model& model, int ranks);

/// This rank's training state for ZeRO stage `stage` over the group `dp`, allocated in
/// rank.memory() as the ZeroState table says.
///
/// TODO(11.3 make_zero_state). Contract: the weights are the parameters model.init_params makes
/// from `seed` (all of them below stage 3; at stage 3 this rank's owned_range of each unit, at the
/// unit's unit_offset in the shard, zero in the padding), identical on every rank, and no message
/// is sent. Gradients and moments start at zero, steps at 0. When it returns the ledger holds the
/// table's buffers and nothing else. Its Category::comm peak (graded exactly) is 0 below stage 3
/// and one full fp32 copy of the parameters (4P bytes) at stage 3.
/// @throws std::invalid_argument when stage is not 0..3 (check_stage from checks.hpp).
///
/// TODO(11.3 make_zero_state_mixed), with `precision` = Precision::bf16_mixed: the
/// second table of ZeroState. The fp32 master (full at stage 0, the owned ranges at stages 1-3)
/// holds the parameters exactly as model.init_params makes them (not their bf16 rounding),
/// weights16 their bf16 rounding in its own layout; `weights` and `grads` stay empty.
ZeroState make_zero_state(Rank& rank, Comm& dp, const model::Model& model, int stage,
                          std::uint64_t seed, const model::AdamConfig& adam = {},
                          Precision precision = Precision::fp32);

/// Starts the all-gather of unit `u`'s weights from each rank's owned part `owned` (the
/// owned_range of this rank, owned.size() elements, possibly fewer than s_u or none).
///
/// TODO(11.3 gather_unit). Contract: returns with the gather posted but not waited (a caller may
/// compute meanwhile). Once `done` is waited, `full` (N * s_u elements, Category::comm) holds on
/// every rank the unit's count_u weights in the model's layout, then zeros. One all-gather on the
/// traffic meter, of s_u elements per rank: (N - 1) * s_u elements sent per rank.
/// @throws std::invalid_argument when owned.size() differs from this rank's owned_range.
Gathered gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                     const ShardLayout& layout, int u, std::span<const float> owned);

/// gather_unit for bf16 weights (Precision::bf16_mixed): the same layout and the same posted,
/// unwaited in-place all-gather, of bf16 elements, so it sends half the bytes of the fp32 one.
///
/// TODO(11.3 gather_unit_bf16).
/// @throws std::invalid_argument as gather_unit.
Gathered16 gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                       const ShardLayout& layout, int u, std::span<const bf16> owned);

/// Reduce-scatters unit `u`'s gradient `unit_grads` (count_u elements, this rank's sum over its
/// slice) into `shard_grads` (s_u elements): afterwards it holds the average over the group of
/// the elements this rank owns, zero in the padding.
///
/// TODO(11.3 reduce_scatter_unit). Contract: one reduce-scatter on the traffic meter, of N * s_u
/// elements: (N - 1) * s_u elements sent per rank. While it runs it holds one Category::comm buffer
/// of N * s_u elements (a collective's input and output must not overlap), released before it
/// returns.
/// @throws std::invalid_argument when the lengths are not count_u and s_u.
void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const float> unit_grads,
                         std::span<float> shard_grads);

/// A unit's gradient on its way to the shard: `padded` (N * s_u elements, Category::comm) is the
/// copy the posted reduce-scatter reads, so it must stay alive until `done` has been waited;
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

/// reduce_scatter_unit without the wait: returns at once with the reduce-scatter posted.
/// `unit_grads` may be released as soon as this returns; `shard_grads` holds what
/// reduce_scatter_unit would have written only once `done` has been waited. The same bytes on
/// the meter as reduce_scatter_unit.
///
/// TODO(11.3 zero2_overlap), with the overlap in zero_step and mixed_step.
/// @throws std::invalid_argument as reduce_scatter_unit.
Reducing start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                   const ShardLayout& layout, int u,
                                   std::span<const float> unit_grads, std::span<float> shard_grads);

/// start_reduce_scatter_unit for bf16 gradients: a bf16 padded copy and a bf16 reduce-scatter.
///
/// TODO(11.3 zero2_overlap).
/// @throws std::invalid_argument as reduce_scatter_unit.
Reducing16 start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                     const ShardLayout& layout, int u,
                                     std::span<const bf16> unit_grads, std::span<bf16> shard_grads);

/// reduce_scatter_unit for bf16 gradients (Precision::bf16_mixed): the reduce-scatter runs on
/// bf16 (the runtime sums in fp32 in rank order and rounds once; NCCL's ring would round each
/// hop's partial sum), so it sends half the bytes of the fp32 one.
///
/// TODO(11.3 reduce_scatter_unit_bf16).
/// @throws std::invalid_argument as reduce_scatter_unit.
void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const bf16> unit_grads,
                         std::span<bf16> shard_grads);

/// The sequences of `global` that group rank `rank` of `ranks` trains on: contiguous, equal
/// slices in rank order that together are the whole batch, the split plain data parallelism
/// uses. Equal slices make the mean of the slice losses the batch's loss, which is what lets
/// every stage end with plain data parallelism's weights.
///
/// TODO(11.3 zero_local_batch) (the same idea as 11.2's local_batch, written again so that this
/// chapter stands on its own).
/// @throws std::invalid_argument when ranks < 1, rank is outside [0, ranks), or the batch does
///         not split evenly; the message names the batch size and the rank count and says to
///         pick a batch size divisible by the rank count.
model::Batch zero_local_batch(const model::Batch& global, int rank, int ranks);

/// One training step at state.stage on this rank's slice of `global`; returns the slice's loss.
/// Stage 3 is fsdp_step's and a Precision::bf16_mixed state mixed_step's: zero_step hands over
/// to them.
///
/// TODO(11.3 zero_step) (stages 0 and 1; TODO(11.3 zero_step_stage2) for stage 2). Contract, at
/// every stage:
///  - every rank ends with the same full weights (full_weights), those of plain data
///    parallelism with Adam on the whole batch, up to fp32 rounding; state.steps advances by 1;
///  - Adam's state is touched only where this rank owns it: the ledger holds the ZeroState
///    table's buffers, anything transient under Category::comm;
///  - the traffic meter shows the collectives zero_traffic_per_gpu counts: stage 0 one gradient
///    all-reduce; stages 1 and 2 a reduce-scatter of the gradient and an all-gather of the
///    weights, per unit, and no all-reduce;
///  - stage 2 never holds a full-size gradient: at any moment at most one unit's gradient exists
///    beside the shard state.grads;
///  - transient memory (Category::comm, graded exactly): gather_unit's and reduce_scatter_unit's
///    buffers, one unit's at a time, each released before the next unit's is allocated; besides
///    them, stage 1 holds one S-element shard of the reduced gradient for the step and stage 2
///    one unit's gradient (count_u elements) at a time; stage 0 holds nothing.
///
/// TODO(11.3 zero2_overlap): with `overlap` at stage 2, each unit's gradient reduction is
/// in flight on the comm stream while the backward of the units before it computes, with at
/// most kMaxReduceScattersInFlight reductions posted and not yet waited at any moment (so the
/// Category::comm peak grows by at most that many padded unit copies). The weights, gradients
/// and bytes are bitwise those without `overlap`; only the step time falls. Stages 0, 1 and 3
/// ignore `overlap` (as stages 0-2 ignore `prefetch`).
/// @throws std::invalid_argument when the batch does not split over the group (zero_local_batch).
double zero_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch = false, bool overlap = false);

/// One ZeRO-3 (FSDP) step: weights live only as shards.
///
/// TODO(11.3 fsdp_step). Contract:
///  - the same weights as stage 0 up to fp32 rounding, on every rank; state.steps advances by 1;
///    the shard's padding stays zero;
///  - a unit's full weights exist (gather_unit's buffer) only while that unit computes, in the
///    forward and again in the backward, and each unit's full gradient (count_u elements,
///    Category::comm) only until reduce_scatter_unit has reduced it into state.grads; one unit's
///    buffers at a time. The Category::comm peak (graded exactly) is a unit's worth, never the
///    model;
///  - the traffic meter shows zero_traffic_per_gpu's stage 3: per unit two all-gathers and one
///    reduce-scatter, 1.5 times stage 0's bytes.
/// TODO(11.3 fsdp_prefetch): with `prefetch`, the same weights and bytes, but
/// the gathers overlap the compute (more comm under compute on the virtual clock, a step no longer
/// than without), with at most one more gathered unit alive (the tests allow 4 padded units).
/// @throws std::invalid_argument when state.stage is not 3.
double fsdp_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch);

/// One bf16 mixed-precision step (state.precision == Precision::bf16_mixed) at any stage, on this
/// rank's slice of `global`; returns the slice's loss.
///
/// TODO(11.3 mixed_step). Contract, at every stage:
///  - the model computes in fp32 only; fp32 copies of weights or gradients are transient
///    (Category::comm): a unit's weights and gradient at a time around its forward and
///    backward, and the reduced gradient of what this rank owns for Adam. The state categories
///    keep the second ZeroState table's peaks;
///  - every collective carries bf16: the same collectives as the fp32 stage, at half its bytes;
///    stages 2 and 3 never hold a full-size gradient, as in fp32;
///  - one Adam step (state.steps + 1) on the fp32 master and moments of what this rank owns,
///    after which weights16 is the master's bf16 rounding everywhere (all-gathered where the
///    stage keeps full weights);
///  - every rank holds the same weights, and all four stages give the same bits (the runtime's
///    bf16 collectives sum in fp32 in rank order and round once);
///  - `prefetch` at stage 3 and `overlap` at stage 2 as in fsdp_step and zero_step.
/// Against an fp32 run from the same start, every weight differs by about its bf16 rounding
/// (2^-8 of the weight) plus what the rounded gradients changed in Adam's steps; the loss falls
/// alike.
/// @throws std::invalid_argument when state.precision is not bf16_mixed, or as zero_step.
double mixed_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                  const model::Batch& global, bool prefetch = false, bool overlap = false);

/// The full parameters (model layout, num_params elements) as every rank sees them: the weights
/// the next forward computes with (with Precision::bf16_mixed, weights16 widened to fp32,
/// exactly). At stage 3 this is a collective: every rank of `dp` must call it.
///
/// TODO(11.3 full_weights).
std::vector<float> full_weights(Rank& rank, Comm& dp, const model::Model& model,
                                const ZeroState& state);

}  // namespace mgpu::zero
