// The model the step-time tests price: a GPT of the Megatron papers' sequence length and
// vocabulary, in the size the test asks for.
#pragma once

#include <cstdint>

#include "plan/step_time.hpp"

namespace tools_test {

/// A GPT of `layers` layers of width `hidden` with `heads` heads, sequence 2048, vocabulary
/// 51200, `batch` sequences per step.
inline mgpu::planner::RunModel gpt(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                   std::int64_t batch) {
  return {.layers = layers,
          .hidden = hidden,
          .heads = heads,
          .seq = 2048,
          .vocab = 51200,
          .global_batch = batch};
}

}  // namespace tools_test
