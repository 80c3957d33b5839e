// What the 11.2 training tests share: the small course model they train, its weight seed and
// the Adam settings, so that fp32 and bf16 runs start from the same point, and the check that
// every replica holds the same values.
#pragma once

#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_where.hpp>

#include <cstdint>
#include <string>
#include <vector>

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

/// Every rank's values bit for bit rank 0's (one check, naming the first rank that differs).
inline void check_replicas_identical(const std::string& name,
                                     const std::vector<std::vector<float>>& v) {
  const auto where = mgpu_test::model_tensors(mgpu::model::Model(small_config()));
  mgpu_test::RankChecks same(static_cast<int>(v.size()));
  for (std::size_t r = 1; r < v.size(); ++r)
    same.compare_bits(static_cast<int>(r), name, v[r], v[0], {.where = where});
  INFO(name << " of every rank against rank 0's, bit for bit");
  same.check();
}

}  // namespace dp_test
