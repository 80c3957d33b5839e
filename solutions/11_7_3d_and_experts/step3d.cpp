// 11.7 reference solution: the 3D-parallel training step, tensor-parallel blocks, the stage
// boundary sent in 1/tp slices, and ZeRO-1 over the replicas.
// Implements chapters/11_7_3d_and_experts/step3d.hpp.
#include "11_7_3d_and_experts/step3d.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/tensor.hpp"

namespace mgpu::layout {

namespace {

Buffer<float> activations(Rank& rank, std::size_t count, const std::string& label) {
  return Buffer<float>(rank.memory(), Category::activations, count, label);
}

// The sizes one rank's block works with.
struct BlockDims {
  std::size_t n, d, dl, fl, seq, heads;  // tokens, width, width/t, d_ff/t, seq_len, heads/t
  BlockDims(const model::ModelConfig& c, int t, std::int64_t tokens)
      : n(static_cast<std::size_t>(tokens)),
        d(static_cast<std::size_t>(c.d_model)),
        dl(d / static_cast<std::size_t>(t)),
        fl(static_cast<std::size_t>(c.d_ff) / static_cast<std::size_t>(t)),
        seq(static_cast<std::size_t>(c.seq_len)),
        heads(static_cast<std::size_t>(c.n_heads) / static_cast<std::size_t>(t)) {}
  std::size_t prob_rows() const { return n / seq * heads * seq; }
};

// The neighbour a boundary tensor goes to (sending) or comes from (receiving), as a pp rank.
int next_in(ProcessGrid& grid, Direction direction) {
  return grid.pp().rank() + (direction == Direction::forward ? 1 : -1);
}

std::size_t slice_of(ProcessGrid& grid, std::size_t elements) {
  const auto t = static_cast<std::size_t>(grid.tp().size());
  if (elements % t != 0) {
    throw std::invalid_argument("boundary of " + std::to_string(elements) +
                                " values does not split into tp = " + std::to_string(t) +
                                " equal slices; use micro-batches whose tokens tp divides");
  }
  return elements / t;
}

}  // namespace

Buffer<float> tp_block_forward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                               std::span<const float> unit_params, Buffer<float> x,
                               std::int64_t tokens, BlockCache3d& cache) {
  const model::ModelConfig& c = model.config();
  const BlockDims s(c, tp.size(), tokens);
  const auto w = block_slices(c, tp.size(), unit_params);
  const std::string& name = model.unit(unit).name;
  const auto X = as_matrix(std::span<const float>(x.span()), s.n, s.d);

  cache.q = activations(rank, s.n * s.dl, name + ".q");
  cache.k = activations(rank, s.n * s.dl, name + ".k");
  cache.v = activations(rank, s.n * s.dl, name + ".v");
  cache.o = activations(rank, s.n * s.dl, name + ".o");
  cache.p = activations(rank, s.prob_rows() * s.seq, name + ".p");
  Buffer<float> y = activations(rank, s.n * s.d, name + ".out");
  auto Y = as_matrix(y.span(), s.n, s.d);
  // This rank's heads give a partial sum of the attention output; the all-reduce completes it.
  model::attention_forward(
      X, c.seq_len, static_cast<std::int64_t>(s.heads), c.causal, w.wq, w.wk, w.wv, w.wo,
      as_matrix(cache.q.span(), s.n, s.dl), as_matrix(cache.k.span(), s.n, s.dl),
      as_matrix(cache.v.span(), s.n, s.dl), as_matrix(cache.p.span(), s.prob_rows(), s.seq),
      as_matrix(cache.o.span(), s.n, s.dl), Y);
  tp.all_reduce(y.span());
  cache.mid = activations(rank, s.n * s.d, name + ".mid");
  auto MID = as_matrix(cache.mid.span(), s.n, s.d);
  MID = X + Y;

  // The FFN's columns of W1 and rows of W2 give a partial sum of its output; b2 comes after.
  cache.h = activations(rank, s.n * s.fl, name + ".h");
  cache.a = activations(rank, s.n * s.fl, name + ".a");
  const Eigen::RowVectorXf no_bias;
  model::ffn_forward(MID, w.w1, w.b1.row(0), w.w2, no_bias, as_matrix(cache.h.span(), s.n, s.fl),
                     as_matrix(cache.a.span(), s.n, s.fl), Y);
  tp.all_reduce(y.span());
  Y += MID;
  Y.rowwise() += w.b2.row(0);

  rank.compute(model.unit_forward_flops(unit, tokens) / tp.size(), "fwd " + name);
  cache.x = std::move(x);
  return y;
}

