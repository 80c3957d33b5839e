// 11.4 Tensor parallelism: how much of each matrix a rank holds, and what a tensor-parallel
// transformer block communicates (Megatron-LM, Shoeybi et al. 2019).
// The running tensor-parallel chapter measures its ledger and traffic meter against these.
#pragma once

#include <cstdint>

#include "mgpu/course.hpp"  // TransformerShape

/// Section 11.4: tensor (intra-layer) parallelism.
namespace mgpu::tensor_parallel {

/// Which passes of a block to count.
enum class Pass {
  forward,   ///< the forward pass only
  backward,  ///< the backward pass only
  both,      ///< forward and backward
};

/// Parameters one rank holds of an FFN  x -> phi(x W1) W2  split t ways (weights only, no
/// biases): W1 (hidden x ffn_hidden) by columns and W2 (ffn_hidden x hidden) by rows, so each
/// rank holds hidden*ffn_hidden/t of each: 2 * hidden * ffn_hidden / t.
/// For the usual ffn_hidden = 4 * hidden that is 8 h^2 / t. Summed over the t ranks it is the
/// unsplit FFN's 2 * hidden * ffn_hidden.
/// @throws std::invalid_argument when hidden, ffn_hidden or t is below 1, or t does not divide
///         ffn_hidden ("t=3 does not divide ffn_hidden=4096: each rank needs a whole number of
///         columns of W1").
double ffn_params_per_rank(std::int64_t hidden, std::int64_t ffn_hidden, std::int64_t t);

/// Parameters one rank holds of a multi-head attention block split t ways by heads (weights
/// only, no biases): the heads/t heads' columns of W_Q, W_K and W_V (each hidden x hidden) and
/// the matching rows of W_O (hidden x hidden): 4 * hidden^2 / t.
/// @throws std::invalid_argument when hidden, heads or t is below 1, heads does not divide
///         hidden, or t does not divide heads ("t=3 does not divide heads=32: each rank takes
///         whole heads").
double attention_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t t);

/// Parameters one rank holds of a transformer block: attention_params_per_rank +
/// ffn_params_per_rank + the block's two layer norms (a gain and a bias of hidden values each:
/// 4 * hidden). The layer norms are replicated, every rank holds them whole, so that last term
/// does not shrink with t. Biases are left out, as in the layers.
/// Example: hidden 2048, 16 heads, ffn_hidden 8192, t = 8: 12 * 2048^2 / 8 + 4 * 2048 = 6299648.
/// @throws std::invalid_argument as the two functions it adds.
double block_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t ffn_hidden,
                             std::int64_t t);

/// All-reduces a tensor-parallel block performs per micro-batch: one after attention and one
/// after the FFN in the forward pass (summing the partial outputs), and one for each in the
/// backward pass (summing the partial input gradients): 2 forward, 2 backward, 4 both.
/// With sequence parallelism each all-reduce becomes a reduce-scatter plus an all-gather of the
/// same total volume, so the counts and bytes below still apply.
std::int64_t all_reduces_per_block(Pass pass);

/// Payload of one of those all-reduces: the block's activation for one micro-batch,
/// seq * micro_batch * hidden elements of `bytes_per_element` bytes.
/// @throws std::invalid_argument when seq, micro_batch or hidden is below 1, or
///         bytes_per_element is not positive.
double all_reduce_payload_bytes(const TransformerShape& shape, double bytes_per_element);

/// Bytes one rank sends for one block and one micro-batch in `pass` with a ring all-reduce over
/// the t ranks: all_reduces_per_block(pass) * 2 (t - 1)/t * all_reduce_payload_bytes.
/// t = 1 sends nothing.
/// @throws std::invalid_argument when t is below 1, or as all_reduce_payload_bytes.
double block_bytes_sent_per_rank(const TransformerShape& shape, std::int64_t t,
                                 double bytes_per_element, Pass pass);

}  // namespace mgpu::tensor_parallel
