// 11.3 ZeRO stages 1-3 (reference solution): shard the optimizer state, then the gradients, then
// the weights of the course model over a data-parallel group, gathering each unit when needed.
#include "11_3_zero/zero.hpp"

#include "11_3_zero/checks.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace mgpu::zero {

namespace {

void require_length(const char* where, const char* what, std::size_t got, std::size_t want) {
  if (got != want)
    throw std::invalid_argument(std::string(where) + ": " + what + " has " + std::to_string(got) +
                                " elements, expected " + std::to_string(want) + "; pass exactly the unit's part");
}

// Adam on this rank's owned range of every unit of the full weights (stages 1 and 2), reading the
// gradient shard `grad_shard` and the moments in shard layout.
void step_owned_ranges(Comm& dp, const model::Model& model, ZeroState& state, std::span<const float> grad_shard) {
  ++state.steps;
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const OwnedRange own = owned_range(state.layout, u, dp.rank(), info.count);
    const std::size_t at = state.layout.unit_offset[static_cast<std::size_t>(u)];
    model::adam_step(state.weights.span().subspan(info.offset + own.first, own.size()),
                     grad_shard.subspan(at, own.size()), state.adam_m.span().subspan(at, own.size()),
                     state.adam_v.span().subspan(at, own.size()), state.steps, state.adam);
  }
}

// All-gathers every unit's updated owned range back into the full weights (stages 1 and 2).
void gather_full(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state) {
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const OwnedRange own = owned_range(state.layout, u, dp.rank(), info.count);
    Gathered g = gather_unit(dp, rank.memory(), model, state.layout, u,
                             state.weights.span().subspan(info.offset + own.first, own.size()));
    g.done.wait();
    std::copy_n(g.full.begin(), info.count, state.weights.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
}

}  // namespace

ShardLayout plan_shards(const model::Model& model, int ranks) {
  if (ranks < 1)
    throw std::invalid_argument("plan_shards: ranks = " + std::to_string(ranks) +
                                " is not a group size; use 1 or more ranks");
  ShardLayout layout;
  layout.ranks = ranks;
  const auto n = static_cast<std::size_t>(ranks);
  for (const model::UnitInfo& info : model.units()) {
    const std::size_t s = (info.count + n - 1) / n;
    layout.unit_offset.push_back(layout.shard_size);
    layout.unit_shard.push_back(s);
    layout.shard_size += s;
  }
  return layout;
}

ZeroState make_zero_state(Rank& rank, Comm& dp, const model::Model& model, int stage, std::uint64_t seed,
                          const model::AdamConfig& adam) {
  check_stage("make_zero_state", stage);
  MemoryLedger& ledger = rank.memory();
  ZeroState state;
  state.stage = stage;
  state.layout = plan_shards(model, dp.size());
  state.adam = adam;
  const std::size_t p = model.num_params();
  const std::size_t s = state.layout.shard_size;
  if (stage < 3) {
    state.weights = Buffer<float>(ledger, Category::weights, p, "zero.weights");
    model.init_params(state.weights.span(), seed);
  } else {
    Buffer<float> all(ledger, Category::comm, p, "zero.init");
    model.init_params(all.span(), seed);
    state.weights = Buffer<float>(ledger, Category::weights, s, "zero.weights_shard");
    for (int u = 0; u < model.num_units(); ++u) {
      const model::UnitInfo& info = model.unit(u);
      const OwnedRange own = owned_range(state.layout, u, dp.rank(), info.count);
      std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(info.offset + own.first), own.size(),
                  state.weights.begin() + static_cast<std::ptrdiff_t>(state.layout.unit_offset[static_cast<std::size_t>(u)]));
    }
  }
  state.grads = Buffer<float>(ledger, Category::grads, stage < 2 ? p : s, "zero.grads");
  const std::size_t moments = stage == 0 ? p : s;
  state.adam_m = Buffer<float>(ledger, Category::optimizer, moments, "zero.adam_m");
  state.adam_v = Buffer<float>(ledger, Category::optimizer, moments, "zero.adam_v");
  return state;
}

