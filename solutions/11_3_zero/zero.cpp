// 11.3 ZeRO stages 1-3 (reference solution): shard the optimizer state, then the gradients, then
// the weights of the course model over a data-parallel group, gathering each unit when needed.
#include "11_3_zero/zero.hpp"

#include "11_3_zero/checks.hpp"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>

namespace mgpu::zero {

namespace {

void require_length(const char* where, const char* what, std::size_t got, std::size_t want) {
  if (got != want)
    throw std::invalid_argument(std::string(where) + ": " + what + " has " + std::to_string(got) +
                                " elements, expected " + std::to_string(want) +
                                "; pass exactly the unit's part");
}

// Adam on this rank's owned range of every unit of the full weights (stages 1 and 2), reading the
// gradient shard `grad_shard` and the moments in shard layout.
void step_owned_ranges(Comm& dp, const model::Model& model, ZeroState& state,
                       std::span<const float> grad_shard) {
  ++state.steps;
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const Chunk own = owned_range(state.layout, u, dp.rank(), info.count);
    const std::size_t at = state.layout.unit_offset[static_cast<std::size_t>(u)];
    model::adam_step(state.weights.span().subspan(info.offset + own.offset, own.count),
                     grad_shard.subspan(at, own.count), state.adam_m.span().subspan(at, own.count),
                     state.adam_v.span().subspan(at, own.count), state.steps, state.adam);
  }
}

// All-gathers every unit's updated owned range back into the full weights (stages 1 and 2).
void gather_full(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state) {
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const Chunk own = owned_range(state.layout, u, dp.rank(), info.count);
    Gathered g = gather_unit(dp, rank.memory(), model, state.layout, u,
                             state.weights.span().subspan(info.offset + own.offset, own.count));
    g.done.wait();
    std::copy_n(g.full.begin(), info.count,
                state.weights.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
}

// The gather and reduce-scatter of one unit are the same for fp32 and bf16 elements; only the
// bytes on the wire differ.
template <class T>
BasicGathered<T> gather_any(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                            const ShardLayout& layout, int u, std::span<const T> owned) {
  const model::UnitInfo& info = model.unit(u);
  const Chunk own = owned_range(layout, u, dp.rank(), info.count);
  require_length("gather_unit", "owned", owned.size(), own.count);
  const std::size_t s = layout.unit_shard[static_cast<std::size_t>(u)];
  BasicGathered<T> g;
  g.full = Buffer<T>(ledger, Category::comm, s * static_cast<std::size_t>(dp.size()),
                     "zero.gather " + info.name);
  const std::span<T> slot = g.full.span().subspan(static_cast<std::size_t>(dp.rank()) * s, s);
  std::copy(owned.begin(), owned.end(), slot.begin());
  g.done = dp.iall_gather(slot, g.full.span());
  return g;
}

template <class T>
BasicReducing<T> start_reduce_any(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                  const ShardLayout& layout, int u, std::span<const T> unit_grads,
                                  std::span<T> shard_grads) {
  const model::UnitInfo& info = model.unit(u);
  const std::size_t s = layout.unit_shard[static_cast<std::size_t>(u)];
  require_length("reduce_scatter_unit", "unit_grads", unit_grads.size(), info.count);
  require_length("reduce_scatter_unit", "shard_grads", shard_grads.size(), s);
  BasicReducing<T> r;
  r.padded = Buffer<T>(ledger, Category::comm, s * static_cast<std::size_t>(dp.size()),
                       "zero.rs " + info.name);
  std::copy(unit_grads.begin(), unit_grads.end(), r.padded.begin());
  r.done = dp.ireduce_scatter(r.padded, shard_grads, ReduceOp::avg);
  return r;
}

template <class T>
void reduce_scatter_any(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                        const ShardLayout& layout, int u, std::span<const T> unit_grads,
                        std::span<T> shard_grads) {
  start_reduce_any(dp, ledger, model, layout, u, unit_grads, shard_grads).done.wait();
}

// The overlapped stage-2 reduce-scatters of one step, oldest first.
template <class T>
using InFlight = std::deque<BasicReducing<T>>;

// Waits the oldest pending reduce-scatter and releases its staging copy.
template <class T>
void retire_oldest(InFlight<T>& in_flight) {
  in_flight.front().done.wait();
  in_flight.pop_front();
}

// Posts unit u's reduce-scatter without waiting it. Room is made first, so at most
// kMaxReduceScattersInFlight staging copies are ever alive, never one per unit.
template <class T>
void post_reduce_scatter(InFlight<T>& in_flight, Comm& dp, MemoryLedger& ledger,
                         const model::Model& model, const ShardLayout& layout, int u,
                         std::span<const T> unit_grads, std::span<T> shard) {
  if (in_flight.size() == kMaxReduceScattersInFlight) retire_oldest(in_flight);
  in_flight.push_back(start_reduce_any(dp, ledger, model, layout, u, unit_grads, shard));
}

// Every shard is reduced once this returns: Adam may read them.
template <class T>
void finish_reduce_scatters(InFlight<T>& in_flight) {
  while (!in_flight.empty()) retire_oldest(in_flight);
}

// The second table of ZeroState: bf16 weights16 and grads16, fp32 master and moments. The master
// starts from the fp32 initial parameters, not from their bf16 rounding.
ZeroState make_mixed_state(Rank& rank, Comm& dp, const model::Model& model, int stage,
                           std::uint64_t seed, const model::AdamConfig& adam) {
  MemoryLedger& ledger = rank.memory();
  ZeroState state;
  state.stage = stage;
  state.precision = Precision::bf16_mixed;
  state.layout = plan_shards(model, dp.size());
  state.adam = adam;
  const std::size_t p = model.num_params();
  const std::size_t s = state.layout.shard_size;
  Buffer<float> all(ledger, Category::comm, p, "zero.init");
  model.init_params(all.span(), seed);
  state.weights16 = Buffer<bf16>(ledger, Category::weights, stage < 3 ? p : s, "zero.weights16");
  state.master = Buffer<float>(ledger, Category::master, stage == 0 ? p : s, "zero.master");
  if (stage == 0) {
    std::copy(all.begin(), all.end(), state.master.begin());
  } else {
    for (int u = 0; u < model.num_units(); ++u) {
      const model::UnitInfo& info = model.unit(u);
      const Chunk own = owned_range(state.layout, u, dp.rank(), info.count);
      const std::size_t at = state.layout.unit_offset[static_cast<std::size_t>(u)];
      std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(info.offset + own.offset), own.count,
                  state.master.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  model::to_bf16(stage < 3 ? std::span<const float>(all.span()) : state.master.span(),
                 state.weights16.span());
  state.grads16 = Buffer<bf16>(ledger, Category::grads, stage < 2 ? p : s, "zero.grads16");
  const std::size_t moments = stage == 0 ? p : s;
  state.adam_m = Buffer<float>(ledger, Category::optimizer, moments, "zero.adam_m");
  state.adam_v = Buffer<float>(ledger, Category::optimizer, moments, "zero.adam_v");
  return state;
}

// full_weights of a mixed state: weights16 (gathered at stage 3), widened exactly to fp32.
std::vector<float> full_weights_mixed(Rank& rank, Comm& dp, const model::Model& model,
                                      const ZeroState& state) {
  std::vector<float> out(model.num_params());
  if (state.stage < 3) {
    model::to_float(state.weights16.span(), out);
    return out;
  }
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const Chunk own = owned_range(state.layout, u, dp.rank(), info.count);
    Gathered16 g =
        gather_unit(dp, rank.memory(), model, state.layout, u,
                    state.weights16.span().subspan(
                        state.layout.unit_offset[static_cast<std::size_t>(u)], own.count));
    g.done.wait();
    model::to_float(g.full.span().first(info.count),
                    std::span<float>(out).subspan(info.offset, info.count));
  }
  return out;
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

ZeroState make_zero_state(Rank& rank, Comm& dp, const model::Model& model, int stage,
                          std::uint64_t seed, const model::AdamConfig& adam, Precision precision) {
  check_stage("make_zero_state", stage);
  if (precision == Precision::bf16_mixed)
    return make_mixed_state(rank, dp, model, stage, seed, adam);
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
      const Chunk own = owned_range(state.layout, u, dp.rank(), info.count);
      std::copy_n(
          all.begin() + static_cast<std::ptrdiff_t>(info.offset + own.offset), own.count,
          state.weights.begin() +
              static_cast<std::ptrdiff_t>(state.layout.unit_offset[static_cast<std::size_t>(u)]));
    }
  }
  state.grads = Buffer<float>(ledger, Category::grads, stage < 2 ? p : s, "zero.grads");
  const std::size_t moments = stage == 0 ? p : s;
  state.adam_m = Buffer<float>(ledger, Category::optimizer, moments, "zero.adam_m");
  state.adam_v = Buffer<float>(ledger, Category::optimizer, moments, "zero.adam_v");
  return state;
}

Gathered gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                     const ShardLayout& layout, int u, std::span<const float> owned) {
  return gather_any(dp, ledger, model, layout, u, owned);
}

Gathered16 gather_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                       const ShardLayout& layout, int u, std::span<const bf16> owned) {
  return gather_any(dp, ledger, model, layout, u, owned);
}

