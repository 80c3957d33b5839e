// 11.6 reference: the course model's forward and backward with a checkpoint every k blocks, each
// segment recomputed from its checkpoint just before its backward.
#include "11_6_checkpointing/checkpointing.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace mgpu::checkpointing {

void recompute_segment(Rank& rank, const model::Model& model, std::span<const float> params, Segment seg,
                       Buffer<float> checkpoint, std::int64_t tokens, std::vector<model::UnitCache>& caches) {
  if (caches.size() != static_cast<std::size_t>(seg.count))
    throw std::invalid_argument("recompute_segment: caches holds " + std::to_string(caches.size()) +
                                " entries but the segment starting at block " + std::to_string(seg.first) +
                                " has " + std::to_string(seg.count) + " blocks; pass one cache per block");
  Buffer<float> x = std::move(checkpoint);
  for (int i = 0; i < seg.count; ++i) {
    const int u = seg.first + i + 1;
    x = model.unit_forward(rank, u, model.unit_view(params, u), std::move(x), tokens,
                           &caches[static_cast<std::size_t>(i)]);
  }
  // x is now the segment's output: the next checkpoint (or the head's input) already held it.
}

double checkpointed_forward_backward(Rank& rank, const model::Model& model, std::span<const float> params,
                                     std::span<float> grads, const model::Batch& batch, std::int64_t k) {
  const std::int64_t blocks = model.config().n_layers;
  const std::vector<Segment> segs = segments(blocks, k);
  if (params.size() != model.num_params() || grads.size() != model.num_params())
    throw std::invalid_argument("checkpointed_forward_backward: params has " + std::to_string(params.size()) +
                                " and grads " + std::to_string(grads.size()) + " elements, the model has " +
                                std::to_string(model.num_params()) + "; pass the model's flat buffers");
  const std::int64_t tokens = batch.tokens();
  const int head = model.num_units() - 1;

  // Forward: keep the segment inputs only.
  model::UnitCache embed_cache, head_cache;
  std::vector<Buffer<float>> checkpoints;
  Buffer<float> x = model.input(rank, batch);
  x = model.unit_forward(rank, 0, model.unit_view(params, 0), std::move(x), tokens, &embed_cache);
  for (const Segment& seg : segs) {
    Buffer<float> cp(rank.memory(), Category::activations, x.size(), "checkpoint" + std::to_string(seg.first));
    std::copy(x.begin(), x.end(), cp.begin());
    checkpoints.push_back(std::move(cp));
    for (int b = seg.first; b < seg.first + seg.count; ++b)
      x = model.unit_forward(rank, b + 1, model.unit_view(params, b + 1), std::move(x), tokens, nullptr);
  }
  x = model.unit_forward(rank, head, model.unit_view(params, head), std::move(x), tokens, &head_cache);

  Buffer<float> d(rank.memory(), Category::activations, x.size(), "dloss");
  const double loss = model.loss_backward(x.span(), batch, d.span());
  x.reset();

  // Backward: the head, then each segment recomputed and back-propagated, last to first.
  d = model.unit_backward(rank, head, model.unit_view(params, head), model.unit_view(grads, head), head_cache,
                          d.span());
  for (auto s = segs.size(); s-- > 0;) {
    const Segment seg = segs[s];
    std::vector<model::UnitCache> caches(static_cast<std::size_t>(seg.count));
    recompute_segment(rank, model, params, seg, std::move(checkpoints[s]), tokens, caches);
    checkpoints.pop_back();
    for (int i = seg.count - 1; i >= 0; --i) {
      const int u = seg.first + i + 1;
      d = model.unit_backward(rank, u, model.unit_view(params, u), model.unit_view(grads, u),
                              caches[static_cast<std::size_t>(i)], d.span());
    }
  }
  d = model.unit_backward(rank, 0, model.unit_view(params, 0), model.unit_view(grads, 0), embed_cache, d.span());
  return loss;
}

std::int64_t best_interval(const model::Model& model, std::int64_t tokens) {
  return best_checkpoint_interval_bytes(model.config().n_layers,
                                        static_cast<double>(block_checkpoint_bytes(model, tokens)),
                                        static_cast<double>(block_saved_bytes(model, tokens)));
}

}  // namespace mgpu::checkpointing
