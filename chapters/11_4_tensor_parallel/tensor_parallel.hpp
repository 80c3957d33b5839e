// 11.4 Tensor parallelism on the simulated cluster: column- and row-parallel linear layers, the
// Megatron-style FFN y = GELU(x W1) W2 (W1 by columns, W2 by rows) and attention split by heads,
// forward and backward over a tensor-parallel group, every weight shard counted in the ledger;
// then both blocks with sequence parallelism (1/t of the tokens per rank outside the block) and
// the layer norm in front of them on each rank's tokens.
#pragma once

#include "11_4_tensor_parallel/checks.hpp"
#include "11_4_tensor_parallel/formulas.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace mgpu::tensor_parallel {

using model::MatIn;
using model::MatOut;
using model::MatrixRM;

/// Given: the columns [rank * out/t, (rank + 1) * out/t) of `w` (in, out), as an (in, out/t)
/// matrix: what group rank `rank` of a column-parallel layer holds.
/// @throws std::invalid_argument when t is below 1, rank is outside [0, t) or t does not divide
///         w.cols().
inline MatrixRM column_shard(MatIn w, int rank, int t) {
  args::check_count("column_shard", "t", t);
  if (rank < 0 || rank >= t)
    args::fail("column_shard", "rank", std::to_string(rank), "is outside [0, t): use a group rank");
  check_divides("column_shard", "t", t, "columns", w.cols(),
                "each rank takes a whole number of columns");
  const Eigen::Index c = w.cols() / t;
  return w.middleCols(rank * c, c);
}

/// Given: the rows [rank * in/t, (rank + 1) * in/t) of `w` (in, out), as an (in/t, out) matrix:
/// what group rank `rank` of a row-parallel layer holds.
/// @throws std::invalid_argument as column_shard, for w.rows().
inline MatrixRM row_shard(MatIn w, int rank, int t) {
  args::check_count("row_shard", "t", t);
  if (rank < 0 || rank >= t)
    args::fail("row_shard", "rank", std::to_string(rank), "is outside [0, t): use a group rank");
  check_divides("row_shard", "t", t, "rows", w.rows(), "each rank takes a whole number of rows");
  const Eigen::Index r = w.rows() / t;
  return w.middleRows(rank * r, r);
}

/// Given: the unsplit FFN weights every rank (and every test) draws from one seed, so the shards
/// and the single-rank reference come from the same numbers.
struct FullFfn {
  MatrixRM w1;  ///< (hidden, ffn_hidden)
  MatrixRM w2;  ///< (ffn_hidden, hidden)
};

/// Given: FullFfn with entries normal(0, 1/sqrt(fan_in)) from model::Rng(seed): W1 first, then W2,
/// row-major.
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

/// Given: a flat span over a row-major matrix view, for Comm calls. The view must be contiguous
/// (a whole matrix or a block of whole rows), which every output of this chapter is.
/// @throws std::invalid_argument for a view whose rows are not adjacent (a block of columns).
inline std::span<float> contiguous(MatOut m, const char* where) {
  if (m.rows() > 1 && m.outerStride() != m.cols())
    args::fail(where, "output", "(a strided view)",
               "is not contiguous: pass a whole matrix or a block of rows");
  return {m.data(), static_cast<std::size_t>(m.size())};
}

// ------------------------------------------------------------------------------ linear layers

/// Forward of a column-parallel linear layer y = x W, W (in, out) split by output columns:
/// this rank computes its own columns y_shard = x W_shard, with no communication. The full y is
/// the concatenation of the t shards in group-rank order (nobody needs to build it: the next
/// layer is row-parallel and consumes the shard as it is).
///
/// TODO 7 of 11.4. x (n, in), w_shard (in, out/t), y_shard (n, out/t), overwritten.
/// model::linear_forward with an empty bias does it.
/// @throws std::invalid_argument when the shapes do not match.
void column_parallel_forward(MatIn x, MatIn w_shard, MatOut y_shard);

