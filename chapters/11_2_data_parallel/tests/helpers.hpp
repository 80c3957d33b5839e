// What the 11.2 training tests share: the small course model they train, its weight seed and
// the Adam settings, so that fp32 and bf16 runs start from the same point.
#pragma once

#include <cstdint>

#include "mgpu/model/model.hpp"
#include "mgpu/model/optim.hpp"

namespace dp_test {

/// A three-block model small enough to train on 8 simulated ranks in milliseconds.
inline mgpu::model::ModelConfig small_config() {
  return mgpu::model::ModelConfig{
      .d_in = 6, .d_model = 16, .d_ff = 32, .n_layers = 3, .n_heads = 2, .seq_len = 4, .d_out = 3};
}

inline constexpr std::uint64_t kWeightSeed = 7;           ///< every replica's initial weights
inline const mgpu::model::AdamConfig kAdam{.lr = 1e-2f};  ///< large enough to move the weights

}  // namespace dp_test
