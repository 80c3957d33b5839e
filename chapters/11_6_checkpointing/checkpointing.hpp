// 11.6 Activation checkpointing on one rank: the course model's forward and backward with a
// checkpoint every k blocks (the forward keeps only segment inputs; the backward recomputes one
// segment at a time from its checkpoint, as Chen et al. 2016), and selective recomputation of
// the attention core alone (Korthikanti et al. 2022).
#pragma once

#include "11_6_checkpointing/checks.hpp"
#include "11_6_checkpointing/formulas.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mgpu::checkpointing {

/// Given: the bytes of one checkpoint, a block's input (tokens, d_model) in fp32. It is also the
/// size of the gradient flowing between blocks.
inline std::size_t block_checkpoint_bytes(const model::Model& model, std::int64_t tokens) {
  return static_cast<std::size_t>(tokens * model.config().d_model) * sizeof(float);
}

/// Given: the bytes one block keeps for its backward when nothing is recomputed, i.e. what
/// UnitCache::bytes() reports after its unit_forward: the input x (tokens, d_model); with
/// attention q, k, v, o (tokens, d_model each), the probabilities (tokens, heads * seq_len)
/// and the mid-block residual (tokens, d_model); then the FFN's h and a (tokens, d_ff each).
inline std::size_t block_saved_bytes(const model::Model& model, std::int64_t tokens) {
  const model::ModelConfig& c = model.config();
  std::int64_t per_token = c.d_model + 2 * c.d_ff;
  if (c.attention) per_token += 5 * c.d_model + c.n_heads * c.seq_len;
  return static_cast<std::size_t>(tokens * per_token) * sizeof(float);
}

/// Given: the segment of the blocks that starts at block `first` (blocks count from 0, block b
/// is unit b + 1), `count` blocks long.
struct Segment {
  int first = 0;  ///< first block of the segment
  int count = 0;  ///< number of blocks in it
};

/// Given: the segments of `blocks` blocks with a checkpoint every `k`: [0, k), [k, 2k), ...; the
/// last one holds the remainder when k does not divide `blocks`.
/// @throws std::invalid_argument when k is not in [1, blocks] (check_interval).
inline std::vector<Segment> segments(std::int64_t blocks, std::int64_t k) {
  check_interval("segments", blocks, k);
  std::vector<Segment> out;
  for (std::int64_t first = 0; first < blocks; first += k)
    out.push_back({static_cast<int>(first), static_cast<int>(std::min(k, blocks - first))});
  return out;
}

/// Reruns the forward of segment `seg` from its checkpoint, this time keeping every block's
/// activations: afterwards caches[i] holds block seg.first + i's UnitCache, as after a plain
/// unit_forward with a cache.
///
/// TODO 7 of 11.6. Move `checkpoint` (the segment's input, tokens x d_model, Category::activations)
/// into the first block's unit_forward, so the checkpoint becomes that block's saved input
/// instead of a second copy; chain the outputs through the segment; drop the last output (the
/// next segment's checkpoint already holds it). `params` is the whole flat parameter buffer.
/// @throws std::invalid_argument when caches.size() differs from seg.count (name both).
void recompute_segment(Rank& rank, const model::Model& model, std::span<const float> params,
                       Segment seg, Buffer<float> checkpoint, std::int64_t tokens,
                       std::vector<model::UnitCache>& caches);

/// Forward and backward over the whole model on `batch` with a checkpoint every `k` blocks;
/// returns the mean loss. Gradients are ACCUMULATED into `grads`, bitwise what
/// Model::forward_backward gives (the recomputed activations are the same bits, and the
/// backward runs the same kernels in the same order).
///
/// TODO 8 of 11.6.
/// - forward: the embedding (unit 0) and the head (unit L+1) run with a cache as usual. Before
///   the first block of each segment, copy its input into a checkpoint buffer
///   (Category::activations, tokens x d_model); run every block without a cache (nullptr), so
///   its internals are freed as soon as it returns.
/// - loss: Model::loss_backward on the head output, then free the output.
/// - backward: head backward; then for each segment from last to first, recompute_segment from
///   its checkpoint (moved, not copied), then unit_backward through its blocks from last to
///   first; finally the embedding's backward.
///
/// Every block's forward therefore runs twice: the extra compute is L block forwards, charged
/// to the clock as "fwd block<b>" like the first ones. With d_in and d_out at most d_model,
/// the peak of Category::activations is exactly
///   E + (floor(L/k) + 1) * C + k * B
///   = checkpointed_peak_bytes(L, k, C, B) + E + C - (ceil(L/k) - floor(L/k)) * C
/// with C = block_checkpoint_bytes, B = block_saved_bytes and E the embedding's saved input
/// (tokens x d_in floats). It is reached in the backward of the last full segment: the
/// checkpoints before it, its k caches (the first holding its own checkpoint, so the formula's
/// separate count of it is one C too many), and the incoming and outgoing gradients (2 C).
/// @throws std::invalid_argument when k is not in [1, L] (check_interval), or when params or
///         grads do not have model.num_params() elements.
double checkpointed_forward_backward(Rank& rank, const model::Model& model,
                                     std::span<const float> params, std::span<float> grads,
                                     const model::Batch& batch, std::int64_t k);