/// Backward of column_parallel_forward given this rank's dy_shard (n, out/t).
///
/// TODO 8 of 11.4. dW_shard = x^T dy_shard is local (accumulated, +=). Every rank's input
/// gradient dy_shard W_shard^T is only a partial sum over its columns: overwrite dx (n, in) with
/// it and sum it over `tp` with one all-reduce (ReduceOp::sum). dx must be contiguous.
/// @throws std::invalid_argument when the shapes do not match.
void column_parallel_backward(Comm& tp, MatIn x, MatIn w_shard, MatIn dy_shard, MatOut dx,
                              MatOut dw_shard);

/// Forward of a row-parallel linear layer y = x W + b, W (in, out) split by input rows: this
/// rank holds x's matching columns x_shard (n, in/t), typically a column-parallel layer's output.
/// The bias b (out) is not split: every rank holds all of it (size 0 for a layer without bias).
///
/// TODO 9 of 11.4. x_shard W_shard is a partial sum of y over this rank's rows: overwrite y (n,
/// out) with it and all-reduce it over `tp` (ReduceOp::sum), so every rank ends with the whole
/// x W; then add b to every row. The bias goes in once, after the sum: added before it, the t
/// ranks' copies would add up to t b. y must be contiguous.
/// @throws std::invalid_argument when the shapes do not match (bias of size other than 0 or out).
void row_parallel_forward(Comm& tp, MatIn x_shard, MatIn w_shard, model::VecIn bias, MatOut y);

/// Backward of row_parallel_forward given the whole dy (n, out), which every rank holds.
///
/// TODO 10 of 11.4. All gradients are local, no communication: dx_shard = dy W_shard^T
/// (n, in/t, overwritten), dW_shard += x_shard^T dy and, unless db has size 0, db += the column
/// sums of dy: the whole bias gradient, the same on every rank (model::linear_backward does all
/// three).
/// @throws std::invalid_argument when the shapes do not match (db of size other than 0 or out).
void row_parallel_backward(MatIn x_shard, MatIn w_shard, MatIn dy, MatOut dx_shard, MatOut dw_shard,
                           model::VecOut db);

// ------------------------------------------------------------------------------ FFN block

/// One rank's share of a tensor-parallel FFN y = GELU(x W1) W2 (no biases), in its ledger.
///
/// | buffer   | shape                  | category          |
/// |----------|------------------------|-------------------|
/// | w1, w2   | (h, f/t), (f/t, h)     | Category::weights |
/// | dw1, dw2 | as w1, w2              | Category::grads   |
///
/// h = hidden, f = ffn_hidden. So the weights per rank are ffn_params_per_rank(h, f, t) floats.
struct TpFfn {
  std::int64_t hidden = 0;      ///< h
  std::int64_t ffn_hidden = 0;  ///< f, the unsplit inner width
  int t = 1;                    ///< tensor-parallel group size
  Buffer<float> w1;             ///< column_shard(W1, rank, t), row-major
  Buffer<float> w2;             ///< row_shard(W2, rank, t), row-major
  Buffer<float> dw1;            ///< gradient of w1, accumulated by tp_ffn_backward
  Buffer<float> dw2;            ///< gradient of w2, accumulated by tp_ffn_backward
};

/// What tp_ffn_forward saves for the backward pass, in Category::activations.
struct TpFfnCache {
  std::int64_t tokens = 0;  ///< n, rows of x
  Buffer<float> h;          ///< x W1_shard, (n, f/t)
  Buffer<float> a;          ///< GELU(h), (n, f/t)
};

/// This rank's share of the FFN whose unsplit weights are full_ffn_weights(hidden, ffn_hidden,
/// seed), for group rank tp.rank() of t = tp.size(), allocated as the TpFfn table says.
///
/// TODO 11 of 11.4. Every rank draws the same full weights (no communication), copies its
/// column_shard of W1 and row_shard of W2 into ledger buffers, and zeroes the gradients (a
/// fresh Buffer is zero). Only the shards stay allocated: the full matrices are temporaries
/// of this function, outside the ledger, as if loaded from a checkpoint shard by shard.
/// @throws std::invalid_argument when hidden or ffn_hidden is below 1 or t does not divide
///         ffn_hidden (check_divides).
TpFfn make_tp_ffn(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t ffn_hidden,
                  std::uint64_t seed);