Buffer<float> tp_block_backward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                                std::span<const float> unit_params, std::span<float> unit_grads,
                                BlockCache3d& cache, std::span<const float> dy) {
  const model::ModelConfig& c = model.config();
  if (cache.x.size() == 0) {
    throw std::logic_error("tp_block_backward: the cache of " + model.unit(unit).name +
                           " is empty; run tp_block_forward with it first");
  }
  const auto tokens = static_cast<std::int64_t>(cache.x.size()) / c.d_model;
  const BlockDims s(c, tp.size(), tokens);
  const auto w = block_slices(c, tp.size(), unit_params);
  auto g = block_slices(c, tp.size(), unit_grads);
  const std::string& name = model.unit(unit).name;
  const auto DY = as_matrix(dy, s.n, s.d);
  const auto MID = as_matrix(std::span<const float>(cache.mid.span()), s.n, s.d);

  // y = mid + FFN(mid) + b2: the residual passes dy through, this rank's FFN slices give a part
  // of dmid that the all-reduce completes. b2 is whole on every rank, so its gradient is too.
  Buffer<float> dmid = activations(rank, s.n * s.d, name + ".dmid");
  auto DMID = as_matrix(dmid.span(), s.n, s.d);
  Eigen::RowVectorXf no_bias;
  model::ffn_backward(MID, w.w1, w.w2, as_matrix(std::span<const float>(cache.h.span()), s.n, s.fl),
                      as_matrix(std::span<const float>(cache.a.span()), s.n, s.fl), DY, DMID, g.w1,
                      g.b1.row(0), g.w2, no_bias);
  g.b2.row(0) += DY.colwise().sum();
  tp.all_reduce(dmid.span());
  DMID += DY;

  // mid = x + attention(x): the same again for this rank's heads.
  Buffer<float> dx = activations(rank, s.n * s.d, name + ".dx");
  auto DX = as_matrix(dx.span(), s.n, s.d);
  const auto saved = [&](const Buffer<float>& b, std::size_t rows, std::size_t cols) {
    return as_matrix(std::span<const float>(b.span()), rows, cols);
  };
  model::attention_backward(saved(cache.x, s.n, s.d), c.seq_len, static_cast<std::int64_t>(s.heads),
                            w.wq, w.wk, w.wv, w.wo, saved(cache.q, s.n, s.dl),
                            saved(cache.k, s.n, s.dl), saved(cache.v, s.n, s.dl),
                            saved(cache.p, s.prob_rows(), s.seq), saved(cache.o, s.n, s.dl), DMID,
                            DX, g.wq, g.wk, g.wv, g.wo);
  tp.all_reduce(dx.span());
  DX += DMID;

  rank.compute(2.0 * model.unit_forward_flops(unit, tokens) / tp.size(), "bwd " + name);
  cache = BlockCache3d{};
  return dx;
}

void send_boundary(ProcessGrid& grid, Direction direction, std::span<const float> tensor, int tag) {
  const std::size_t slice = slice_of(grid, tensor.size());
  const auto mine = static_cast<std::size_t>(grid.tp().rank()) * slice;
  grid.pp().send(tensor.subspan(mine, slice), next_in(grid, direction), tag);
}

Buffer<float> receive_boundary(Rank& rank, ProcessGrid& grid, Direction direction,
                               std::size_t elements, int tag) {
  const std::size_t slice = slice_of(grid, elements);
  Buffer<float> whole = activations(rank, elements, "boundary");
  const auto mine = whole.span().subspan(static_cast<std::size_t>(grid.tp().rank()) * slice, slice);
  // The sender of a forward tensor is the previous stage, of a backward gradient the next.
  const int from = grid.pp().rank() + (direction == Direction::forward ? -1 : 1);
  grid.pp().recv(mine, from, tag);
  grid.tp().all_gather(mine, whole.span());
  return whole;
}

void zero1_update(Rank& rank, ProcessGrid& grid, State3d& state) {
  Comm& dp = grid.dp();
  const std::size_t shard = state.share.shard;
  const auto first = static_cast<std::size_t>(dp.rank()) * shard;
  Buffer<float> summed(rank.memory(), Category::comm, shard, "3d.grad_shard");
  dp.reduce_scatter(state.grads.span(), summed.span());
  const auto my_grads = state.grads.span().subspan(first, shard);
  std::copy(summed.begin(), summed.end(), my_grads.begin());
  const auto my_params = state.params.span().subspan(first, shard);
  state.adam.step(my_params, my_grads);
  dp.all_gather(my_params, state.params.span());
}

std::vector<std::pair<bool, int>> one_f_one_b_order(int stage, int stages, int micro_batches) {
  // Stage s first fills the pipeline below it: p - s - 1 forwards (capped at m) before the
  // first backward can return; then one forward and one backward alternate; then the drain.
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<std::pair<bool, int>> order;
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) order.emplace_back(true, forwards);
  for (; forwards < micro_batches; ++forwards, ++backwards) {
    order.emplace_back(true, forwards);
    order.emplace_back(false, backwards);
  }
  for (; backwards < micro_batches; ++backwards) order.emplace_back(false, backwards);
  return order;
}

