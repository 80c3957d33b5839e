// 11.6 activation checkpointing: your implementation. Keep only segment inputs in the forward,
// recompute each segment from its checkpoint just before its backward.
#include "11_6_checkpointing/checkpointing.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace mgpu::checkpointing {

void recompute_segment(Rank& rank, const model::Model& model, std::span<const float> params, Segment seg,
                       Buffer<float> checkpoint, std::int64_t tokens, std::vector<model::UnitCache>& caches) {
  // TODO(11.6 recompute_segment): reject caches.size() != seg.count. x = std::move(checkpoint);
  //   for block i of the segment (unit u = seg.first + i + 1):
  //   x = model.unit_forward(rank, u, model.unit_view(params, u), std::move(x), tokens, &caches[i]);
  //   the final x is not needed (let it go out of scope).
  throw NotImplemented("11.6 recompute_segment");
}

double checkpointed_forward_backward(Rank& rank, const model::Model& model, std::span<const float> params,
                                     std::span<float> grads, const model::Batch& batch, std::int64_t k) {
  // TODO(11.6 checkpointed_forward_backward): segments(L, k) checks k; check both span sizes.
  //   Forward: x = model.input(rank, batch); unit 0 with a UnitCache; per segment copy x into
  //   Buffer<float>(rank.memory(), Category::activations, x.size(), "checkpoint") and keep it,
  //   then its blocks with nullptr; the head (unit L+1) with a UnitCache.
  //   Loss: d (same size as the output) = gradient from model.loss_backward; reset the output.
  //   Backward: d = model.unit_backward(...) for the head; segments last to first:
  //   recompute_segment(..., std::move(checkpoints[s]), ...), unit_backward through its blocks
  //   last to first; then unit 0. Model::forward_backward (runtime) is the plain version.
  throw NotImplemented("11.6 checkpointed_forward_backward");
}

std::int64_t best_interval(const model::Model& model, std::int64_t tokens) {
  // TODO(11.6 best_interval): best_checkpoint_interval_bytes(n_layers, block_checkpoint_bytes,
  //   block_saved_bytes), the sizes converted to double.
  throw NotImplemented("11.6 best_interval");
}

}  // namespace mgpu::checkpointing