/// Forward of the tensor-parallel FFN: y (n, h) = sum over ranks of GELU(x W1_i) W2_i, the same on
/// every rank. x (n, h) is the whole input, which every rank holds. Returns the cache.
///
/// TODO 12 of 11.4. Allocate the cache (Category::activations), column_parallel_forward into h,
/// model::gelu_forward into a, row_parallel_forward (no bias) into y: exactly one all-reduce.
/// Charge the matmuls to the clock: rank.compute(model::ffn_flops(n, h, f/t), "tp_ffn_forward").
/// @throws std::invalid_argument when x or y is not (n, hidden).
TpFfnCache tp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x, MatOut y);

/// Backward of the tensor-parallel FFN: dx (n, h) overwritten with the whole input gradient (the
/// same on every rank); ffn.dw1 and ffn.dw2 accumulate this rank's shards of the unsplit
/// gradients.
///
/// TODO 13 of 11.4. row_parallel_backward gives da (local), model::gelu_backward gives dh, and
/// column_parallel_backward gives dx with exactly one all-reduce. (model::ffn_backward with empty
/// biases computes the local part in one call; then only the all-reduce is left.) Temporaries go
/// in Category::activations. Charge 2 * ffn_flops(n, h, f/t) to the clock.
/// @throws std::invalid_argument when x, dy or dx is not (n, hidden) or cache.tokens is not n.
void tp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, MatIn x, const TpFfnCache& cache, MatIn dy,
                     MatOut dx);

// ------------------------------------------------------------------------------ attention block

/// Given: the unsplit attention weights, every one (hidden, hidden): the inner width is hidden,
/// heads blocks of hidden/heads columns.
struct FullAttention {
  MatrixRM wq;  ///< (hidden, hidden), head j in columns [j * dh, (j + 1) * dh)
  MatrixRM wk;  ///< as wq
  MatrixRM wv;  ///< as wq
  MatrixRM wo;  ///< (hidden, hidden), head j in rows [j * dh, (j + 1) * dh)
};

/// Given: FullAttention with entries normal(0, 1/sqrt(hidden)) from model::Rng(seed): W_Q, W_K,
/// W_V, W_O in that order, row-major.
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

/// One rank's share of a multi-head attention block split by heads: heads/t whole heads, i.e.
/// column_shard of W_Q, W_K, W_V and row_shard of W_O (each (h, h/t) or (h/t, h)), under
/// Category::weights, and their gradients dwq..dwo under Category::grads:
/// attention_params_per_rank(h, heads, t) floats of each.
struct TpAttention {
  std::int64_t hidden = 0;  ///< h
  std::int64_t heads = 0;   ///< all heads of the unsplit block
  int t = 1;                ///< tensor-parallel group size
  bool causal = true;       ///< mask future tokens
  Buffer<float> wq;         ///< (h, h/t)
  Buffer<float> wk;         ///< (h, h/t)
  Buffer<float> wv;         ///< (h, h/t)
  Buffer<float> wo;         ///< (h/t, h)
  Buffer<float> dwq;        ///< gradient of wq, accumulated
  Buffer<float> dwk;        ///< gradient of wk, accumulated
  Buffer<float> dwv;        ///< gradient of wv, accumulated
  Buffer<float> dwo;        ///< gradient of wo, accumulated
};

/// What tp_attention_forward saves for the backward pass, in Category::activations, shaped as
/// model::attention_forward's saved tensors for heads/t heads.
struct TpAttentionCache {
  std::int64_t tokens = 0;  ///< n = batch * seq
  std::int64_t seq = 0;     ///< tokens per sequence
  Buffer<float> q;          ///< (n, h/t)
  Buffer<float> k;          ///< (n, h/t)
  Buffer<float> v;          ///< (n, h/t)
  Buffer<float> p;          ///< (batch * heads/t * seq, seq), the attention probabilities
  Buffer<float> o;          ///< (n, h/t), the heads' outputs before W_O
};

/// This rank's heads of the attention block whose unsplit weights are
/// full_attention_weights(hidden, seed), for group rank tp.rank() of t = tp.size().
///
/// TODO 14 of 11.4. As make_tp_ffn: column_shard of W_Q, W_K, W_V, row_shard of W_O.
/// @throws std::invalid_argument when hidden or heads is below 1, heads does not divide hidden,
///         or t does not divide heads (each rank takes whole heads).
TpAttention make_tp_attention(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t heads,
                              std::uint64_t seed, bool causal = true);

