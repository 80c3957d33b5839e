// 11.6 reference: the course model's forward and backward with a checkpoint every k blocks, each
// segment recomputed from its checkpoint just before its backward; and selective recomputation,
// where only the attention core is dropped in the forward and rebuilt before each block's backward.
#include "11_6_checkpointing/checkpointing.hpp"

#include "mgpu/tensor.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace mgpu::checkpointing {

void recompute_segment(Rank& rank, const model::Model& model, std::span<const float> params,
                       Segment seg, Buffer<float> checkpoint, std::int64_t tokens,
                       std::vector<model::UnitCache>& caches) {
  if (caches.size() != static_cast<std::size_t>(seg.count))
    throw std::invalid_argument("recompute_segment: caches holds " + std::to_string(caches.size()) +
                                " entries but the segment starting at block " +
                                std::to_string(seg.first) + " has " + std::to_string(seg.count) +
                                " blocks; pass one cache per block");
  Buffer<float> x = std::move(checkpoint);
  for (int i = 0; i < seg.count; ++i) {
    const int u = seg.first + i + 1;
    x = model.unit_forward(rank, u, model.unit_view(params, u), std::move(x), tokens,
                           &caches[static_cast<std::size_t>(i)]);
  }
  // x is now the segment's output: the next checkpoint (or the head's input) already held it.
}

double checkpointed_forward_backward(Rank& rank, const model::Model& model,
                                     std::span<const float> params, std::span<float> grads,
                                     const model::Batch& batch, std::int64_t k) {
  const std::int64_t blocks = model.config().n_layers;
  const std::vector<Segment> segs = segments(blocks, k);
  if (params.size() != model.num_params() || grads.size() != model.num_params())
    throw std::invalid_argument(
        "checkpointed_forward_backward: params has " + std::to_string(params.size()) +
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
    Buffer<float> cp(rank.memory(), Category::activations, x.size(),
                     "checkpoint" + std::to_string(seg.first));
    std::copy(x.begin(), x.end(), cp.begin());
    checkpoints.push_back(std::move(cp));
    for (int b = seg.first; b < seg.first + seg.count; ++b)
      x = model.unit_forward(rank, b + 1, model.unit_view(params, b + 1), std::move(x), tokens,
                             nullptr);
  }
  x = model.unit_forward(rank, head, model.unit_view(params, head), std::move(x), tokens,
                         &head_cache);

  Buffer<float> d(rank.memory(), Category::activations, x.size(), "dloss");
  const double loss = model.loss_backward(x.span(), batch, d.span());
  x.reset();

  // Backward: the head, then each segment recomputed and back-propagated, last to first.
  d = model.unit_backward(rank, head, model.unit_view(params, head), model.unit_view(grads, head),
                          head_cache, d.span());
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
  d = model.unit_backward(rank, 0, model.unit_view(params, 0), model.unit_view(grads, 0),
                          embed_cache, d.span());
  return loss;
}

std::int64_t best_interval(const model::Model& model, std::int64_t tokens) {
  return best_checkpoint_interval_bytes(model.config().n_layers,
                                        static_cast<double>(block_checkpoint_bytes(model, tokens)),
                                        static_cast<double>(block_saved_bytes(model, tokens)));
}

void recompute_attention_core(Rank& rank, const model::Model& model, int u,
                              model::UnitCache& cache) {
  const model::ModelConfig& c = model.config();
  if (u < 1 || u > c.n_layers)
    throw std::invalid_argument("recompute_attention_core: unit " + std::to_string(u) +
                                " is not a block; blocks are units 1 to " +
                                std::to_string(c.n_layers) +
                                " (0 is the embedding, the last the head)");
  if (!cache.filled)
    throw std::invalid_argument("recompute_attention_core: the cache of " + model.unit(u).name +
                                " is empty; run its unit_forward with a cache first");
  if (!c.attention) return;  // an FFN-only block has no core
  const auto n = static_cast<std::size_t>(cache.tokens), d = static_cast<std::size_t>(c.d_model);
  const auto heads = static_cast<std::size_t>(c.n_heads), seq = static_cast<std::size_t>(c.seq_len);
  const std::string& name = model.unit(u).name;
  cache.p = Buffer<float>(rank.memory(), Category::activations, n * heads * seq, name + ".p");
  cache.o = Buffer<float>(rank.memory(), Category::activations, n * d, name + ".o");
  const auto q = std::span<const float>(cache.q.span()), k = std::span<const float>(cache.k.span()),
             v = std::span<const float>(cache.v.span());
  model::attention_core_forward(
      as_matrix(q, n, d), as_matrix(k, n, d), as_matrix(v, n, d), c.seq_len, c.n_heads, c.causal,
      as_matrix(cache.p.span(), n * heads, seq), as_matrix(cache.o.span(), n, d));
  rank.compute(attention_core_recompute_flops(model, cache.tokens),
               "recompute attention core " + name);
}

double selective_forward_backward(Rank& rank, const model::Model& model,
                                  std::span<const float> params, std::span<float> grads,
                                  const model::Batch& batch) {
  if (params.size() != model.num_params() || grads.size() != model.num_params())
    throw std::invalid_argument(
        "selective_forward_backward: params has " + std::to_string(params.size()) + " and grads " +
        std::to_string(grads.size()) + " elements, the model has " +
        std::to_string(model.num_params()) + "; pass the model's flat buffers");
  const std::int64_t tokens = batch.tokens();
  const int units = model.num_units();
  auto is_block = [&](int u) { return u >= 1 && u < units - 1; };

  // Forward: every unit keeps its cache; the blocks drop their attention core.
  std::vector<model::UnitCache> caches(static_cast<std::size_t>(units));
  Buffer<float> x = model.input(rank, batch);
  for (int u = 0; u < units; ++u)
    x = model.unit_forward(
        rank, u, model.unit_view(params, u), std::move(x), tokens,
        &caches[static_cast<std::size_t>(u)],
        is_block(u) ? model::Save::without_attention_core : model::Save::everything);

  Buffer<float> d(rank.memory(), Category::activations, x.size(), "dloss");
  const double loss = model.loss_backward(x.span(), batch, d.span());
  x.reset();

  // Backward: a block's core comes back just before its backward, which frees it with the cache.
  for (int u = units - 1; u >= 0; --u) {
    model::UnitCache& cache = caches[static_cast<std::size_t>(u)];
    if (is_block(u)) recompute_attention_core(rank, model, u, cache);
    d = model.unit_backward(rank, u, model.unit_view(params, u), model.unit_view(grads, u), cache,
                            d.span());
  }
  return loss;
}

}  // namespace mgpu::checkpointing
