// 11.4 Tensor parallelism on the simulated cluster, the contract of tensor_parallel.cpp: column-
// and row-parallel linear layers, the FFN y = GELU(x W1) W2 and attention split by heads, forward
// and backward over a tensor-parallel group with every shard in the ledger; then both blocks with
// sequence parallelism (1/t of the tokens per rank outside the block) and the layer norm in front
// of them. Given helpers (unsplit weights, views, token rows): tensor_parallel_given.hpp.
//
// Conventions: t = tp.size(); "this rank" is group rank tp.rank(); n tokens, h = hidden,
// f = ffn_hidden; every matrix is row-major; an output marked "contiguous" is a whole matrix or
// a block of whole rows. "Sends nothing" and "one all-reduce of N floats" are what the traffic
// meter must show for the call, over `tp` only.
#pragma once

#include "11_4_tensor_parallel/checks.hpp"
#include "11_4_tensor_parallel/formulas.hpp"
#include "11_4_tensor_parallel/tensor_parallel_given.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/tensor.hpp"

#include <cstdint>
#include <stdexcept>

namespace mgpu::tensor_parallel {

// ------------------------------------------------------------------------------ shards

/// What group rank `rank` of t holds of `w` (in, out) in a column-parallel layer: an (in, out/t)
/// matrix; the t ranks' results placed side by side in rank order are `w`.
/// (TODO column_shard)
/// @throws std::invalid_argument when t is below 1, rank is outside [0, t) or t does not divide
///         w.cols().
MatrixRM column_shard(MatIn w, int rank, int t);

/// What group rank `rank` of t holds of `w` (in, out) in a row-parallel layer: an (in/t, out)
/// matrix; the t ranks' results stacked in rank order are `w`.
/// (TODO row_shard)
/// @throws std::invalid_argument as column_shard, for w.rows().
MatrixRM row_shard(MatIn w, int rank, int t);

// ------------------------------------------------------------------------------ linear layers

/// Forward of a column-parallel linear layer y = x W, W (in, out) split by output columns:
/// x (n, in) is whole on every rank, w_shard = column_shard(W, rank, t) is (in, out/t), and
/// y_shard (n, out/t) is overwritten with this rank's columns of the unsplit x W. Sends nothing.
/// (TODO column_parallel_forward)
/// @throws std::invalid_argument when the shapes do not match.
void column_parallel_forward(MatIn x, MatIn w_shard, MatOut y_shard);

/// Backward of column_parallel_forward given this rank's columns dy_shard (n, out/t) of dy.
/// After it returns, dx (n, in, contiguous, overwritten) is the unsplit layer's whole input
/// gradient dy W^T, the same on every rank, and dw_shard (in, out/t) has accumulated (+=) this
/// rank's columns of the unsplit x^T dy. Sends exactly one all-reduce.
/// (TODO column_parallel_backward)
/// @throws std::invalid_argument when the shapes do not match.
void column_parallel_backward(Comm& tp, MatIn x, MatIn w_shard, MatIn dy_shard, MatOut dx,
                              MatOut dw_shard);

/// Forward of a row-parallel linear layer y = x W + b, W (in, out) split by input rows: x_shard
/// (n, in/t) is this rank's columns of x (typically a column-parallel layer's output) and
/// w_shard = row_shard(W, rank, t) is (in/t, out). The bias b (out) is whole on every rank (size
/// 0 for a layer without bias). After it returns, y (n, out, contiguous, overwritten) is the
/// unsplit x W + b on every rank. Sends exactly one all-reduce.
/// (TODO row_parallel_forward)
/// @throws std::invalid_argument when the shapes do not match (bias of size other than 0 or out).
void row_parallel_forward(Comm& tp, MatIn x_shard, MatIn w_shard, model::VecIn bias, MatOut y);

/// Backward of row_parallel_forward given the whole dy (n, out), the same on every rank:
/// dx_shard (n, in/t) is overwritten with this rank's columns of the unsplit dy W^T, dw_shard
/// (in/t, out) accumulates (+=) this rank's rows of the unsplit x^T dy and, unless db has size 0,
/// db (out) accumulates the unsplit bias gradient, the same on every rank. Sends nothing.
/// (TODO row_parallel_backward)
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
/// So the weights per rank are ffn_params_per_rank(h, f, t) floats, and the gradients as many.
struct TpFfn {
  std::int64_t hidden = 0;      ///< h
  std::int64_t ffn_hidden = 0;  ///< f, the unsplit inner width
  int t = 1;                    ///< tensor-parallel group size
  Buffer<float> w1;             ///< this rank's shard of W1, (h, f/t)
  Buffer<float> w2;             ///< this rank's shard of W2, (f/t, h)
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
/// seed), allocated as the TpFfn table says, with zero gradients: the shards that let
/// tp_ffn_forward and tp_ffn_backward each send one all-reduce. Only the shards stay in the
/// ledger (the unsplit matrices are temporaries outside it, as if loaded from a checkpoint shard
/// by shard). Sends nothing.
/// (TODO make_tp_ffn)
/// @throws std::invalid_argument when hidden or ffn_hidden is below 1 or t does not divide
///         ffn_hidden (check_divides).
TpFfn make_tp_ffn(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t ffn_hidden,
                  std::uint64_t seed);

/// Forward of the tensor-parallel FFN: x (n, h) is the whole input, the same on every rank; y
/// (n, h, contiguous, overwritten) is the unsplit FFN's output on every rank. Returns the cache.
/// Sends one all-reduce of n * h floats. Clock: model::ffn_flops(n, h, f/t), as
/// "tp_ffn_forward".
/// (TODO tp_ffn_forward)
/// @throws std::invalid_argument when x or y is not (n, hidden).
TpFfnCache tp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x, MatOut y);

/// Backward of the tensor-parallel FFN: dx (n, h, contiguous) is overwritten with the unsplit
/// input gradient, the same on every rank; ffn.dw1 and ffn.dw2 accumulate (+=) this rank's shards
/// of the unsplit gradients. Sends one all-reduce of n * h floats. Temporaries in
/// Category::activations. Clock: 2 * model::ffn_flops(n, h, f/t), as "tp_ffn_backward".
/// (TODO tp_ffn_backward)
/// @throws std::invalid_argument when x, dy or dx is not (n, hidden) or cache.tokens is not n.
void tp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, MatIn x, const TpFfnCache& cache, MatIn dy,
                     MatOut dx);