/// Forward of the attention block split by heads: y (n, h), the same on every rank, is the sum
/// over ranks of their heads' attention times their rows of W_O. x (n, h) holds n tokens,
/// sequence after sequence, `seq` per sequence.
///
/// TODO 15 of 11.4. Allocate the cache; model::attention_forward with heads/t heads and the
/// shards computes this rank's partial y; one all-reduce sums it (contiguous(y, ...)). Charge
/// model::attention_flops(n, seq, h, h/t) to the clock.
/// @throws std::invalid_argument when x or y is not (n, hidden) or seq does not divide n.
TpAttentionCache tp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x,
                                      std::int64_t seq, MatOut y);

/// Backward of tp_attention_forward: dx (n, h) overwritten with the whole input gradient, the
/// same on every rank; attn.dwq..dwo accumulate this rank's shards of the unsplit gradients.
///
/// TODO 16 of 11.4. model::attention_backward gives this rank's partial dx and its weight
/// gradients; one all-reduce sums dx. Charge 2 * attention_flops to the clock.
/// @throws std::invalid_argument when x, dy or dx is not (cache.tokens, hidden).
void tp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, MatIn x,
                           const TpAttentionCache& cache, MatIn dy, MatOut dx);

// ------------------------------------------------------------------------------ sequence parallel

/// Given: the token rows a rank holds under sequence parallelism: [first, first + count) of an
/// (n, h) activation, count = n/t.
struct TokenRows {
  Eigen::Index first = 0;  ///< first row (token) of this rank's block
  Eigen::Index count = 0;  ///< n/t rows
};

/// Given: group rank `rank`'s token rows of n tokens split t ways: [rank n/t, (rank + 1) n/t),
/// the block of an all-gather's output that rank `rank` contributes (the collectives put blocks in
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

/// What sp_ffn_forward saves for the backward pass, in Category::activations. Against
/// TpFfnCache it adds the block input, but only this rank's n/t tokens of it: the plain
/// tensor-parallel FFN needs the whole x (n, h) on every rank for its backward, a replicated
/// activation; here backward all-gathers the shards again instead (Megatron-LM does the same).
struct SpFfnCache {
  std::int64_t tokens = 0;  ///< n, all tokens of the block: t times the shard's rows
  Buffer<float> x_shard;    ///< this rank's rows of x, (n/t, h)
  Buffer<float> h;          ///< x W1_shard over all n tokens, (n, f/t)
  Buffer<float> a;          ///< GELU(h), (n, f/t)
};

/// Forward of the FFN with tensor and sequence parallelism (Korthikanti et al. 2022): outside the
/// block every rank holds only its token_rows of the (n, h) activation, so the block's all-reduce
/// becomes an all-gather before the column-parallel layer and a reduce-scatter after the
/// row-parallel one, the same bytes in all (an all-reduce is a reduce-scatter then an
/// all-gather). x_shard (n/t, h) is this rank's rows of x; y_shard (n/t, h) is overwritten with
/// this rank's rows of the unsplit FFN's y. n = t * x_shard.rows(). Returns the cache.
///
/// TODO 17 of 11.4. Exactly one all-gather (the x shards, into a transient (n, h) buffer in
/// Category::comm, freed on return) and one reduce-scatter (ReduceOp::sum, of the partial
/// (n, h) y, also Category::comm) over `tp`, nothing else. Save the x shard, h and a in the
/// cache (Category::activations), never the gathered x: that would be t times the shard on every
/// rank, the replicated activation this layout exists to remove. Charge
/// model::ffn_flops(n, h, f/t) to the clock.
/// @throws std::invalid_argument when x_shard or y_shard is not (rows, hidden) with the same rows.
SpFfnCache sp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x_shard, MatOut y_shard);

