// The named course-model shapes that chapter tests and graded cases share, each defined once so
// that "tiny" or "overlap" means the same model wherever a test or a case's grid point says it.
// Each name says what the shape is for; the sizes follow from that purpose.
#pragma once

#include <cstdint>

#include "mgpu/model/model.hpp"

namespace mgpu_test::configs {

/// The smallest course model: its head holds 3 parameters (d_model 2, d_out 1), so on 4 or more
/// ranks the last ranks own none of it, and no unit splits evenly over 4 to 8 ranks.
inline mgpu::model::ModelConfig tiny() {
  return {
      .d_in = 3, .d_model = 2, .d_ff = 4, .n_layers = 1, .n_heads = 1, .seq_len = 2, .d_out = 1};
}

/// A small model whose parameter count is not a multiple of 3 (a user that depends on it checks
/// it), so a ring that only handles lengths divisible by the rank count fails on 3 ranks.
inline mgpu::model::ModelConfig uneven() {
  return {
      .d_in = 5, .d_model = 8, .d_ff = 16, .n_layers = 2, .n_heads = 2, .seq_len = 3, .d_out = 2};
}

/// The model of the overlap tests and cases (11.2's buckets, 11.3's prefetch), with `layers`
/// blocks: large enough that communication and compute take comparable time on a slow cluster.
inline mgpu::model::ModelConfig overlap(std::int64_t layers) {
  return {.d_in = 6,
          .d_model = 32,
          .d_ff = 128,
          .n_layers = layers,
          .n_heads = 2,
          .seq_len = 4,
          .d_out = 3};
}

/// A small model whose shape comes from `draw` (a graded case's Ctx, or anything with
/// uniform_int(lo, hi) and pick({...})): 1, 2 or 4 heads, d_model 2 to 6 per head,
/// d_ff = 2 d_model, 1 to 4 blocks, sequences of 2 to 5 tokens. The draws happen in a fixed order
/// (d_in, heads, width, blocks, tokens, outputs), so a seed names one shape.
template <class Draw>
mgpu::model::ModelConfig drawn(Draw& draw) {
  const std::int64_t d_in = draw.uniform_int(3, 8);
  const std::int64_t n_heads = draw.pick({1, 2, 4});
  const std::int64_t d_model = n_heads * draw.uniform_int(2, 6);
  const std::int64_t n_layers = draw.uniform_int(1, 4);
  const std::int64_t seq_len = draw.uniform_int(2, 5);
  const std::int64_t d_out = draw.uniform_int(1, 4);
  return {.d_in = d_in,
          .d_model = d_model,
          .d_ff = 2 * d_model,
          .n_layers = n_layers,
          .n_heads = n_heads,
          .seq_len = seq_len,
          .d_out = d_out};
}

}  // namespace mgpu_test::configs