Gathered gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model, const ShardLayout& layout, int u,
                     std::span<const float> owned) {
  const model::UnitInfo& info = model.unit(u);
  const OwnedRange own = owned_range(layout, u, dp.rank(), info.count);
  require_length("gather_unit", "owned", owned.size(), own.size());
  const std::size_t s = layout.unit_shard[static_cast<std::size_t>(u)];
  Gathered g;
  g.full = Buffer<float>(ledger, Category::comm, s * static_cast<std::size_t>(dp.size()), "zero.gather " + info.name);
  const std::span<float> slot = g.full.span().subspan(static_cast<std::size_t>(dp.rank()) * s, s);
  std::copy(owned.begin(), owned.end(), slot.begin());
  g.done = dp.iall_gather(slot, g.full.span());
  return g;
}

void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model, const ShardLayout& layout, int u,
                         std::span<const float> unit_grads, std::span<float> shard_grads) {
  const model::UnitInfo& info = model.unit(u);
  const std::size_t s = layout.unit_shard[static_cast<std::size_t>(u)];
  require_length("reduce_scatter_unit", "unit_grads", unit_grads.size(), info.count);
  require_length("reduce_scatter_unit", "shard_grads", shard_grads.size(), s);
  Buffer<float> padded(ledger, Category::comm, s * static_cast<std::size_t>(dp.size()), "zero.rs " + info.name);
  std::copy(unit_grads.begin(), unit_grads.end(), padded.begin());
  dp.reduce_scatter(padded, shard_grads, ReduceOp::avg);
}

model::Batch zero_local_batch(const model::Batch& global, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks || global.sequences % ranks != 0)
    throw std::invalid_argument("zero_local_batch: a batch of " + std::to_string(global.sequences) +
                                " sequences does not split into " + std::to_string(ranks) +
                                " equal slices (rank " + std::to_string(rank) +
                                "); pick a batch size divisible by the rank count");
  // Equal slices: the mean of the slice losses is then the batch's mean loss.
  const std::int64_t per_rank = global.sequences / ranks;
  return global.slice(rank * per_rank, per_rank);
}

double zero_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state, const model::Batch& global,
                 bool prefetch) {
  check_stage("zero_step", state.stage);
  if (state.stage == 3) return fsdp_step(rank, dp, model, state, global, prefetch);
  const model::Batch local = zero_local_batch(global, dp.rank(), dp.size());
  const ShardLayout& layout = state.layout;
  double loss = 0;
  if (state.stage < 2) {
    model::zero(state.grads.span());
    loss = model.forward_backward(rank, state.weights.span(), state.grads.span(), local);
    if (state.stage == 0) {
      dp.all_reduce(state.grads.span(), ReduceOp::avg);
      model::adam_step(state.weights.span(), state.grads.span(), state.adam_m.span(), state.adam_v.span(),
                       ++state.steps, state.adam);
      return loss;
    }
    Buffer<float> staging(rank.memory(), Category::comm, layout.shard_size, "zero.grad_shard");
    for (int u = 0; u < model.num_units(); ++u) {
      const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
      reduce_scatter_unit(dp, rank.memory(), model, layout, u, model.unit_view(state.grads.span(), u),
                          staging.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]));
    }
    step_owned_ranges(dp, model, state, staging.span());
  } else {
    // Stage 2: each unit's gradient exists only while its backward runs and its reduce-scatter.
    const std::int64_t tokens = local.tokens();
    std::vector<model::UnitCache> caches(static_cast<std::size_t>(model.num_units()));
    Buffer<float> x = model.input(rank, local);
    for (int u = 0; u < model.num_units(); ++u)
      x = model.unit_forward(rank, u, model.unit_view(state.weights.span(), u), std::move(x), tokens,
                             &caches[static_cast<std::size_t>(u)]);
    Buffer<float> d(rank.memory(), Category::activations, x.size(), "zero.dloss");
    loss = model.loss_backward(x.span(), local, d.span());
    x.reset();
    for (int u = model.num_units() - 1; u >= 0; --u) {
      Buffer<float> unit_grads(rank.memory(), Category::comm, model.unit(u).count, "zero.unit_grads");
      d = model.unit_backward(rank, u, model.unit_view(state.weights.span(), u), unit_grads.span(),
                              caches[static_cast<std::size_t>(u)], d.span());
      const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
      reduce_scatter_unit(dp, rank.memory(), model, layout, u, unit_grads.span(),
                          state.grads.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]));
    }
    step_owned_ranges(dp, model, state, state.grads.span());
  }
  gather_full(rank, dp, model, state);
  return loss;
}

