// 11.6 given code: the sizes the ledger must show (a checkpoint, a block's saved activations, an
// attention core), the FLOPs of rerunning a core, and the segments of a checkpoint interval. Read
// checkpointing.hpp for the functions you write.
#pragma once

#include "11_6_checkpointing/checks.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/model.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mgpu::checkpointing {

/// The bytes of one checkpoint, a block's input (tokens, d_model) in fp32. It is also the
/// size of the gradient flowing between blocks.
inline std::size_t block_checkpoint_bytes(const model::Model& model, std::int64_t tokens) {
  return static_cast<std::size_t>(tokens * model.config().d_model) * sizeof(float);
}

/// The bytes one block keeps for its backward when nothing is recomputed, i.e. what
/// UnitCache::bytes() reports after its unit_forward: the input x (tokens, d_model); with
/// attention q, k, v, o (tokens, d_model each), the probabilities (tokens, heads * seq_len)
/// and the mid-block residual (tokens, d_model); then the FFN's h and a (tokens, d_ff each).
inline std::size_t block_saved_bytes(const model::Model& model, std::int64_t tokens) {
  const model::ModelConfig& c = model.config();
  std::int64_t per_token = c.d_model + 2 * c.d_ff;
  if (c.attention) per_token += 5 * c.d_model + c.n_heads * c.seq_len;
  return static_cast<std::size_t>(tokens * per_token) * sizeof(float);
}

/// The segment of the blocks that starts at block `first` (blocks count from 0, block b
/// is unit b + 1), `count` blocks long.
struct Segment {
  int first = 0;  ///< first block of the segment
  int count = 0;  ///< number of blocks in it
};

/// The segments of `blocks` blocks with a checkpoint every `k`: [0, k), [k, 2k), ...; the
/// last one holds the remainder when k does not divide `blocks`.
/// @throws std::invalid_argument when k is not in [1, blocks] (check_interval).
inline std::vector<Segment> segments(std::int64_t blocks, std::int64_t k) {
  check_interval("segments", blocks, k);
  std::vector<Segment> out;
  for (std::int64_t first = 0; first < blocks; first += k)
    out.push_back({static_cast<int>(first), static_cast<int>(std::min(k, blocks - first))});
  return out;
}

/// The bytes of one block's attention core, what selective recomputation stops storing:
/// the probabilities p (tokens, heads * seq_len) and the weighted sums o (tokens, d_model), in
/// fp32. 0 for a model without attention.
inline std::size_t attention_core_bytes(const model::Model& model, std::int64_t tokens) {
  const model::ModelConfig& c = model.config();
  if (!c.attention) return 0;
  return static_cast<std::size_t>(tokens * (c.n_heads * c.seq_len + c.d_model)) * sizeof(float);
}

/// The FLOPs of rerunning one block's attention core on `tokens` tokens: its two matmuls,
/// Q K^T and P V, model::attention_core_flops = 4 * tokens * seq_len * d_model. 0 without
/// attention.
inline double attention_core_recompute_flops(const model::Model& model, std::int64_t tokens) {
  const model::ModelConfig& c = model.config();
  return c.attention ? model::attention_core_flops(tokens, c.seq_len, c.d_model) : 0.0;
}

}  // namespace mgpu::checkpointing
