// 11.7 Given code for the 3D step: which slice of the course model each rank of a tp x pp x dp
// layout holds, and its training state under ZeRO-1. Nothing here communicates; step3d.hpp
// holds the parts to write.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "11_7_3d_and_experts/grid.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/memory.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/tensor.hpp"

namespace mgpu::layout {

/// How a tensor of the full model is cut across a tensor-parallel group of t ranks.
enum class Cut {
  whole,    ///< every tp rank holds all of it (embedding, head, the FFN's output bias)
  columns,  ///< rank i holds columns [i c/t, (i+1) c/t): W_Q, W_K, W_V (its heads), W_1, b_1
  rows,     ///< rank i holds rows [i r/t, (i+1) r/t): W_O and W_2, the row-parallel halves
};

/// One tensor of a rank's share of the model.
struct ShareTensor {
  int tensor = 0;          ///< index into Model::tensors()
  Cut cut = Cut::whole;    ///< how the tp group splits it
  std::int64_t rows = 0;   ///< rows of this rank's slice
  std::int64_t cols = 0;   ///< columns of this rank's slice
  std::size_t offset = 0;  ///< first element of the slice in the share's flat buffer
  /// rows * cols.
  [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(rows * cols); }
};

/// What one rank holds of the model: the units of its pipeline stage, each tensor cut for its
/// tp index, one after another in a flat buffer (unit order, and each unit's tensors in Model
/// order). Stage s holds blocks [s L/pp, (s+1) L/pp); stage 0 also the embedding, the last
/// stage also the head.
struct Share {
  int first_unit = 0;                   ///< first unit of the stage (Model unit index)
  int end_unit = 0;                     ///< one past its last unit
  std::vector<ShareTensor> tensors;     ///< every tensor held, in flat order
  std::vector<std::size_t> unit_begin;  ///< flat offset of each unit, then the end (units + 1)
  std::size_t count = 0;                ///< elements held
  std::size_t padded = 0;               ///< count rounded up to a multiple of dp (ZeRO-1 flat)
  std::size_t shard = 0;                ///< padded / dp: the elements one dp rank updates
  /// Number of units on the stage.
  [[nodiscard]] int units() const { return end_unit - first_unit; }
  /// The part of a share-long flat buffer that belongs to Model unit `unit` of this stage.
  template <class T>
  [[nodiscard]] std::span<T> unit_view(std::span<T> flat, int unit) const {
    const auto i = static_cast<std::size_t>(unit - first_unit);
    return flat.subspan(unit_begin.at(i), unit_begin.at(i + 1) - unit_begin.at(i));
  }
};

namespace detail {

inline void require_divides(const char* what, std::int64_t value, const char* by_name,
                            std::int64_t by) {
  if (value % by != 0) {
    throw std::invalid_argument(std::string("plan_share: ") + what + " = " + std::to_string(value) +
                                " is not divisible by " + by_name + " = " + std::to_string(by) +
                                "; pick sizes it divides");
  }
}

// A block's tensors in Model order (wq, wk, wv, wo, w1, b1, w2, b2) and how each is cut.
inline constexpr Cut kBlockCuts[] = {Cut::columns, Cut::columns, Cut::columns, Cut::rows,
                                     Cut::columns, Cut::columns, Cut::rows,    Cut::whole};

}  // namespace detail

/// Given: the share of the rank at `coords` in `layout` for `model`. The model must have
/// attention, and n_heads, d_ff (and so d_model) divisible by tp, n_layers by pp.
/// @throws std::invalid_argument naming the first of those that fails.
inline Share plan_share(const model::Model& model, const Layout& layout, const RankCoords& coords) {
  const model::ModelConfig& c = model.config();
  if (!c.attention) {
    throw std::invalid_argument(
        "plan_share: the 3D step needs blocks with attention "
        "(ModelConfig::attention = true)");
  }
  detail::require_divides("n_heads", c.n_heads, "tp", layout.tp);
  detail::require_divides("d_ff", c.d_ff, "tp", layout.tp);
  detail::require_divides("n_layers", c.n_layers, "pp", layout.pp);
  const auto per_stage = static_cast<int>(c.n_layers / layout.pp);
  const auto stage = static_cast<int>(coords.pp);
  Share s;
  s.first_unit = stage == 0 ? 0 : 1 + stage * per_stage;
  s.end_unit = stage == layout.pp - 1 ? model.num_units() : 1 + (stage + 1) * per_stage;
  const auto& tensors = model.tensors();
  for (int u = s.first_unit; u < s.end_unit; ++u) {
    s.unit_begin.push_back(s.count);
    const bool block = u != 0 && u != model.num_units() - 1;
    int within = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].unit != u) continue;
      ShareTensor t{static_cast<int>(i), block ? detail::kBlockCuts[within++] : Cut::whole,
                    tensors[i].rows, tensors[i].cols, s.count};
      if (t.cut == Cut::columns) t.cols /= layout.tp;
      if (t.cut == Cut::rows) t.rows /= layout.tp;
      s.count += t.size();
      s.tensors.push_back(t);
    }
  }
  s.unit_begin.push_back(s.count);
  const auto dp = static_cast<std::size_t>(layout.dp);
  s.shard = (s.count + dp - 1) / dp;
  s.padded = s.shard * dp;
  return s;
}

