// What the 11.2 training tests share: the small course model they train, its weight seed and
// the Adam settings, so that fp32 and bf16 runs start from the same point.
#pragma once

#include <cstdint>

#include "mgpu/model/model.hpp"
#include "mgpu/model/optim.hpp"

namespace dp_test {

/// A three-block model small enough to train on 8 simulated ranks in milliseconds.
inline mgpu::model::ModelConfig small_config() {
  mgpu::model::ModelConfig c;
  c.d_in = 6;
  c.d_model = 16;
  c.d_ff = 32;
  c.n_layers = 3;
  c.n_heads = 2;
  c.seq_len = 4;
  c.d_out = 3;
  return c;
}

inline constexpr std::uint64_t kWeightSeed = 7;           ///< every replica's initial weights
inline const mgpu::model::AdamConfig kAdam{.lr = 1e-2f};  ///< large enough to move the weights

}  // namespace dp_test
