// What each rank of 11.3's running ZeRO cases is given (zero.host.cpp makes it, zero.cpp's rank
// bodies read it): the model's shape, the stage and its switches, the seed the weights and the
// batches come from. Every rank builds the same global batch from the seed because the contract
// of zero_step hands each rank the whole batch and has it pick its own slice (zero_local_batch);
// the weights are replicated from the same seed before make_zero_state keeps this rank's shard.
#pragma once

#include <cstdint>

#include "11_3_zero/zero.hpp"
#include "rank_code.hpp"

namespace mgpu::grade {

/// A run of `steps` ZeRO steps on the course model.
struct ZeroTrainInput {
  mgpu::model::ModelConfig config;
  int stage = 0;
  bool prefetch = false;  // stage 3: post the next unit's gather early
  bool overlap = false;   // stage 2: reduce-scatters in flight during the backward
  mgpu::zero::Precision precision = mgpu::zero::Precision::fp32;
  int steps = 0;
  std::int64_t sequences = 0;  // in the global batch
  std::uint64_t seed = 0;      // of the weights; the batches use seed + 100 + step
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ZeroTrainInput, config, stage, prefetch, overlap, precision,
                                   steps, sequences, seed)

/// The model (and, for make_zero_state, the stage) of one of zero_rejects' bad calls.
struct ZeroRejectInput {
  mgpu::model::ModelConfig config;
  int stage = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ZeroRejectInput, config, stage)

}  // namespace mgpu::grade
