// What the student calls of 11.6's checkpointing cases are given (checkpointing.host.cpp makes
// it, checkpointing.cpp reads it). The step bodies take step.inputs.hpp's StepInput.
#pragma once

#include <cstdint>

#include "rank_code.hpp"

namespace mgpu::grade::checkpointing_cases {

/// best_interval's arguments: the model's shape and the tokens per micro-batch.
struct IntervalInput {
  mgpu::model::ModelConfig config;
  std::int64_t tokens = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(IntervalInput, config, tokens)

}  // namespace mgpu::grade::checkpointing_cases