void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const float> unit_grads,
                         std::span<float> shard_grads) {
  reduce_scatter_any(dp, ledger, model, layout, u, unit_grads, shard_grads);
}

void reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                         const ShardLayout& layout, int u, std::span<const bf16> unit_grads,
                         std::span<bf16> shard_grads) {
  reduce_scatter_any(dp, ledger, model, layout, u, unit_grads, shard_grads);
}

Reducing start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                   const ShardLayout& layout, int u,
                                   std::span<const float> unit_grads,
                                   std::span<float> shard_grads) {
  return start_reduce_any(dp, ledger, model, layout, u, unit_grads, shard_grads);
}

Reducing16 start_reduce_scatter_unit(Comm& dp, MemoryLedger& ledger, const model::Model& model,
                                     const ShardLayout& layout, int u,
                                     std::span<const bf16> unit_grads,
                                     std::span<bf16> shard_grads) {
  return start_reduce_any(dp, ledger, model, layout, u, unit_grads, shard_grads);
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

double zero_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch, bool overlap) {
  check_stage("zero_step", state.stage);
  if (state.precision == Precision::bf16_mixed)
    return mixed_step(rank, dp, model, state, global, prefetch, overlap);
  if (state.stage == 3) return fsdp_step(rank, dp, model, state, global, prefetch);
  const model::Batch local = zero_local_batch(global, dp.rank(), dp.size());
  const ShardLayout& layout = state.layout;
  double loss = 0;
  if (state.stage < 2) {
    model::zero(state.grads.span());
    loss = model.forward_backward(rank, state.weights.span(), state.grads.span(), local);
    if (state.stage == 0) {
      dp.all_reduce(state.grads.span(), ReduceOp::avg);
      model::adam_step(state.weights.span(), state.grads.span(), state.adam_m.span(),
                       state.adam_v.span(), ++state.steps, state.adam);
      return loss;
    }
    Buffer<float> staging(rank.memory(), Category::comm, layout.shard_size, "zero.grad_shard");
    for (int u = 0; u < model.num_units(); ++u) {
      const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
      reduce_scatter_unit(
          dp, rank.memory(), model, layout, u, model.unit_view(state.grads.span(), u),
          staging.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]));
    }
    step_owned_ranges(dp, model, state, staging.span());
  } else {
    // Stage 2: each unit's gradient exists only while its backward runs and its reduce-scatter.
    const std::int64_t tokens = local.tokens();
    std::vector<model::UnitCache> caches(static_cast<std::size_t>(model.num_units()));
    Buffer<float> x = model.input(rank, local);
    for (int u = 0; u < model.num_units(); ++u)
      x = model.unit_forward(rank, u, model.unit_view(state.weights.span(), u), std::move(x),
                             tokens, &caches[static_cast<std::size_t>(u)]);
    Buffer<float> d(rank.memory(), Category::activations, x.size(), "zero.dloss");
    loss = model.loss_backward(x.span(), local, d.span());
    x.reset();
    // With overlap a unit's reduce-scatter travels on the comm stream while the units before it
    // compute their backward.
    InFlight<float> in_flight;
    for (int u = model.num_units() - 1; u >= 0; --u) {
      Buffer<float> unit_grads(rank.memory(), Category::comm, model.unit(u).count,
                               "zero.unit_grads");
      d = model.unit_backward(rank, u, model.unit_view(state.weights.span(), u), unit_grads.span(),
                              caches[static_cast<std::size_t>(u)], d.span());
      const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
      const std::span<float> shard =
          state.grads.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]);
      if (overlap)
        post_reduce_scatter(in_flight, dp, rank.memory(), model, layout, u,
                            std::span<const float>(unit_grads.span()), shard);
      else
        reduce_scatter_unit(dp, rank.memory(), model, layout, u, unit_grads.span(), shard);
    }
    finish_reduce_scatters(in_flight);
    step_owned_ranges(dp, model, state, state.grads.span());
  }
  gather_full(rank, dp, model, state);
  return loss;
}