std::optional<double> train_step_3d(Rank& rank, ProcessGrid& grid, const model::Model& model,
                                    State3d& state, const model::Batch& global, int micro_batches) {
  const Layout& layout = grid.layout();
  const Share& share = state.share;
  const model::ModelConfig& c = model.config();
  if (micro_batches < 1 || global.sequences % (layout.dp * micro_batches) != 0) {
    throw std::invalid_argument("train_step_3d: " + std::to_string(global.sequences) +
                                " sequences do not split into dp = " + std::to_string(layout.dp) +
                                " replicas of " + std::to_string(micro_batches) +
                                " equal micro-batches");
  }
  const std::int64_t per_replica = global.sequences / layout.dp;
  const std::int64_t per_micro = per_replica / micro_batches;
  const std::int64_t tokens = per_micro * c.seq_len;
  if (tokens % layout.tp != 0) {
    throw std::invalid_argument("train_step_3d: a micro-batch of " + std::to_string(tokens) +
                                " tokens does not split into tp = " + std::to_string(layout.tp) +
                                " equal slices at the stage boundary");
  }
  model::zero(state.grads.span());
  const model::Batch replica = global.slice(grid.coords().dp * per_replica, per_replica);
  const auto boundary = static_cast<std::size_t>(tokens * c.d_model);
  const float scale = 1.0f / static_cast<float>(micro_batches * layout.dp);
  const auto is_block = [&](int u) { return u != 0 && u != model.num_units() - 1; };
  const auto params = std::span<const float>(state.params.span());

  // What a micro-batch in flight keeps until its backward: each unit's cache, and on the last
  // stage the loss gradient.
  struct InFlight {
    std::vector<model::UnitCache> units;
    std::vector<BlockCache3d> blocks;
    Buffer<float> dout;
  };
  std::vector<InFlight> flight(static_cast<std::size_t>(micro_batches));
  std::vector<model::Batch> micro(static_cast<std::size_t>(micro_batches));
  double loss = 0.0;

  const auto forward = [&](int i) {
    InFlight& f = flight[static_cast<std::size_t>(i)];
    f.units.resize(static_cast<std::size_t>(share.units()));
    f.blocks.resize(static_cast<std::size_t>(share.units()));
    micro[static_cast<std::size_t>(i)] = replica.slice(i * per_micro, per_micro);
    const model::Batch& mb = micro[static_cast<std::size_t>(i)];
    Buffer<float> x = grid.is_first_stage()
                          ? model.input(rank, mb)
                          : receive_boundary(rank, grid, Direction::forward, boundary, i);
    for (int u = share.first_unit; u < share.end_unit; ++u) {
      const auto at = static_cast<std::size_t>(u - share.first_unit);
      const auto w = share.unit_view(params, u);
      x = is_block(u)
              ? tp_block_forward(rank, grid.tp(), model, u, w, std::move(x), tokens, f.blocks[at])
              : model.unit_forward(rank, u, w, std::move(x), tokens, &f.units[at]);
    }
    if (grid.is_last_stage()) {
      f.dout = activations(rank, x.size(), "dout");
      loss += model.loss_backward(x.span(), mb, f.dout.span(), scale);
    } else {
      send_boundary(grid, Direction::forward, x.span(), i);
    }
  };

  const auto backward = [&](int i) {
    InFlight& f = flight[static_cast<std::size_t>(i)];
    Buffer<float> dy = grid.is_last_stage()
                           ? std::move(f.dout)
                           : receive_boundary(rank, grid, Direction::backward, boundary, i);
    for (int u = share.end_unit - 1; u >= share.first_unit; --u) {
      const auto at = static_cast<std::size_t>(u - share.first_unit);
      const auto w = share.unit_view(params, u);
      const auto g = share.unit_view(state.grads.span(), u);
      dy = is_block(u) ? tp_block_backward(rank, grid.tp(), model, u, w, g, f.blocks[at], dy.span())
                       : model.unit_backward(rank, u, w, g, f.units[at], dy.span());
    }
    if (!grid.is_first_stage()) send_boundary(grid, Direction::backward, dy.span(), i);
    f = InFlight{};
  };

  for (const auto& [is_forward, i] : one_f_one_b_order(
           static_cast<int>(grid.coords().pp), static_cast<int>(layout.pp), micro_batches)) {
    if (is_forward) {
      forward(i);
    } else {
      backward(i);
    }
  }
  zero1_update(rank, grid, state);
  if (!grid.is_last_stage()) return std::nullopt;
  return loss / micro_batches;
}

}  // namespace mgpu::layout
