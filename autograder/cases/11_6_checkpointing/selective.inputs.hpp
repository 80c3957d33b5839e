// What the rank of 11.6's recompute_attention_core bound checks is given (selective.host.cpp makes
// it, selective.cpp's rank body reads it). The step bodies take step.inputs.hpp's StepInput.
#pragma once

#include "rank_code.hpp"

namespace mgpu::grade::checkpointing_cases {

/// The model's shape and the unit whose attention core is rebuilt.
struct CoreInput {
  mgpu::model::ModelConfig config;
  int unit = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreInput, config, unit)

}  // namespace mgpu::grade::checkpointing_cases
