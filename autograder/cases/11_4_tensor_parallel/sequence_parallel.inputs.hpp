// What each rank of 11.4's sequence-parallel cases is given (sequence_parallel.host.cpp makes it,
// sequence_parallel.cpp's rank bodies read it). Outside the block a rank holds only its own
// token_rows of the activations, so it gets its own rows of x and dy and never another rank's;
// the weights it builds its shard of (or its copy of the layer norm's gain and bias) from the seed
// every rank shares.
#pragma once

#include <cstdint>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "rank_code.hpp"

namespace mgpu::grade::sp_cases {

using mgpu::tensor_parallel::MatrixRM;

// A sequence-parallel FFN's rank: the shape and seed of make_tp_ffn, and its m rows of x and dy
// (m, h).
struct SpFfnInput {
  std::int64_t hidden = 0, ffn_hidden = 0;
  std::uint64_t seed = 0;
  MatrixRM x_shard, dy_shard;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpFfnInput, hidden, ffn_hidden, seed, x_shard, dy_shard)

// A sequence-parallel attention's rank: the shape and seed of make_tp_attention, seq tokens per
// sequence, and its m rows of x and dy (m, h).
struct SpAttentionInput {
  std::int64_t hidden = 0, heads = 0, seq = 0;
  std::uint64_t seed = 0;
  bool causal = true;
  MatrixRM x_shard, dy_shard;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpAttentionInput, hidden, heads, seq, seed, causal, x_shard,
                                   dy_shard)

// A sequence-parallel layer norm's rank: the width and seed of make_sp_layer_norm, and its m rows
// of x and dy (m, h) for each micro-batch.
struct SpLayerNormInput {
  std::int64_t hidden = 0;
  std::uint64_t seed = 0;
  std::vector<MatrixRM> x_shards, dy_shards;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpLayerNormInput, hidden, seed, x_shards, dy_shards)

// The sizes a rejects case builds a block of (no data: the shapes are what is wrong).
struct FfnSizes {
  std::int64_t hidden = 0, ffn_hidden = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FfnSizes, hidden, ffn_hidden)

// An attention of `heads` heads and width `hidden` given shards of x `cols` wide, `seq` tokens per
// sequence.
struct AttentionSizes {
  std::int64_t hidden = 0, heads = 0, cols = 0, seq = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AttentionSizes, hidden, heads, cols, seq)

// token_rows(n, rank, t).
struct TokenRowsArgs {
  std::int64_t n = 0;
  int rank = 0, t = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TokenRowsArgs, n, rank, t)

}  // namespace mgpu::grade::sp_cases
