// 11.3 ZeRO stages 1-3: your implementation. Shard the optimizer state, then the gradients, then
// the weights of the course model over a data-parallel group, gathering each unit when needed.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_3 <id>` gives hints for it.
#include "11_3_zero/zero.hpp"

#include "11_3_zero/checks.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace mgpu::zero {

ShardLayout plan_shards(const model::Model& model, int ranks) {
  // TODO(11.3 plan_shards): a ShardLayout in which N equal padded shards of every unit cover it
  //   (ShardLayout's comment), a rank's unit shards sit back to back in one shard buffer, and
  //   ranks < 1 throws naming the value. model.units() lists each unit's count.
  throw NotImplemented("11.3 plan_shards");
}

ZeroState make_zero_state(Rank& rank, Comm& dp, const model::Model& model, int stage,
                          std::uint64_t seed, const model::AdamConfig& adam, Precision precision) {
  // TODO(11.3 make_zero_state): the ZeroState table of zero.hpp, every buffer in the ledger
  //   under its category, so that the ledger's peaks equal zero_state_per_gpu(P, kZeroRecipe)
  //   up to padding. All ranks start from the same parameters without communicating; a stage-3
  //   rank keeps only what it owns (owned_range) of each unit. Calls: check_stage, plan_shards,
  //   Buffer<float>(rank.memory(), category, count, label) (zeroed), model.init_params,
  //   model.unit(u).
  // TODO(11.3 make_zero_state_mixed): with Precision::bf16_mixed, the second table of zero.hpp
  //   instead, so that the peaks equal zero_state_per_gpu(P, kZeroMixedRecipe) up to padding:
  //   bf16 weights16 and grads16, an fp32 master holding the initial parameters themselves (not
  //   their rounding), sharded from stage 1 like the moments. Calls: Buffer<bf16>, model::to_bf16.
  throw NotImplemented("11.3 make_zero_state");
}

Gathered gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                     const ShardLayout& layout, int u, std::span<const float> owned) {
  // TODO(11.3 gather_unit): once the returned `done` is waited, `full` holds unit u's weights in
  //   the model's layout followed by zero padding, on every rank. The gather is only posted
  //   here, never waited (prefetch depends on that). A wrong-length `owned` throws. Calls:
  //   owned_range, Buffer<float> under Category::comm, dp.iall_gather (in place).
  throw NotImplemented("11.3 gather_unit");
}

Gathered16 gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                       const ShardLayout& layout, int u, std::span<const bf16> owned) {
  // TODO(11.3 gather_unit_bf16): gather_unit again with bf16 elements (Buffer<bf16>), so the
  //   wire carries 2 bytes per weight. Writing the fp32 one as a template saves writing it twice.
  throw NotImplemented("11.3 gather_unit_bf16");
}

void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const float> unit_grads,
                         std::span<float> shard_grads) {
  // TODO(11.3 reduce_scatter_unit): shard_grads ends with the group's average of the gradient
  //   elements this rank owns, zero in the padding, and the unit's gradient is never summed in
  //   full anywhere. Wrong lengths throw. Calls: a Category::comm Buffer<float>,
  //   dp.reduce_scatter (input and output must not overlap).
  throw NotImplemented("11.3 reduce_scatter_unit");
}

void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const bf16> unit_grads,
                         std::span<bf16> shard_grads) {
  // TODO(11.3 reduce_scatter_unit_bf16): reduce_scatter_unit with bf16 elements: the padded copy
  //   is bf16 and the reduce-scatter runs on bf16, half the bytes of the fp32 one.
  throw NotImplemented("11.3 reduce_scatter_unit_bf16");
}

Reducing start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                   const ShardLayout& layout, int u,
                                   std::span<const float> unit_grads,
                                   std::span<float> shard_grads) {
  // TODO(11.3 zero2_overlap): reduce_scatter_unit split in two: post the reduce-scatter and
  //   return the padded copy with its Request, unwaited. Then let reduce_scatter_unit call this
  //   and wait, and give zero_step and mixed_step their `overlap` (zero.hpp, zero_step): at most
  //   kMaxReduceScattersInFlight posted at once, every one waited before Adam. Calls:
  //   dp.ireduce_scatter, Request::wait; a std::deque keeps them oldest first.
  throw NotImplemented("11.3 zero2_overlap");
}

