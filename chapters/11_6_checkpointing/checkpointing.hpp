// 11.6 Activation checkpointing on one rank: the course model's forward and backward with a
// checkpoint every k blocks (the forward keeps only segment inputs; the backward recomputes one
// segment at a time from its checkpoint, as Chen et al. 2016), and selective recomputation of
// the attention core alone (Korthikanti et al. 2022). This is the contract of checkpointing.cpp;
// the given sizes and segments are in checkpointing_given.hpp.
#pragma once

#include "11_6_checkpointing/checkpointing_given.hpp"
#include "11_6_checkpointing/checks.hpp"
#include "11_6_checkpointing/formulas.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace mgpu::checkpointing {

/// Reruns the forward of segment `seg` from `checkpoint`, its input (tokens x d_model, in
/// Category::activations), this time keeping every block's activations: afterwards caches[i]
/// holds block seg.first + i's UnitCache, as after a plain unit_forward with a cache. Blocks count
/// from 0; block b is unit b + 1. `params` is the whole flat parameter buffer. After it returns,
/// of what this call received or made, Category::activations holds the caches' seg.count *
/// block_saved_bytes and nothing else: the checkpoint's memory is reused, never held twice, and
/// the segment's output is not kept.
/// (TODO recompute_segment)
/// @throws std::invalid_argument when caches.size() differs from seg.count (name both).
void recompute_segment(Rank& rank, const model::Model& model, std::span<const float> params,
                       Segment seg, Buffer<float> checkpoint, std::int64_t tokens,
                       std::vector<model::UnitCache>& caches);

/// Forward and backward over the whole model on `batch` with a checkpoint every `k` blocks;
/// returns the mean loss. Gradients are ACCUMULATED into `grads`, bitwise what
/// Model::forward_backward gives. Only the blocks are checkpointed: the embedding (unit 0) and
/// the head (unit L+1) keep their caches as in plain training.
///
/// What the runtime must show (L = n_layers):
/// - clock: every block's forward runs exactly twice, so the step is charged exactly the L
///   blocks' forward FLOPs more than Model::forward_backward, as "fwd block<b>" like the first
///   ones;
/// - ledger: checkpoints are tokens x d_model floats in Category::activations, and with d_in and
///   d_out at most d_model the peak of Category::activations is exactly
///     E + (floor(L/k) + 1) * C + k * B
///   with C = block_checkpoint_bytes, B = block_saved_bytes and E the embedding's saved input
///   (tokens x d_in floats). The README relates it to checkpointed_peak_bytes.
/// (TODOs checkpointed_forward and checkpointed_backward)
/// @throws std::invalid_argument when k is not in [1, L] (check_interval), or when params or
///         grads do not have model.num_params() elements.
double checkpointed_forward_backward(Rank& rank, const model::Model& model,
                                     std::span<const float> params, std::span<float> grads,
                                     const model::Batch& batch, std::int64_t k);

/// The checkpoint interval to use for `model` on `tokens` tokens: the k minimising
/// checkpointed_peak_bytes for its L blocks, checkpoint size block_checkpoint_bytes and segment
/// cost block_saved_bytes per block (the smallest such k on a tie).
/// (TODO best_interval)
std::int64_t best_interval(const model::Model& model, std::int64_t tokens);

// ------------------------------------------------------------------------------------ selective
// Selective recomputation (Korthikanti et al. 2022): every block keeps what its backward needs
// except the attention core, the (seq x seq) probabilities p and the weighted sums o = p v,
// which are rebuilt from the saved q, k, v before the block's backward. The course model has no
// dropout, so the core is the score matmul, the softmax and the weighted sum.

/// Rebuilds the attention core of block unit `u` (1 to L) whose forward saved its cache with
/// model::Save::without_attention_core, so that model.unit_backward can run on `cache`.
/// Afterwards cache.p ((tokens * n_heads, seq_len) floats) and cache.o ((tokens, d_model) floats)
/// hold, bit for bit, what the forward computed and dropped, in Category::activations, and the
/// clock has been charged attention_core_recompute_flops as "recompute attention core <unit
/// name>". A model without attention has no core: nothing is allocated or charged.
/// (TODO recompute_attention_core)
/// @throws std::invalid_argument when u is not a block (0 is the embedding, L + 1 the head), or
///         when the cache holds no saved forward (cache.filled is false).
void recompute_attention_core(Rank& rank, const model::Model& model, int u,
                              model::UnitCache& cache);

/// Forward and backward over the whole model on `batch` with selective recomputation; returns
/// the mean loss. Gradients are ACCUMULATED into `grads`, bitwise what Model::forward_backward
/// gives. Every block stores what its backward needs except its attention core.
///
/// What the runtime must show: with A = attention_core_bytes, B = block_saved_bytes,
/// C = block_checkpoint_bytes, E the embedding's saved input (tokens x d_in floats) and D the
/// loss gradient (tokens x d_out floats), d_in and d_out at most d_model, the ledger's peak of
/// Category::activations is exactly
///   E + L * (B - A) + 2 C + max(A, D)
/// against E + L * B + 2 C + D for Model::forward_backward (so at most one core is held at any
/// time); the clock is charged exactly L times attention_core_recompute_flops more than the plain
/// step, all of it as "recompute attention core ...".
/// (TODO selective_forward_backward)
/// @throws std::invalid_argument when params or grads do not have model.num_params() elements.
double selective_forward_backward(Rank& rank, const model::Model& model,
                                  std::span<const float> params, std::span<float> grads,
                                  const model::Batch& batch);

}  // namespace mgpu::checkpointing