double fsdp_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state, const model::Batch& global,
                 bool prefetch) {
  if (state.stage != 3)
    throw std::invalid_argument("fsdp_step: state.stage = " + std::to_string(state.stage) +
                                " holds full weights; build the state with stage 3 or call zero_step");
  const model::Batch local = zero_local_batch(global, dp.rank(), dp.size());
  const ShardLayout& layout = state.layout;
  const int units = model.num_units();
  const std::int64_t tokens = local.tokens();
  auto fetch = [&](int u) {
    const OwnedRange own = owned_range(layout, u, dp.rank(), model.unit(u).count);
    return gather_unit(dp, rank.memory(), model, layout, u,
                       state.weights.span().subspan(layout.unit_offset[static_cast<std::size_t>(u)], own.size()));
  };
  auto params_of = [&](Gathered& g, int u) {
    return std::span<const float>(g.full.span().first(model.unit(u).count));
  };
  model::zero(state.grads.span());
  std::vector<model::UnitCache> caches(static_cast<std::size_t>(units));

  // Forward: gather, use, release. With prefetch the next unit's gather is posted first.
  Buffer<float> x = model.input(rank, local);
  Gathered current = fetch(0);
  for (int u = 0; u < units; ++u) {
    Gathered next;
    if (prefetch && u + 1 < units) next = fetch(u + 1);
    current.done.wait();
    x = model.unit_forward(rank, u, params_of(current, u), std::move(x), tokens, &caches[static_cast<std::size_t>(u)]);
    current.full.reset();
    if (u + 1 < units) current = prefetch ? std::move(next) : fetch(u + 1);
  }
  Buffer<float> d(rank.memory(), Category::activations, x.size(), "zero.dloss");
  const double loss = model.loss_backward(x.span(), local, d.span());
  x.reset();

  // Backward: gather again, compute the unit's gradient, release, reduce-scatter into the shard.
  current = fetch(units - 1);
  for (int u = units - 1; u >= 0; --u) {
    Gathered next;
    if (prefetch && u > 0) next = fetch(u - 1);
    current.done.wait();
    Buffer<float> unit_grads(rank.memory(), Category::comm, model.unit(u).count, "zero.unit_grads");
    d = model.unit_backward(rank, u, params_of(current, u), unit_grads.span(), caches[static_cast<std::size_t>(u)],
                            d.span());
    current.full.reset();
    const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
    reduce_scatter_unit(dp, rank.memory(), model, layout, u, unit_grads.span(),
                        state.grads.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]));
    if (u > 0) current = prefetch ? std::move(next) : fetch(u - 1);
  }
  model::adam_step(state.weights.span(), state.grads.span(), state.adam_m.span(), state.adam_v.span(),
                   ++state.steps, state.adam);
  return loss;
}

std::vector<float> full_weights(Rank& rank, Comm& dp, const model::Model& model, const ZeroState& state) {
  if (state.stage < 3) return {state.weights.begin(), state.weights.end()};
  std::vector<float> out(model.num_params());
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const OwnedRange own = owned_range(state.layout, u, dp.rank(), info.count);
    Gathered g = gather_unit(dp, rank.memory(), model, state.layout, u,
                             state.weights.span().subspan(state.layout.unit_offset[static_cast<std::size_t>(u)],
                                                          own.size()));
    g.done.wait();
    std::copy_n(g.full.begin(), info.count, out.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
  return out;
}

}  // namespace mgpu::zero
