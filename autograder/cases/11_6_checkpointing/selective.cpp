// The rank bodies of 11.6's selective recomputation cases (selective.host.cpp holds the cases):
// a measured step, plain or with the attention cores recomputed, and recompute_attention_core on
// a unit whose bounds the case checks.
#include <cstdint>
#include <utility>

#include "11_6_checkpointing/checkpointing.hpp"
#include "rank_code.hpp"
#include "selective.inputs.hpp"
#include "step.inputs.hpp"

using namespace mgpu::grade::checkpointing_cases;
namespace ck = mgpu::checkpointing;
namespace model = mgpu::model;

// One measured step: plain, or with the attention cores recomputed (in.selective).
MGPU_RANK_BODY("11_6.selective_step", StepInput) {
  publish_step(
      rank, in, [&](const model::Model& net, const model::Batch& batch, auto params, auto grads) {
        return in.selective ? ck::selective_forward_backward(rank, net, params, grads, batch)
                            : net.forward_backward(rank, params, grads, batch);
      });
}

// recompute_attention_core on unit in.unit, with a cache a forward filled: a block's forward
// without the core where the unit is a block, else one marked filled as the embedding's or the
// head's forward would have left it.
MGPU_RANK_BODY("11_6.recompute_attention_core", CoreInput) {
  const model::Model net(in.config);
  const int blocks = static_cast<int>(net.config().n_layers);
  const int u = in.unit;
  model::Replica rep = net.make_replica(rank.memory(), 1);
  model::UnitCache cache;
  cache.filled = true;  // a cache the embedding's or head's forward would have filled
  if (u >= 1 && u <= blocks) {
    const std::int64_t tokens = net.config().seq_len;
    mgpu::Buffer<float> x(rank.memory(), mgpu::Category::activations,
                          static_cast<std::size_t>(tokens * net.config().d_model), "x");
    x = net.unit_forward(rank, u, net.unit_view(rep.params.span(), u), std::move(x), tokens, &cache,
                         model::Save::without_attention_core);
  }
  ck::recompute_attention_core(rank, net, u, cache);
}