double fsdp_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                 const model::Batch& global, bool prefetch) {
  if (state.stage != 3)
    throw std::invalid_argument(
        "fsdp_step: state.stage = " + std::to_string(state.stage) +
        " holds full weights; build the state with stage 3 or call zero_step");
  const model::Batch local = zero_local_batch(global, dp.rank(), dp.size());
  const ShardLayout& layout = state.layout;
  const int units = model.num_units();
  const std::int64_t tokens = local.tokens();
  auto fetch = [&](int u) {
    const Chunk own = owned_range(layout, u, dp.rank(), model.unit(u).count);
    return gather_unit(
        dp, rank.memory(), model, layout, u,
        state.weights.span().subspan(layout.unit_offset[static_cast<std::size_t>(u)], own.count));
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
    x = model.unit_forward(rank, u, params_of(current, u), std::move(x), tokens,
                           &caches[static_cast<std::size_t>(u)]);
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
    d = model.unit_backward(rank, u, params_of(current, u), unit_grads.span(),
                            caches[static_cast<std::size_t>(u)], d.span());
    current.full.reset();
    const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
    reduce_scatter_unit(
        dp, rank.memory(), model, layout, u, unit_grads.span(),
        state.grads.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]));
    if (u > 0) current = prefetch ? std::move(next) : fetch(u - 1);
  }
  model::adam_step(state.weights.span(), state.grads.span(), state.adam_m.span(),
                   state.adam_v.span(), ++state.steps, state.adam);
  return loss;
}

