// 11.3 ZeRO stages 1-3: your implementation. Shard the optimizer state, then the gradients, then
// the weights of the course model over a data-parallel group, gathering each unit when needed.
#include "11_3_zero/zero.hpp"

#include "11_3_zero/checks.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace mgpu::zero {

ShardLayout plan_shards(const model::Model& model, int ranks) {
  // TODO(11.3 plan_shards): reject ranks < 1; for each UnitInfo in model.units():
  //   s = (info.count + N - 1) / N; unit_offset = shard_size so far; unit_shard = s; shard_size += s.
  throw NotImplemented("11.3 plan_shards");
}

ZeroState make_zero_state(Rank& rank, Comm& dp, const model::Model& model, int stage, std::uint64_t seed,
                          const model::AdamConfig& adam) {
  // TODO(11.3 make_zero_state): check_stage("make_zero_state", stage); layout = plan_shards(model, dp.size()).
  //   Buffer<float>(rank.memory(), Category::weights, count, "label") allocates and zeroes.
  //   Stages 0-2: weights of num_params(), model.init_params(weights.span(), seed).
  //   Stage 3: init a Category::comm buffer of num_params(), copy owned_range(layout, u, dp.rank(),
  //   count) of each unit (it starts at model.unit(u).offset) to layout.unit_offset[u] of the shard.
  //   grads: full below stage 2, shard from 2; moments: full at stage 0, shard from 1.
  throw NotImplemented("11.3 make_zero_state");
}

Gathered gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model, const ShardLayout& layout, int u,
                     std::span<const float> owned) {
  // TODO(11.3 gather_unit): check owned.size() == owned_range(...).size(); full = N * s_u elements
  //   (Category::comm); slot = full.span().subspan(rank * s_u, s_u); copy owned into slot;
  //   done = dp.iall_gather(slot, full.span()); return without waiting.
  throw NotImplemented("11.3 gather_unit");
}

void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model, const ShardLayout& layout, int u,
                         std::span<const float> unit_grads, std::span<float> shard_grads) {
  // TODO(11.3 reduce_scatter_unit): check the two lengths; copy unit_grads into the start of a
  //   Category::comm buffer of N * s_u; dp.reduce_scatter(padded, shard_grads, ReduceOp::avg).
  throw NotImplemented("11.3 reduce_scatter_unit");
}

double zero_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state, const model::Batch& global,
                 bool prefetch) {
  // TODO(11.3 zero_step): local = zero_local_batch(global, dp.rank(), dp.size()).
  //   Adam on a range: model::adam_step(params, grads, m, v, ++state.steps, state.adam) (once per
  //   step: increment the counter once, then call it per unit with the same step number).
  //   Stage 0: model.forward_backward, dp.all_reduce(grads, ReduceOp::avg), adam_step on everything.
  //   Stage 1: forward_backward; reduce_scatter_unit each model.unit_view(grads, u) into a comm
  //   staging shard at unit_offset[u]; Adam on weights[offset + own.first, own.size()) with the
  //   shard's gradient and moments at unit_offset[u]; gather_unit the updated owned range, wait,
  //   copy the first count elements back into the unit's weights.
  //   Stage 2: like stage 1, but drive the units yourself (see Model::forward_backward in the
  //   runtime for the loop) and reduce-scatter each unit's comm gradient buffer into state.grads.
  //   Stage 3: return fsdp_step(rank, dp, model, state, global, prefetch).
  throw NotImplemented("11.3 zero_step");
}

double fsdp_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state, const model::Batch& global,
                 bool prefetch) {
  // TODO(11.3 fsdp_step): a lambda fetch(u) that calls gather_unit with this rank's part of the
  //   shard (state.weights at unit_offset[u], owned_range(...).size() elements) keeps this short.
  //   Forward: current = fetch(0); per unit: (prefetch: next = fetch(u + 1)); current.done.wait();
  //   unit_forward with current.full.span().first(count); current.full.reset(); move on.
  //   Backward from the last unit: the same pattern with fetch(u - 1), unit_backward into a comm
  //   gradient buffer, then reduce_scatter_unit into state.grads. Finally adam_step on the shard.
  throw NotImplemented("11.3 fsdp_step");
}

std::vector<float> full_weights(Rank& rank, Comm& dp, const model::Model& model, const ZeroState& state) {
  // TODO(11.3 full_weights): stages 0-2: copy state.weights. Stage 3: per unit gather_unit,
  //   wait, copy the first count elements to model.unit(u).offset of the result.
  throw NotImplemented("11.3 full_weights");
}

}  // namespace mgpu::zero