/// The checkpoint interval to use for `model` on `tokens` tokens: the k minimising
/// checkpointed_peak_bytes for its L blocks, checkpoint size block_checkpoint_bytes and segment
/// cost block_saved_bytes per block. Near sqrt(L * C / B), smaller than sqrt(L) because a
/// checkpoint is much smaller than a block's saved activations.
///
/// TODO 9 of 11.6. One call to best_checkpoint_interval_bytes.
std::int64_t best_interval(const model::Model& model, std::int64_t tokens);

// ------------------------------------------------------------------------------------ selective
// Selective recomputation (Korthikanti et al. 2022): every block keeps what its backward needs
// except the attention core, the (seq x seq) probabilities p and the weighted sums o = p v,
// which are rebuilt from the saved q, k, v just before the block's backward. The course model
// has no dropout, so the core is the score matmul, the softmax and the weighted sum.

/// Given: the bytes of one block's attention core, what selective recomputation stops storing:
/// the probabilities p (tokens, heads * seq_len) and the weighted sums o (tokens, d_model), in
/// fp32. 0 for a model without attention.
inline std::size_t attention_core_bytes(const model::Model& model, std::int64_t tokens) {
  const model::ModelConfig& c = model.config();
  if (!c.attention) return 0;
  return static_cast<std::size_t>(tokens * (c.n_heads * c.seq_len + c.d_model)) * sizeof(float);
}

/// Given: the FLOPs of rerunning one block's attention core on `tokens` tokens: its two matmuls,
/// Q K^T and P V, model::attention_core_flops = 4 * tokens * seq_len * d_model. 0 without
/// attention.
inline double attention_core_recompute_flops(const model::Model& model, std::int64_t tokens) {
  const model::ModelConfig& c = model.config();
  return c.attention ? model::attention_core_flops(tokens, c.seq_len, c.d_model) : 0.0;
}

/// Rebuilds the attention core of block unit `u` (1 to L) from the q, k, v its forward saved
/// with model::Save::without_attention_core, so that model.unit_backward can run on `cache`.
///
/// TODO 10 of 11.6. Allocate cache.p ((tokens * n_heads, seq_len) floats) and cache.o
/// ((tokens, d_model) floats) under Category::activations, fill them with
/// model::attention_core_forward (the model's seq_len, n_heads and causal flag), and charge
/// attention_core_recompute_flops to the rank's clock as "recompute attention core <unit name>".
/// The rebuilt p and o are bitwise the ones the forward computed and dropped. A model without
/// attention has no core: return without allocating or charging anything.
/// @throws std::invalid_argument when u is not a block (0 is the embedding, L + 1 the head), or
///         when the cache holds no saved forward (cache.filled is false).
void recompute_attention_core(Rank& rank, const model::Model& model, int u,
                              model::UnitCache& cache);

/// Forward and backward over the whole model on `batch` with selective recomputation; returns
/// the mean loss. Gradients are ACCUMULATED into `grads`, bitwise what Model::forward_backward
/// gives (the core is rerun on the same q, k, v bits by the same kernel).
///
/// TODO 11 of 11.6. Every unit runs with a cache as in Model::forward_backward, the blocks with
/// model::Save::without_attention_core; the backward rebuilds a block's core
/// (recompute_attention_core) right before that block's unit_backward, never earlier, so at
/// most one core is held at a time. With A = attention_core_bytes, B = block_saved_bytes,
/// C = block_checkpoint_bytes, E the embedding's saved input (tokens x d_in floats) and D the
/// loss gradient (tokens x d_out floats), d_in and d_out at most d_model, the ledger's
/// activation peak is exactly
///   E + L * (B - A) + 2 C + max(A, D)
/// against E + L * B + 2 C + D for Model::forward_backward: every cache without its core, plus
/// the last block's rebuilt core and the gradients in and out of its backward (or, without
/// attention, the head's backward with the loss gradient, as in plain training). The clock is
/// charged L times attention_core_recompute_flops more than the plain step.
/// @throws std::invalid_argument when params or grads do not have model.num_params() elements.
double selective_forward_backward(Rank& rank, const model::Model& model,
                                  std::span<const float> params, std::span<float> grads,
                                  const model::Batch& batch);

}  // namespace mgpu::checkpointing