double mixed_step(Rank& rank, Comm& dp, const model::Model& model, ZeroState& state,
                  const model::Batch& global, bool prefetch, bool overlap) {
  check_stage("mixed_step", state.stage);
  if (state.precision != Precision::bf16_mixed)
    throw std::invalid_argument(
        "mixed_step: the state holds fp32 weights; build it with Precision::bf16_mixed "
        "or call zero_step");
  const model::Batch local = zero_local_batch(global, dp.rank(), dp.size());
  const ShardLayout& layout = state.layout;
  const int units = model.num_units();
  const int stage = state.stage;
  const std::int64_t tokens = local.tokens();
  MemoryLedger& ledger = rank.memory();
  auto shard_of = [&](int u) {
    const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
    return std::pair{at, owned_range(layout, u, dp.rank(), model.unit(u).count)};
  };
  // Stage 3 gathers a unit's bf16 weights; the others hold them in full already.
  auto fetch = [&](int u) {
    Gathered16 g;
    if (stage == 3) {
      const auto [at, own] = shard_of(u);
      const std::span<const bf16> owned = state.weights16.span().subspan(at, own.count);
      g = gather_unit(dp, ledger, model, layout, u, owned);
    }
    return g;
  };
  // The model computes in fp32: widen the unit's bf16 weights into a transient buffer.
  auto widen = [&](Gathered16& g, int u) {
    const std::size_t count = model.unit(u).count;
    Buffer<float> w(ledger, Category::comm, count, "zero.widened");
    if (stage == 3) {
      g.done.wait();
      model::to_float(g.full.span().first(count), w.span());
      g.full.reset();
    } else {
      model::to_float(model.unit_view(state.weights16.span(), u), w.span());
    }
    return w;
  };
  // No zeroing of grads16: every element is overwritten by a rounding or a reduce-scatter.
  std::vector<model::UnitCache> caches(static_cast<std::size_t>(units));

  Buffer<float> x = model.input(rank, local);
  Gathered16 current = fetch(0);
  for (int u = 0; u < units; ++u) {
    Gathered16 next;
    if (prefetch && u + 1 < units) next = fetch(u + 1);
    Buffer<float> w = widen(current, u);
    x = model.unit_forward(rank, u, w.span(), std::move(x), tokens,
                           &caches[static_cast<std::size_t>(u)]);
    w.reset();
    if (u + 1 < units) current = prefetch ? std::move(next) : fetch(u + 1);
  }
  Buffer<float> d(ledger, Category::activations, x.size(), "zero.dloss");
  const double loss = model.loss_backward(x.span(), local, d.span());
  x.reset();

  InFlight<bf16> in_flight;  // stage 2 with overlap: the posted, unwaited reduce-scatters
  current = fetch(units - 1);
  for (int u = units - 1; u >= 0; --u) {
    Gathered16 next;
    if (prefetch && u > 0) next = fetch(u - 1);
    Buffer<float> w = widen(current, u);
    Buffer<float> unit_grads(ledger, Category::comm, model.unit(u).count, "zero.unit_grads");
    d = model.unit_backward(rank, u, w.span(), unit_grads.span(),
                            caches[static_cast<std::size_t>(u)], d.span());
    w.reset();
    if (stage < 2) {
      model::to_bf16(unit_grads.span(), model.unit_view(state.grads16.span(), u));
    } else {
      Buffer<bf16> rounded(ledger, Category::comm, unit_grads.size(), "zero.unit_grads16");
      model::to_bf16(unit_grads.span(), rounded.span());
      unit_grads.reset();
      const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
      const std::span<bf16> shard =
          state.grads16.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]);
      if (overlap && stage == 2)
        post_reduce_scatter(in_flight, dp, ledger, model, layout, u,
                            std::span<const bf16>(rounded.span()), shard);
      else
        reduce_scatter_unit(dp, ledger, model, layout, u, std::span<const bf16>(rounded.span()),
                            shard);
    }
    if (u > 0) current = prefetch ? std::move(next) : fetch(u - 1);
  }
  finish_reduce_scatters(in_flight);

  // The reduced bf16 gradient of what this rank updates: grads16 itself, except at stage 1.
  Buffer<bf16> staging;
  std::span<const bf16> reduced = state.grads16.span();
  if (stage == 0) {
    dp.all_reduce(state.grads16.span(), ReduceOp::avg);
  } else if (stage == 1) {
    staging = Buffer<bf16>(ledger, Category::comm, layout.shard_size, "zero.grad_shard16");
    for (int u = 0; u < units; ++u) {
      const std::size_t at = layout.unit_offset[static_cast<std::size_t>(u)];
      reduce_scatter_unit(
          dp, ledger, model, layout, u,
          std::span<const bf16>(model.unit_view(state.grads16.span(), u)),
          staging.span().subspan(at, layout.unit_shard[static_cast<std::size_t>(u)]));
    }
    reduced = staging.span();
  }
  Buffer<float> grads(ledger, Category::comm, reduced.size(), "zero.grads_fp32");
  model::to_float(reduced, grads.span());
  staging.reset();
  ++state.steps;
  if (stage == 0 || stage == 3) {
    // Master, moments, gradient and bf16 weights share one layout: one step over all of it.
    model::adam_step_mixed(state.master.span(), grads.span(), state.adam_m.span(),
                           state.adam_v.span(), state.steps, state.adam, state.weights16.span());
    return loss;
  }
  // Stages 1 and 2: step the owned range of each unit, then share the updated bf16 weights.
  for (int u = 0; u < units; ++u) {
    const auto [at, own] = shard_of(u);
    model::adam_step_mixed(
        state.master.span().subspan(at, own.count), grads.span().subspan(at, own.count),
        state.adam_m.span().subspan(at, own.count), state.adam_v.span().subspan(at, own.count),
        state.steps, state.adam,
        state.weights16.span().subspan(model.unit(u).offset + own.offset, own.count));
  }
  grads.reset();
  for (int u = 0; u < units; ++u) {
    const model::UnitInfo& info = model.unit(u);
    const Chunk own = owned_range(layout, u, dp.rank(), info.count);
    const std::span<const bf16> owned =
        state.weights16.span().subspan(info.offset + own.offset, own.count);
    Gathered16 g = gather_unit(dp, ledger, model, layout, u, owned);
    g.done.wait();
    std::copy_n(g.full.begin(), info.count,
                state.weights16.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
  return loss;
}

std::vector<float> full_weights(Rank& rank, Comm& dp, const model::Model& model,
                                const ZeroState& state) {
  if (state.precision == Precision::bf16_mixed) return full_weights_mixed(rank, dp, model, state);
  if (state.stage < 3) return {state.weights.begin(), state.weights.end()};
  std::vector<float> out(model.num_params());
  for (int u = 0; u < model.num_units(); ++u) {
    const model::UnitInfo& info = model.unit(u);
    const Chunk own = owned_range(state.layout, u, dp.rank(), info.count);
    Gathered g = gather_unit(dp, rank.memory(), model, state.layout, u,
                             state.weights.span().subspan(
                                 state.layout.unit_offset[static_cast<std::size_t>(u)], own.count));
    g.done.wait();
    std::copy_n(g.full.begin(), info.count, out.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
  return out;
}

}  // namespace mgpu::zero
