// 11.4 given code: what every rank and every test needs besides the exercise. The unsplit weights
// drawn from a seed (so the shards and the one-rank reference come from the same numbers), a flat
// span over a matrix for the collectives, a rank's token rows under sequence parallelism, and the
// layer norm's parameters. Read tensor_parallel.hpp for the functions you write.
#pragma once

#include "11_4_tensor_parallel/checks.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

namespace mgpu::tensor_parallel {

using model::MatIn;
using model::MatOut;
using model::MatrixRM;

// ------------------------------------------------------------------------------ unsplit weights

/// The unsplit FFN weights every rank (and every test) draws from one seed.
struct FullFfn {
  MatrixRM w1;  ///< (hidden, ffn_hidden)
  MatrixRM w2;  ///< (ffn_hidden, hidden)
};

/// FullFfn with entries normal(0, 1/sqrt(fan_in)) from model::Rng(seed): W1 first, then W2,
/// row-major.
/// @throws std::invalid_argument when hidden or ffn_hidden is below 1.
inline FullFfn full_ffn_weights(std::int64_t hidden, std::int64_t ffn_hidden, std::uint64_t seed) {
  args::check_count("full_ffn_weights", "hidden", hidden);
  args::check_count("full_ffn_weights", "ffn_hidden", ffn_hidden);
  FullFfn f{MatrixRM(hidden, ffn_hidden), MatrixRM(ffn_hidden, hidden)};
  model::Rng rng(seed);
  rng.fill_normal(std::span<float>(f.w1.data(), static_cast<std::size_t>(f.w1.size())),
                  1.0 / std::sqrt(static_cast<double>(hidden)));
  rng.fill_normal(std::span<float>(f.w2.data(), static_cast<std::size_t>(f.w2.size())),
                  1.0 / std::sqrt(static_cast<double>(ffn_hidden)));
  return f;
}

/// The unsplit attention weights, every one (hidden, hidden): the inner width is hidden, in heads
/// blocks of dh = hidden/heads.
struct FullAttention {
  MatrixRM wq;  ///< (hidden, hidden), head j in columns [j * dh, (j + 1) * dh)
  MatrixRM wk;  ///< as wq
  MatrixRM wv;  ///< as wq
  MatrixRM wo;  ///< (hidden, hidden), head j in rows [j * dh, (j + 1) * dh)
};

/// FullAttention with entries normal(0, 1/sqrt(hidden)) from model::Rng(seed): W_Q, W_K, W_V,
/// W_O in that order, row-major.
/// @throws std::invalid_argument when hidden is below 1.
inline FullAttention full_attention_weights(std::int64_t hidden, std::uint64_t seed) {
  args::check_count("full_attention_weights", "hidden", hidden);
  FullAttention a{MatrixRM(hidden, hidden), MatrixRM(hidden, hidden), MatrixRM(hidden, hidden),
                  MatrixRM(hidden, hidden)};
  model::Rng rng(seed);
  for (MatrixRM* m : {&a.wq, &a.wk, &a.wv, &a.wo})
    rng.fill_normal(std::span<float>(m->data(), static_cast<std::size_t>(m->size())),
                    1.0 / std::sqrt(static_cast<double>(hidden)));
  return a;
}

// ------------------------------------------------------------------------------ views

/// A flat span over a row-major matrix view, for Comm calls. The view must be contiguous (a whole
/// matrix or a block of whole rows), which every output of this chapter is.
/// @throws std::invalid_argument for a view whose rows are not adjacent (a block of columns).
inline std::span<float> contiguous(MatOut m, const char* where) {
  if (m.rows() > 1 && m.outerStride() != m.cols())
    args::fail(where, "output", "(a strided view)",
               "is not contiguous: pass a whole matrix or a block of rows");
  return {m.data(), static_cast<std::size_t>(m.size())};
}

/// A flat buffer as a row vector (model::VecIn / VecOut), for gains, biases and the per-row
/// statistics of a layer norm.
inline Eigen::Map<Eigen::RowVectorXf> row_vector(Buffer<float>& b) {
  return {b.data(), static_cast<Eigen::Index>(b.size())};
}
/// The read-only row_vector.
inline Eigen::Map<const Eigen::RowVectorXf> row_vector(const Buffer<float>& b) {
  return {b.data(), static_cast<Eigen::Index>(b.size())};
}

// ------------------------------------------------------------------------------ token rows

/// The token rows a rank holds under sequence parallelism: [first, first + count) of an (n, h)
/// activation, count = n/t.
struct TokenRows {
  Eigen::Index first = 0;  ///< first row (token) of this rank's block
  Eigen::Index count = 0;  ///< n/t rows
};

/// Group rank `rank`'s token rows of n tokens split t ways: [rank n/t, (rank + 1) n/t), the block
/// of an all-gather's output that rank `rank` contributes (the collectives put blocks in
/// group-rank order).
/// @throws std::invalid_argument when t is below 1, rank is outside [0, t) or t does not divide n.
inline TokenRows token_rows(Eigen::Index n, int rank, int t) {
  args::check_count("token_rows", "t", t);
  if (rank < 0 || rank >= t)
    args::fail("token_rows", "rank", std::to_string(rank), "is outside [0, t): use a group rank");
  check_divides("token_rows", "t", t, "tokens", n,
                "sequence parallelism gives each rank a whole number of tokens");
  return {rank * (n / t), n / t};
}

// ------------------------------------------------------------------------------ layer norm

/// The epsilon of every layer norm of this chapter, inside the square root.
inline constexpr float kLayerNormEps = 1e-5f;

/// The layer norm in front of a sequence-parallel block. Its gain and bias are not split: every
/// rank holds all h of each (Category::weights, the 2h per norm block_params_per_rank counts
/// whole) and their gradients (Category::grads). What sequence parallelism splits is the tokens.
struct SpLayerNorm {
  std::int64_t hidden = 0;  ///< h
  Buffer<float> gamma;      ///< (h), the gain
  Buffer<float> beta;       ///< (h), the bias
  Buffer<float> dgamma;     ///< gradient of gamma over all n tokens, accumulated (+=)
  Buffer<float> dbeta;      ///< gradient of beta, likewise; both the same on every rank
};

/// An SpLayerNorm in `rank`'s ledger with gamma = 1 + normal(0, 0.1) and then beta =
/// normal(0, 0.1) from model::Rng(seed), the same on every rank, and zero gradients.
/// @throws std::invalid_argument when hidden is below 1.
inline SpLayerNorm make_sp_layer_norm(Rank& rank, std::int64_t hidden, std::uint64_t seed) {
  args::check_count("make_sp_layer_norm", "hidden", hidden);
  const auto h = static_cast<std::size_t>(hidden);
  SpLayerNorm ln;
  ln.hidden = hidden;
  ln.gamma = Buffer<float>(rank.memory(), Category::weights, h, "sp_layer_norm.gamma");
  ln.beta = Buffer<float>(rank.memory(), Category::weights, h, "sp_layer_norm.beta");
  ln.dgamma = Buffer<float>(rank.memory(), Category::grads, h, "sp_layer_norm.dgamma");
  ln.dbeta = Buffer<float>(rank.memory(), Category::grads, h, "sp_layer_norm.dbeta");
  model::Rng rng(seed);
  rng.fill_normal(ln.gamma.span(), 0.1);
  for (float& g : ln.gamma.span()) g += 1.0f;
  rng.fill_normal(ln.beta.span(), 0.1);
  return ln;
}

}  // namespace mgpu::tensor_parallel
