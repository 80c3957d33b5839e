// What 11.4's tensor-parallel cases share between tensor_parallel.host.cpp (which draws the inputs
// and runs the clusters) and tensor_parallel.cpp (the rank bodies, and the plain shards case): the
// grid of shapes both walk, and what each rank is given. A rank gets the parts of a layer its
// contract gives it: its own shard of a split weight and of a split gradient, and only the tensors
// the contract makes whole on every rank (x of a column-parallel layer or a block, dy of a
// row-parallel layer or a block, the bias) or the seed every rank builds its shard from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"
#include "rank_code.hpp"

namespace mgpu::grade::tp_cases {

using mgpu::tensor_parallel::MatrixRM;

// n tokens, width h, inner width f (a multiple of t), and the group size t.
struct Shape {
  Eigen::Index n, h, f;
  int t;
};

// The grid every linear and FFN case runs: t = 1 (no communication at all), then t = 2, 3, 4
// where the all-reduced (n, h) holds 12, 35 and 12 values, so that a t which does not divide
// the length is always there; then one point drawn from the seed.
inline std::vector<Shape> grid(Ctx& ctx) {
  std::vector<Shape> g = {{3, 5, 4, 1}, {4, 3, 6, 2}, {5, 7, 9, 3}, {2, 6, 8, 4}};
  // Drawn again when it repeats a fixed point: values are named by their point (label).
  Shape d;
  do {
    const int t = ctx.pick({1, 2, 3, 4});
    const Eigen::Index n = ctx.uniform_int(1, 9), h = ctx.uniform_int(2, 11);
    d = {n, h, t * ctx.uniform_int(1, 6), t};
  } while (std::any_of(g.begin(), g.end(), [&](const Shape& s) {
    return s.n == d.n && s.h == d.h && s.f == d.f && s.t == d.t;
  }));
  g.push_back(d);
  return g;
}

// Prefix naming a grid point in every value it emits, so feedback says where a value went wrong.
inline std::string label(const Shape& s) {
  return "t" + std::to_string(s.t) + "_n" + std::to_string(s.n) + "_h" + std::to_string(s.h) +
         "_f" + std::to_string(s.f) + ".";
}

inline MatrixRM matrix(Ctx& ctx, Eigen::Index rows, Eigen::Index cols) {
  return ctx.normal_matrix(rows, cols).cast<float>();
}

// A column-parallel layer's rank: the whole x (n, h), its columns of W (h, f/t), cut by the host
// and not by column_shard (graded apart), and its columns of dy (n, f/t).
struct ColumnLinearInput {
  MatrixRM x, w_shard, dy_shard;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ColumnLinearInput, x, w_shard, dy_shard)

// A row-parallel layer's rank: its columns of x (n, f/t), its rows of W (f/t, h), and the bias
// (h) and dy (n, h), whole on every rank.
struct RowLinearInput {
  MatrixRM x_shard, w_shard, dy;
  Eigen::RowVectorXf bias;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RowLinearInput, x_shard, w_shard, dy, bias)

// A tp FFN's rank: the shape and the seed its shard is made from (make_tp_ffn), and x and dy
// (n, h), whole on every rank.
struct FfnInput {
  std::int64_t hidden = 0, ffn_hidden = 0;
  std::uint64_t seed = 0;
  MatrixRM x, dy;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FfnInput, hidden, ffn_hidden, seed, x, dy)

// A tp attention's rank: the shape and the seed its heads are made from (make_tp_attention), and
// x and dy (n, h), whole on every rank, seq tokens per sequence.
struct AttentionInput {
  std::int64_t hidden = 0, heads = 0, seq = 0;
  std::uint64_t seed = 0;
  bool causal = true;
  MatrixRM x, dy;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AttentionInput, hidden, heads, seq, seed, causal, x, dy)

// The sizes a rejects case builds a layer of (no data: the shapes are what is wrong).
struct FfnSizes {
  std::int64_t hidden = 0, ffn_hidden = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FfnSizes, hidden, ffn_hidden)

struct HeadSizes {
  std::int64_t hidden = 0, heads = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HeadSizes, hidden, heads)

}  // namespace mgpu::grade::tp_cases
