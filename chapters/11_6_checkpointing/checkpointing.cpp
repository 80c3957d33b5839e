// 11.6 activation checkpointing: your implementation. Keep only segment inputs in the forward,
// recompute each segment from its checkpoint just before its backward; or keep everything but
// the attention core and rebuild that alone (selective recomputation).
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_6 <id>` gives hints for it.
#include "11_6_checkpointing/checkpointing.hpp"

#include "mgpu/tensor.hpp"  // as_matrix

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace mgpu::checkpointing {

void recompute_segment(Rank& rank, const model::Model& model, std::span<const float> params,
                       Segment seg, Buffer<float> checkpoint, std::int64_t tokens,
                       std::vector<model::UnitCache>& caches) {
  // TODO(11.6 recompute_segment): afterwards caches[i] is what a plain cached forward leaves for
  //   block seg.first + i, and the checkpoint's memory was reused rather than copied, so no
  //   activation is held twice. A caches vector of the wrong size throws, naming both sizes.
  //   The model's units are the embedding (unit 0), then the blocks in order, then the head.
  //   Calls: model.unit_forward, model.unit_view.
  throw NotImplemented("11.6 recompute_segment");
}

double checkpointed_forward_backward(Rank& rank, const model::Model& model,
                                     std::span<const float> params, std::span<float> grads,
                                     const model::Batch& batch, std::int64_t k) {
  // TODO(11.6 checkpointed_forward): the forward keeps only the segments' inputs (under
  //   Category::activations) and the embedding's and head's caches; blocks run without a cache,
  //   so the memory between blocks is the checkpoints plus the current activation. segments(L, k)
  //   (given) rejects a bad k; wrong span sizes throw. Calls: model.input, model.unit_forward
  //   with or without a model::UnitCache, model.loss_backward.
  // TODO(11.6 checkpointed_backward): gradients and loss bitwise those of
  //   Model::forward_backward (runtime), each block's forward run exactly twice in the step,
  //   and the ledger's activation peak the header's formula for every k. Calls:
  //   model.unit_backward, your recompute_segment.
  // The forward is a rung of its own: once it runs, end it with
  //   throw NotImplemented("11.6 checkpointed_backward");
  // and the forward's test passes while the backward's still name what is left.
  throw NotImplemented("11.6 checkpointed_forward");
}

std::int64_t best_interval(const model::Model& model, std::int64_t tokens) {
  // TODO(11.6 best_interval): the interval with the lowest predicted peak for this model and
  //   `tokens`, using your formulas and the given byte helpers of checkpointing_given.hpp.
  throw NotImplemented("11.6 best_interval");
}

void recompute_attention_core(Rank& rank, const model::Model& model, int u,
                              model::UnitCache& cache) {
  // TODO(11.6 recompute_attention_core): afterwards cache.p and cache.o hold, bit for bit, what
  //   the block's forward computed and dropped, in ledger-tracked activations, and the clock has
  //   been charged the core's FLOPs under "recompute attention core <unit name>". The core needs
  //   only the saved q, k, v (its inputs) and the model's shape; a model without attention has
  //   nothing to rebuild; a unit that is not a block, or an empty cache, throws.
  //   Calls: model::attention_core_forward, mgpu::as_matrix, attention_core_recompute_flops
  //   (given).
  throw NotImplemented("11.6 recompute_attention_core");
}

double selective_forward_backward(Rank& rank, const model::Model& model,
                                  std::span<const float> params, std::span<float> grads,
                                  const model::Batch& batch) {
  // TODO(11.6 selective_forward_backward): gradients and loss bitwise those of
  //   Model::forward_backward, the blocks storing their activations without the attention core,
  //   and at most one core held at any time in the backward. Wrong span sizes throw.
  //   Calls: model.input, model.unit_forward (its last argument says what a block saves),
  //   model.loss_backward, your recompute_attention_core, model.unit_backward.
  throw NotImplemented("11.6 selective_forward_backward");
}

}  // namespace mgpu::checkpointing