/// Given: copies this rank's slices of `full` (a whole-model flat buffer, Model layout) into
/// `local` (share.padded long; the padding is set to 0). Used to initialise a share and, in
/// tests, to cut a one-rank gradient the way a rank holds it.
/// @throws std::invalid_argument when a buffer has the wrong length.
inline void cut_share(const model::Model& model, const Share& share, const RankCoords& coords,
                      std::span<const float> full, std::span<float> local) {
  if (full.size() != model.num_params() || local.size() != share.padded) {
    throw std::invalid_argument("cut_share: full holds " + std::to_string(full.size()) +
                                " values (model: " + std::to_string(model.num_params()) +
                                "), local " + std::to_string(local.size()) +
                                " (share: " + std::to_string(share.padded) + ")");
  }
  std::fill(local.begin(), local.end(), 0.0f);
  for (const ShareTensor& t : share.tensors) {
    const model::TensorInfo& info = model.tensors()[static_cast<std::size_t>(t.tensor)];
    const auto whole = as_matrix(full, static_cast<std::size_t>(info.rows),
                                 static_cast<std::size_t>(info.cols), info.offset);
    auto mine = as_matrix(local, static_cast<std::size_t>(t.rows), static_cast<std::size_t>(t.cols),
                          t.offset);
    const auto r0 = t.cut == Cut::rows ? coords.tp * t.rows : 0;
    const auto c0 = t.cut == Cut::columns ? coords.tp * t.cols : 0;
    mine = whole.block(r0, c0, t.rows, t.cols);
  }
}

/// Named views of one block unit's slices in a share's flat buffer (parameters or gradients).
/// With d = d_model, f = d_ff and t = tp: wq, wk, wv (d, d/t), wo (d/t, d), w1 (d, f/t),
/// b1 (1, f/t), w2 (f/t, d), b2 (1, d). Use .row(0) of a bias where a row vector is wanted.
template <class T>
struct BlockSlices {
  using Map = decltype(as_matrix(std::span<T>(), 0, 0));  ///< MatrixMap or ConstMatrixMap
  Map wq;  ///< (d, d/t) this rank's query columns (its heads)
  Map wk;  ///< (d, d/t) key columns
  Map wv;  ///< (d, d/t) value columns
  Map wo;  ///< (d/t, d) output-projection rows of its heads
  Map w1;  ///< (d, f/t) FFN input columns
  Map b1;  ///< (1, f/t) their bias
  Map w2;  ///< (f/t, d) FFN output rows
  Map b2;  ///< (1, d) the output bias, whole on every tp rank
};

/// Given: the slices of one block unit, `unit` being the unit's range of a share's flat buffer
/// (Share::unit_view).
/// @throws std::invalid_argument when `unit` is not a block's share for this config and tp.
template <class T>
BlockSlices<T> block_slices(const model::ModelConfig& config, std::int64_t tp, std::span<T> unit) {
  const auto d = static_cast<std::size_t>(config.d_model);
  const auto f = static_cast<std::size_t>(config.d_ff);
  const auto dl = d / static_cast<std::size_t>(tp), fl = f / static_cast<std::size_t>(tp);
  const std::size_t want = 4 * d * dl + d * fl + fl + fl * d + d;
  if (unit.size() != want) {
    throw std::invalid_argument("block_slices: a block's share holds " + std::to_string(want) +
                                " values at tp = " + std::to_string(tp) + ", got " +
                                std::to_string(unit.size()));
  }
  std::size_t at = 0;
  const auto next = [&](std::size_t rows, std::size_t cols) {
    auto m = as_matrix(unit, rows, cols, at);
    at += rows * cols;
    return m;
  };
  // Braced initialisers run left to right, which is the flat order.
  return BlockSlices<T>{next(d, dl), next(d, dl), next(d, dl), next(dl, d),
                        next(d, fl), next(1, fl), next(fl, d), next(1, d)};
}

/// One rank's training state under ZeRO-1 over the dp group.
struct State3d {
  Share share;           ///< what this rank holds
  Buffer<float> params;  ///< Category::weights, share.padded elements (the tail is padding)
  /// Category::grads, share.padded elements. After train_step_3d, elements
  /// [dp_rank * shard, (dp_rank + 1) * shard) hold the gradient of the global batch (summed
  /// over the replicas); the rest holds this replica's own part.
  Buffer<float> grads;
  model::Adam adam;  ///< Category::optimizer: Adam's two moments for share.shard elements only
};

/// Given: every rank draws the whole model from `seed` (Model::init_params, no communication)
/// and keeps its share; gradients start at zero.
inline State3d make_state_3d(Rank& rank, const ProcessGrid& grid, const model::Model& model,
                             std::uint64_t seed, const model::AdamConfig& adam = {}) {
  Share share = plan_share(model, grid.layout(), grid.coords());
  std::vector<float> full(model.num_params());
  model.init_params(full, seed);
  Buffer<float> params(rank.memory(), Category::weights, share.padded, "3d.params");
  cut_share(model, share, grid.coords(), full, params.span());
  Buffer<float> grads(rank.memory(), Category::grads, share.padded, "3d.grads");
  model::Adam optimizer(rank.memory(), share.shard, adam);
  return State3d{std::move(share), std::move(params), std::move(grads), std::move(optimizer)};
}

}  // namespace mgpu::layout