/// Backward of sp_ffn_forward: dy_shard (n/t, h) is this rank's rows of the output gradient;
/// dx_shard (n/t, h) is overwritten with this rank's rows of the unsplit input gradient; ffn.dw1
/// and ffn.dw2 accumulate this rank's shards of the unsplit gradients.
///
/// TODO 18 of 11.4. Two all-gathers and one reduce-scatter over `tp`, nothing else: all-gather
/// dy (the mirror of the forward's reduce-scatter), all-gather cache.x_shard again (dW1 = x^T dh
/// needs all n tokens of x; this is the price of saving only the shard: (t - 1)/t n h floats
/// sent, half an all-reduce), the local backward as tp_ffn_backward's, then a reduce-scatter
/// (sum) of the partial dx (n, h) into dx_shard (the mirror of the forward's all-gather).
/// Gathered and partial (n, h) buffers in Category::comm, the (n, f/t) temporaries in
/// Category::activations. Charge 2 * ffn_flops(n, h, f/t) to the clock.
/// @throws std::invalid_argument when dy_shard or dx_shard is not (cache.tokens / t, hidden).
void sp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, const SpFfnCache& cache, MatIn dy_shard,
                     MatOut dx_shard);

/// What sp_attention_forward saves for the backward pass, in Category::activations: the
/// TpAttentionCache tensors of this rank's heads over all n tokens, plus the block input, but only
/// this rank's n/t tokens of it (the plain block keeps the whole x on every rank for its backward;
/// here the backward all-gathers the shards again, as in SpFfnCache).
struct SpAttentionCache {
  std::int64_t tokens = 0;  ///< n = batch * seq, all tokens of the block: t times the shard's rows
  std::int64_t seq = 0;     ///< tokens per sequence
  Buffer<float> x_shard;    ///< this rank's rows of x, (n/t, h)
  Buffer<float> q;          ///< (n, h/t)
  Buffer<float> k;          ///< (n, h/t)
  Buffer<float> v;          ///< (n, h/t)
  Buffer<float> p;          ///< (batch * heads/t * seq, seq), the attention probabilities
  Buffer<float> o;          ///< (n, h/t), the heads' outputs before W_O
};

/// Forward of the attention block split by heads with sequence parallelism: as sp_ffn_forward,
/// the block's all-reduce becomes an all-gather of the input before the heads and a
/// reduce-scatter of the partial output after W_O, the same bytes in all. x_shard (n/t, h) is
/// this rank's token_rows of x; y_shard (n/t, h) is overwritten with this rank's rows of the
/// unsplit attention's y. n = t * x_shard.rows(). Returns the cache.
///
/// Tokens and sequences: the unsplit x (n, h) holds its tokens sequence after sequence, `seq`
/// per sequence, as tp_attention_forward's does, and the shards are plain blocks of its rows, so a
/// shard need not hold whole sequences: at one sequence (n = seq) each rank holds 1/t of its
/// positions, Megatron-LM's split of the sequence dimension. The scores of a head need every
/// position of its sequence, so attention must run on the gathered x, never on a shard: the
/// all-gather puts rank i's rows back at token_rows(n, i, t), the original order, and every
/// sequence is whole again. So seq must divide n, not the shard's rows.
///
/// TODO 19 of 11.4. Exactly one all-gather (the x shards, into a transient (n, h) buffer in
/// Category::comm, freed on return) and one reduce-scatter (ReduceOp::sum, of the partial (n, h)
/// y, also Category::comm) over `tp`, nothing else. model::attention_forward with heads/t heads
/// runs on the gathered x as in tp_attention_forward. Save the x shard and the attention tensors
/// in the cache (Category::activations), never the gathered x. Charge
/// model::attention_flops(n, seq, h, h/t) to the clock.
/// @throws std::invalid_argument when x_shard or y_shard is not (rows, hidden) with the same rows,
///         seq is below 1, or seq does not divide n = t * rows (whole sequences once gathered).
SpAttentionCache sp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x_shard,
                                      std::int64_t seq, MatOut y_shard);

