// The layers of the course model as plain functions on Eigen matrices, forward and backward by
// hand. No clocks, no ledgers, no communication: callers own every buffer, so a chapter can split a
// weight (tensor parallel) or feed a sliced batch (data parallel) and call the same maths.
#pragma once

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <span>

namespace mgpu::model {

/// A row-major float matrix: row i is token i, so a contiguous block of rows is a slice of the
/// batch. The same type as mgpu::Matrix<float> (tensor.hpp), whose as_matrix views flat buffers.
using MatrixRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Read-only view of a row-major matrix (a MatrixRM, a block of rows, or a Map over a flat buffer).
using MatIn = Eigen::Ref<const MatrixRM>;
/// Writable view of a row-major matrix.
using MatOut = Eigen::Ref<MatrixRM>;
/// Read-only view of a row vector (a bias). Size 0 means "no bias".
using VecIn = Eigen::Ref<const Eigen::RowVectorXf>;
/// Writable view of a row vector (a bias gradient). Size 0 means "no bias".
using VecOut = Eigen::Ref<Eigen::RowVectorXf>;

// ------------------------------------------------------------------------------------ FLOP counts
/// FLOPs of y = x W for x (n, in) and W (in, out): 2*n*in*out (a multiply and an add each).
double linear_flops(std::int64_t n, std::int64_t in, std::int64_t out);
/// FLOPs of the FFN forward, x (n, d) -> (n, f) -> (n, d): two matmuls. Backward costs twice this.
double ffn_flops(std::int64_t n, std::int64_t d, std::int64_t f);
/// FLOPs of the attention forward on n = batch*seq tokens of width d with inner width hd =
/// heads*head_dim: four projections plus the (seq x seq) score and weighted-sum matmuls per
/// sequence and head.
double attention_flops(std::int64_t n, std::int64_t seq, std::int64_t d, std::int64_t hd);
/// FLOPs of the attention core alone (attention_core_forward): the score matmul Q K^T and the
/// weighted sum P V, 2*n*seq*hd each, so 4*n*seq*hd. What selective recomputation reruns.
double attention_core_flops(std::int64_t n, std::int64_t seq, std::int64_t hd);

// ------------------------------------------------------------------------------------ linear
/// y = x W + b.  x (n, in), w (in, out), b (out) or size 0, y (n, out), overwritten.
void linear_forward(MatIn x, MatIn w, VecIn b, MatOut y);
/// Gradients of y = x W + b given dy (n, out).
/// dx (n, in) is overwritten (pass a 0x0 matrix to skip it); dw (in, out) and db (out) are
/// accumulated (+=), so micro-batches can sum into one gradient; db of size 0 skips the bias.
void linear_backward(MatIn x, MatIn w, MatIn dy, MatOut dx, MatOut dw, VecOut db);
/// The input half of linear_backward: dx (n, in) = dy W^T, overwritten. Same bits as the dx of
/// linear_backward. 2*n*in*out FLOPs.
void linear_backward_input(MatIn w, MatIn dy, MatOut dx);
/// The weight half of linear_backward: dw (in, out) += x^T dy and db (out) += the column sums of
/// dy (size 0 skips the bias). Same bits as the dw and db of linear_backward. 2*n*in*out FLOPs.
void linear_backward_weight(MatIn x, MatIn dy, MatOut dw, VecOut db);

// ------------------------------------------------------------------------------------ GELU
/// a = GELU(h), tanh approximation (as GPT-2). h and a have the same shape; a is overwritten.
void gelu_forward(MatIn h, MatOut a);
/// dh = GELU'(h) * da, elementwise; dh is overwritten and may not alias da.
void gelu_backward(MatIn h, MatIn da, MatOut dh);

// ------------------------------------------------------------------------------------ FFN
/// y = GELU(x W1 + b1) W2 + b2 (no residual: the block adds it).
/// x (n, d), w1 (d, f), b1 (f), w2 (f, d), b2 (d) or size 0 (a row-parallel shard adds it once).
/// Saves h = x W1 + b1 and a = GELU(h), both (n, f), for the backward pass; y (n, d) overwritten.
void ffn_forward(MatIn x, MatIn w1, VecIn b1, MatIn w2, VecIn b2, MatOut h, MatOut a, MatOut y);
/// Backward of ffn_forward. dx (n, d) overwritten; dw1, db1, dw2, db2 accumulated (+=).
void ffn_backward(MatIn x, MatIn w1, MatIn w2, MatIn h, MatIn a, MatIn dy, MatOut dx, MatOut dw1,
                  VecOut db1, MatOut dw2, VecOut db2);
/// The input half of ffn_backward (no weight gradients): dh (n, f), the gradient of the
/// pre-activation h = x W1 + b1, and dx (n, d), both overwritten. dh is what the weight half needs
/// besides x, a and dy. Same dx bits as ffn_backward.
void ffn_backward_input(MatIn w1, MatIn w2, MatIn h, MatIn dy, MatOut dh, MatOut dx);
/// The weight half of ffn_backward, from the saved x, a (n, f), dy (n, d) and the input half's dh:
/// dw1, db1, dw2, db2 accumulated (+=), the same bits as ffn_backward's.
void ffn_backward_weight(MatIn x, MatIn a, MatIn dy, MatIn dh, MatOut dw1, VecOut db1, MatOut dw2,
                         VecOut db2);

// ------------------------------------------------------------------------------------ attention
/// Multi-head self-attention without biases: y = concat_j softmax(Q_j K_j^T / sqrt(dh) [+ mask])
/// V_j  Wo. x (n, d) holds n = batch*seq tokens, sequence after sequence; heads split the inner
/// width hd = wq.cols() into heads blocks of dh = hd/heads columns. wq, wk, wv (d, hd), wo (hd, d).
/// A tensor-parallel shard passes its columns of wq/wk/wv, its rows of wo and its head count.
/// Saves q, k, v, o (n, hd) and the probabilities p (batch*heads*seq, seq) for backward.
/// It is the projections around attention_core_forward, which computes p and o.
/// @throws std::invalid_argument when n is not a multiple of seq or hd not a multiple of heads.
void attention_forward(MatIn x, std::int64_t seq, std::int64_t heads, bool causal, MatIn wq,
                       MatIn wk, MatIn wv, MatIn wo, MatOut q, MatOut k, MatOut v, MatOut p,
                       MatOut o, MatOut y);
/// Backward of attention_forward. dx (n, d) overwritten; dwq, dwk, dwv, dwo accumulated (+=).
void attention_backward(MatIn x, std::int64_t seq, std::int64_t heads, MatIn wq, MatIn wk, MatIn wv,
                        MatIn wo, MatIn q, MatIn k, MatIn v, MatIn p, MatIn o, MatIn dy, MatOut dx,
                        MatOut dwq, MatOut dwk, MatOut dwv, MatOut dwo);
/// The input half of attention_backward (no weight gradients, no x needed): the gradients dq, dk,
/// dv (n, hd) of the projections' outputs and dx (n, d), all overwritten; dq, dk, dv are what the
/// weight half needs besides x, o and dy. Includes the whole core backward, which has no weights.
/// Same dx bits as attention_backward.
/// @throws std::invalid_argument when the shapes do not fit.
void attention_backward_input(std::int64_t seq, std::int64_t heads, MatIn wq, MatIn wk, MatIn wv,
                              MatIn wo, MatIn q, MatIn k, MatIn v, MatIn p, MatIn dy, MatOut dq,
                              MatOut dk, MatOut dv, MatOut dx);
/// The weight half of attention_backward, from the saved x (n, d), o (n, hd), dy (n, d) and the
/// input half's dq, dk, dv: dwq, dwk, dwv, dwo accumulated (+=), the same bits as
/// attention_backward's.
void attention_backward_weight(MatIn x, MatIn o, MatIn dy, MatIn dq, MatIn dk, MatIn dv, MatOut dwq,
                               MatOut dwk, MatOut dwv, MatOut dwo);

/// The attention core, the part with no weights: per sequence and head, the probabilities
/// P = softmax(Q K^T / sqrt(dh) [+ causal mask]) and the weighted sum O = P V.
/// q, k, v (n, hd) with n = batch*seq; p (batch*heads*seq, seq) and o (n, hd) are overwritten.
/// A function of q, k and v alone, so it can be rerun in the backward instead of storing p
/// (selective activation recomputation, Korthikanti et al. 2022); same inputs, same bits.
/// @throws std::invalid_argument when the shapes do not fit.
void attention_core_forward(MatIn q, MatIn k, MatIn v, std::int64_t seq, std::int64_t heads,
                            bool causal, MatOut p, MatOut o);
/// Backward of attention_core_forward: from d_o (n, hd), the gradients dq, dk, dv (n, hd),
/// overwritten. Needs the probabilities p the forward produced (saved or recomputed).
void attention_core_backward(MatIn q, MatIn k, MatIn v, MatIn p, MatIn d_o, std::int64_t seq,
                             std::int64_t heads, MatOut dq, MatOut dk, MatOut dv);

// ------------------------------------------------------------------------------------ layer norm
/// Layer norm of every row (token) by itself: y = xhat * gamma + beta with xhat = (x - mean) *
/// rstd, the row's mean over its d columns and rstd = 1 / sqrt(var + eps) (the biased variance). x,
/// xhat, y (n, d); gamma, beta (d); rstd (n). xhat and rstd are saved for the backward; all three
/// outputs are overwritten. Rows never mix, so a block of rows gives exactly those rows of the
/// result.
/// @throws std::invalid_argument when the shapes do not fit or eps is not positive.
void layer_norm_forward(MatIn x, VecIn gamma, VecIn beta, float eps, MatOut xhat, VecOut rstd,
                        MatOut y);
/// Backward of layer_norm_forward given dy (n, d). dx (n, d) overwritten; dgamma += the column sums
/// of dy * xhat and dbeta += the column sums of dy, both over this call's rows only.
/// @throws std::invalid_argument when the shapes do not fit.
void layer_norm_backward(MatIn xhat, VecIn rstd, VecIn gamma, MatIn dy, MatOut dx, VecOut dgamma,
                         VecOut dbeta);

// ------------------------------------------------------------------------------------ losses
/// Mean squared error over every element: sum((y - t)^2) / (rows*cols). y, t (n, c).
double mse_forward(MatIn y, MatIn target);
/// dy = 2 (y - t) / (rows*cols) times scale; dy overwritten. scale lets a caller weight a slice.
void mse_backward(MatIn y, MatIn target, MatOut dy, float scale = 1.0f);
/// Softmax cross-entropy averaged over rows: logits (n, c), labels n values in [0, c).
/// @throws std::out_of_range for a label outside [0, c).
double cross_entropy_forward(MatIn logits, std::span<const std::int32_t> labels);
/// dlogits = (softmax(logits) - onehot(labels)) / n times scale; overwritten.
void cross_entropy_backward(MatIn logits, std::span<const std::int32_t> labels, MatOut dlogits,
                            float scale = 1.0f);

}  // namespace mgpu::model