// ------------------------------------------------------------------------------ attention block

/// One rank's share of a multi-head attention block split by heads: group rank r holds the
/// heads/t whole heads [r heads/t, (r + 1) heads/t), that is the parts of W_Q, W_K, W_V (each
/// (h, h/t)) and of W_O ((h/t, h)) those heads use, under Category::weights, and their gradients
/// under Category::grads: attention_params_per_rank(h, heads, t) floats of each.
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
/// full_attention_weights(hidden, seed), allocated as TpAttention says, with zero gradients.
/// Sends nothing.
/// (TODO make_tp_attention)
/// @throws std::invalid_argument when hidden or heads is below 1, heads does not divide hidden,
///         or t does not divide heads (each rank takes whole heads).
TpAttention make_tp_attention(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t heads,
                              std::uint64_t seed, bool causal = true);

/// Forward of the attention block split by heads: x (n, h) holds n tokens, sequence after
/// sequence, `seq` per sequence, the same on every rank; y (n, h, contiguous, overwritten) is the
/// unsplit block's output (model::attention_forward with all heads) on every rank. Returns the
/// cache. Sends one all-reduce of n * h floats. Clock: model::attention_flops(n, seq, h, h/t), as
/// "tp_attention_forward".
/// (TODO tp_attention_forward)
/// @throws std::invalid_argument when x or y is not (n, hidden), seq is below 1 or seq does not
///         divide n.
TpAttentionCache tp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x,
                                      std::int64_t seq, MatOut y);

/// Backward of tp_attention_forward: dx (n, h, contiguous) is overwritten with the unsplit input
/// gradient, the same on every rank; attn.dwq..dwo accumulate (+=) this rank's shards of the
/// unsplit gradients. Sends one all-reduce of n * h floats. Clock: 2 *
/// model::attention_flops(n, seq, h, h/t), as "tp_attention_backward".
/// (TODO tp_attention_backward)
/// @throws std::invalid_argument when x, dy or dx is not (cache.tokens, hidden).
void tp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, MatIn x,
                           const TpAttentionCache& cache, MatIn dy, MatOut dx);

// ------------------------------------------------------------------------------ sequence parallel
// Outside a sequence-parallel block every rank holds only its token_rows(n, rank, t) of the
// (n, h) activation (Korthikanti et al. 2022). Each function below takes this rank's rows and
// returns this rank's rows; n = t * (the shard's rows).

/// What sp_ffn_forward saves for the backward pass, in Category::activations: this rank's n/t
/// rows of the block input, never all n of them.
struct SpFfnCache {
  std::int64_t tokens = 0;  ///< n, all tokens of the block: t times the shard's rows
  Buffer<float> x_shard;    ///< this rank's rows of x, (n/t, h)
  Buffer<float> h;          ///< x W1_shard over all n tokens, (n, f/t)
  Buffer<float> a;          ///< GELU(h), (n, f/t)
};

/// Forward of the FFN with tensor and sequence parallelism: x_shard (n/t, h) is this rank's
/// token_rows of x; y_shard (n/t, h, contiguous, overwritten) is this rank's rows of the unsplit
/// FFN's y. Returns the cache. Sends one all-gather and one reduce-scatter of (n, h) over `tp`,
/// nothing else. Any (n, h) buffer lives in Category::comm and is freed on return. Clock:
/// model::ffn_flops(n, h, f/t), as "sp_ffn_forward".
/// (TODO sp_ffn_forward)
/// @throws std::invalid_argument when x_shard or y_shard is not (rows, hidden) with the same rows.
SpFfnCache sp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x_shard, MatOut y_shard);