/// Backward of sp_attention_forward: dy_shard (n/t, h) is this rank's rows of the output
/// gradient; dx_shard (n/t, h) is overwritten with this rank's rows of the unsplit input
/// gradient; attn.dwq..dwo accumulate this rank's shards of the unsplit gradients.
///
/// TODO 20 of 11.4. Two all-gathers and one reduce-scatter over `tp`, nothing else: all-gather dy
/// (the mirror of the forward's reduce-scatter), all-gather cache.x_shard again (dW_Q, dW_K, dW_V
/// need all n tokens of x), model::attention_backward on them as in tp_attention_backward, then a
/// reduce-scatter (sum) of the partial dx (n, h) into dx_shard. The gathered and partial (n, h)
/// buffers in Category::comm. Charge 2 * attention_flops to the clock.
/// @throws std::invalid_argument when dy_shard or dx_shard is not (cache.tokens / t, hidden).
void sp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, const SpAttentionCache& cache,
                           MatIn dy_shard, MatOut dx_shard);

// ------------------------------------------------------------------------------ sp layer norm

/// Given: the epsilon of every layer norm of this chapter, inside the square root.
inline constexpr float kLayerNormEps = 1e-5f;

/// Given: a flat buffer as a row vector (model::VecIn / VecOut), for gains, biases and the per-row
/// statistics of a layer norm.
inline Eigen::Map<Eigen::RowVectorXf> row_vector(Buffer<float>& b) {
  return {b.data(), static_cast<Eigen::Index>(b.size())};
}
/// Given: the read-only row_vector.
inline Eigen::Map<const Eigen::RowVectorXf> row_vector(const Buffer<float>& b) {
  return {b.data(), static_cast<Eigen::Index>(b.size())};
}

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

/// Given: an SpLayerNorm in `rank`'s ledger with gamma = 1 + normal(0, 0.1) and then beta =
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

/// What sp_layer_norm_forward saves for the backward pass, in Category::activations: this rank's
/// n/t tokens only. Under plain tensor parallelism the norm sits outside the split matmuls and
/// runs on the whole (n, h) activation on every rank, so these would be n rows everywhere.
struct SpLayerNormCache {
  std::int64_t tokens = 0;  ///< n, all tokens of the block: t times the shard's rows
  Buffer<float> xhat;       ///< this rank's normalised rows, (n/t, h)
  Buffer<float> rstd;       ///< 1 / sqrt(var + eps) of each of those rows, (n/t)
};

/// Forward of the pre-attention layer norm under sequence parallelism (Korthikanti et al. 2022):
/// x_shard (n/t, h) is this rank's token_rows of the block input; y_shard (n/t, h) is overwritten
/// with the same rows of the unsplit layer norm, model::layer_norm_forward with ln's gain and
/// bias and kLayerNormEps. It comes before sp_attention_forward's all-gather: its output is that
/// function's x_shard. n = t * x_shard.rows(), t = tp.size(). Returns the cache.
///
/// TODO 21 of 11.4. A layer norm never mixes rows (each token's mean and variance are its own), so
/// this rank's rows alone give its rows of the result: no communication at all. Save xhat and
/// rstd for these rows (Category::activations), never the other ranks'.
/// @throws std::invalid_argument when x_shard or y_shard is not (rows, hidden) with the same rows.
SpLayerNormCache sp_layer_norm_forward(Rank& rank, Comm& tp, const SpLayerNorm& ln, MatIn x_shard,
                                       MatOut y_shard);

/// Backward of sp_layer_norm_forward: dy_shard (n/t, h) is this rank's rows of the output
/// gradient; dx_shard (n/t, h) is overwritten with this rank's rows of the unsplit input gradient;
/// ln.dgamma and ln.dbeta accumulate (+=) the unsplit gradients over all n tokens, the same on
/// every rank.
///
/// TODO 22 of 11.4. dx_shard is local. The gain and bias gradients are sums over tokens, and this
/// rank saw only its own: compute its partial sums into a fresh 2h buffer (Category::comm), sum
/// them over `tp` with exactly one all-reduce (ReduceOp::sum), then add them to ln.dgamma and
/// ln.dbeta. All-reducing ln.dgamma and ln.dbeta themselves would also sum what earlier
/// micro-batches had accumulated there, t times over.
/// @throws std::invalid_argument when dy_shard or dx_shard is not (cache.tokens / t, hidden).
void sp_layer_norm_backward(Rank& rank, Comm& tp, SpLayerNorm& ln, const SpLayerNormCache& cache,
                            MatIn dy_shard, MatOut dx_shard);

}  // namespace mgpu::tensor_parallel
