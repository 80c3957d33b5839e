// What each rank of 11.7's 3D-step cases is given (step3d.host.cpp makes it, step3d.cpp's rank
// bodies read it): the model, the layout, the seed of the weights and the global batch, the
// same on every rank. train_step_3d's contract has every rank called with the whole global batch
// (each dp replica takes its own sequences from it), so the batch's seed is no other rank's
// private data; the weights are the ones every rank draws from one seed (make_state_3d).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grid.inputs.hpp"
#include "rank_code.hpp"

namespace mgpu::grade::cases_11_7 {

struct Step3dInput {
  mgpu::model::ModelConfig config;
  mgpu::layout::Layout layout;
  std::uint64_t seed = 0;        // of the weights (make_state_3d)
  std::int64_t sequences = 0;    // in the global batch
  std::uint64_t batch_seed = 0;  // the global batch: Model::make_batch(sequences, batch_seed)
  int micro_batches = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Step3dInput, config, layout, seed, sequences, batch_seed,
                                   micro_batches)

/// one_f_one_b_order's arguments.
struct OrderInput {
  int stage = 0, stages = 1, micro_batches = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OrderInput, stage, stages, micro_batches)

/// one_f_one_b_order's value: (forward?, micro-batch) per entry.
using Order = std::vector<std::pair<bool, int>>;

}  // namespace mgpu::grade::cases_11_7