/// Backward of sp_ffn_forward: dy_shard (n/t, h) is this rank's rows of the output gradient;
/// dx_shard (n/t, h, contiguous) is overwritten with this rank's rows of the unsplit input
/// gradient; ffn.dw1 and ffn.dw2 accumulate (+=) this rank's shards of the unsplit gradients.
/// Sends two all-gathers and one reduce-scatter of (n, h) over `tp`, nothing else. (n, h)
/// buffers in Category::comm, (n, f/t) temporaries in Category::activations. Clock: 2 *
/// model::ffn_flops(n, h, f/t), as "sp_ffn_backward".
/// (TODO sp_ffn_backward)
/// @throws std::invalid_argument when dy_shard or dx_shard is not (cache.tokens / t, hidden).
void sp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, const SpFfnCache& cache, MatIn dy_shard,
                     MatOut dx_shard);

/// What sp_attention_forward saves for the backward pass, in Category::activations: the
/// TpAttentionCache tensors of this rank's heads over all n tokens, plus this rank's n/t rows of
/// the block input, never all n of them.
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

/// Forward of the attention block split by heads with sequence parallelism: x_shard (n/t, h) is
/// this rank's token_rows of the unsplit x, which holds its tokens sequence after sequence, `seq`
/// per sequence; a shard is a plain block of rows and may begin or end inside a sequence.
/// y_shard (n/t, h, contiguous, overwritten) is this rank's rows of the unsplit attention's y.
/// Returns the cache. Sends one all-gather and one reduce-scatter of (n, h) over `tp`, nothing
/// else; (n, h) buffers in Category::comm, freed on return. Clock:
/// model::attention_flops(n, seq, h, h/t), as "sp_attention_forward".
/// (TODO sp_attention_forward)
/// @throws std::invalid_argument when x_shard or y_shard is not (rows, hidden) with the same rows,
///         seq is below 1, or seq does not divide n.
SpAttentionCache sp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x_shard,
                                      std::int64_t seq, MatOut y_shard);

/// Backward of sp_attention_forward: dy_shard (n/t, h) is this rank's rows of the output
/// gradient; dx_shard (n/t, h, contiguous) is overwritten with this rank's rows of the unsplit
/// input gradient; attn.dwq..dwo accumulate (+=) this rank's shards of the unsplit gradients.
/// Sends two all-gathers and one reduce-scatter of (n, h) over `tp`, nothing else; (n, h)
/// buffers in Category::comm. Clock: 2 * model::attention_flops(n, seq, h, h/t), as
/// "sp_attention_backward".
/// (TODO sp_attention_backward)
/// @throws std::invalid_argument when dy_shard or dx_shard is not (cache.tokens / t, hidden).
void sp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, const SpAttentionCache& cache,
                           MatIn dy_shard, MatOut dx_shard);

// ------------------------------------------------------------------------------ sp layer norm

/// What sp_layer_norm_forward saves for the backward pass, in Category::activations: this rank's
/// n/t tokens only.
struct SpLayerNormCache {
  std::int64_t tokens = 0;  ///< n, all tokens of the block: t times the shard's rows
  Buffer<float> xhat;       ///< this rank's normalised rows, (n/t, h)
  Buffer<float> rstd;       ///< 1 / sqrt(var + eps) of each of those rows, (n/t)
};

/// Forward of the layer norm in front of a sequence-parallel block: x_shard (n/t, h) is this
/// rank's token_rows of the block input; y_shard (n/t, h) is overwritten with the same rows of the
/// unsplit model::layer_norm_forward (ln's gain and bias, kLayerNormEps), which is the x_shard of
/// the sp_attention_forward that follows. Returns the cache. Sends nothing.
/// (TODO sp_layer_norm_forward)
/// @throws std::invalid_argument when x_shard or y_shard is not (rows, hidden) with the same rows.
SpLayerNormCache sp_layer_norm_forward(Rank& rank, Comm& tp, const SpLayerNorm& ln, MatIn x_shard,
                                       MatOut y_shard);

/// Backward of sp_layer_norm_forward: dy_shard (n/t, h) is this rank's rows of the output
/// gradient; dx_shard (n/t, h) is overwritten with this rank's rows of the unsplit input
/// gradient. ln.dgamma and ln.dbeta each gain (+=) exactly this call's unsplit gradient over all
/// n tokens, the same on every rank, whatever they held before (the gradients of earlier
/// micro-batches stay as they were). Sends one all-reduce of 2h floats, nothing else; temporaries
/// in Category::comm.
/// (TODO sp_layer_norm_backward)
/// @throws std::invalid_argument when dy_shard or dx_shard is not (cache.tokens / t, hidden).
void sp_layer_norm_backward(Rank& rank, Comm& tp, SpLayerNorm& ln, const SpLayerNormCache& cache,
                            MatIn dy_shard, MatOut dx_shard);

}  // namespace mgpu::tensor_parallel