Reducing16 start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                     const ShardLayout& layout, int u,
                                     std::span<const bf16> unit_grads,
                                     std::span<bf16> shard_grads) {
  // TODO(11.3 zero2_overlap): the same with bf16 elements (a template serves both).
  throw NotImplemented("11.3 zero2_overlap");
}

model::Batch zero_local_batch(const model::Batch& global, int rank, int ranks) {
  // TODO(11.3 zero_local_batch): the N slices are equal, disjoint, contiguous and in rank order,
  //   so together they are the batch; an uneven batch or a bad rank throws std::invalid_argument
  //   with the header's message. Batch::slice (mgpu/model/model.hpp) makes the view.
  throw NotImplemented("11.3 zero_local_batch");
}

double zero_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch, bool overlap) {
  // TODO(11.3 zero_step): stages 0 and 1 (stage 3 hands over to fsdp_step, a bf16_mixed state
  //   to mixed_step). Done when, after every step, each rank's full weights equal plain data
  //   parallelism's up to fp32 rounding,
  //   each rank's optimizer state touches only the parameters it owns, and the traffic meter
  //   shows the collectives zero_traffic_per_gpu counts. The Adam step counter (state.steps)
  //   advances once per training step, whatever the number of units. Calls: zero_local_batch,
  //   model.forward_backward, model.unit_view, model::adam_step, and your gather_unit and
  //   reduce_scatter_unit.
  // TODO(11.3 zero_step_stage2): stage 2, same weights and traffic, but a full-size gradient
  //   never exists: at any moment at most one unit's gradient is held (Category::comm), and
  //   state.grads holds only the shard. Model::forward_backward cannot do that; drive the units
  //   yourself with model.input, unit_forward, loss_backward and unit_backward.
  // (TODO zero2_overlap comes back here once mixed_step works: see start_reduce_scatter_unit.)
  throw NotImplemented("11.3 zero_step");
}

double fsdp_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch) {
  // TODO(11.3 fsdp_step): the same weights as stage 0 while a rank keeps only shards: a unit's
  //   full weights exist only around its forward and again around its backward, and each unit's
  //   gradient is reduced into the shard before the next unit's backward needs memory. The comm
  //   peak stays at one or two gathered units, never the model. Calls: gather_unit,
  //   Request::wait, Buffer::reset, model.unit_forward / unit_backward, reduce_scatter_unit,
  //   model::adam_step.
  // TODO(11.3 fsdp_prefetch): with `prefetch`, the same bytes and the same weights, but each
  //   gather is already travelling on the comm stream while the unit before it computes, so the
  //   virtual step time falls and at most two gathered units are alive at once.
  throw NotImplemented("11.3 fsdp_step");
}

double mixed_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                  const model::Batch& global, bool prefetch, bool overlap) {
  // TODO(11.3 mixed_step): one bf16 mixed-precision step at any stage (zero_step hands over when
  //   state.precision is bf16_mixed). Done when, at every stage: the ledger's state peaks stay
  //   those of make_zero_state, and any fp32 copy of weights or gradients is transient
  //   (Category::comm), one unit's worth at a time, never the model's; every collective carries
  //   bf16, half the fp32 bytes; the Adam update lands on the fp32 master and weights16 is the
  //   master's rounding afterwards; the loss falls as in fp32; all ranks hold the same weights,
  //   and all stages end with the same bits. The model reads and writes fp32 only. Calls:
  //   model::to_float, model::to_bf16, your bf16 gather_unit and reduce_scatter_unit,
  //   dp.all_reduce on bf16, model::adam_step_mixed.
  throw NotImplemented("11.3 mixed_step");
}

std::vector<float> full_weights(Rank& rank, Comm& dp, const model::Model& model,
                                const ZeroState& state) {
  // TODO(11.3 full_weights): the model's full parameters in its layout, identical on every rank
  //   and at every stage. At stage 3 this is a collective: every rank of dp calls it. With
  //   bf16_mixed, the bf16 weights16 widened to fp32.
  throw NotImplemented("11.3 full_weights");
}

}  // namespace mgpu::zero
