// Graded case of 11.7's expert capacity, which runs whole in the student's program, and the rank
// body of the expert-parallel MoE layer cases in moe.host.cpp.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "11_7_3d_and_experts/moe.hpp"
#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "model_inputs.hpp"
#include "moe.inputs.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::cases_11_7;
namespace ex = mgpu::experts;
using mgpu::model::MatrixRM;

// One forward and two backward passes (the second checks that gradients accumulate) of this
// rank's share of the layer drawn from in.seed, on its own tokens. A non-empty in.router replaces
// the drawn one, to force a routing. A rank may be a process of its own: it publishes its
// results, and the bytes of each pass come from checkpoints the cluster's side records after it.
MGPU_RANK_BODY("11_7.moe", MoeInput) {
  const auto h = static_cast<std::size_t>(in.config.hidden);
  const Eigen::Index T = in.x.rows();
  mgpu::Comm& ep = rank.world();
  ex::MoeLayer layer = ex::make_moe_layer(rank, ep, in.config, in.seed);
  if (in.router.size() != 0)
    mgpu::as_matrix(layer.router, h, static_cast<std::size_t>(in.config.experts)) = in.router;
  MatrixRM y(T, in.config.hidden), dx_first(T, in.config.hidden), dx_second(T, in.config.hidden);
  ex::MoeCache cache = ex::moe_forward(rank, ep, layer, in.x, y);
  rank.checkpoint("forward");
  ex::moe_backward(rank, ep, layer, in.x, cache, in.dy1, dx_first);
  rank.checkpoint("backward");
  ex::moe_backward(rank, ep, layer, in.x, cache, in.dy2, dx_second);
  publish_matrix(rank, "y", y);
  publish_matrix(rank, "dx_first", dx_first);
  publish_matrix(rank, "dx_second", dx_second);
  publish_value(rank, "dropped", static_cast<double>(cache.routing.dropped));
  publish_value(rank, "local_experts", static_cast<double>(layer.local_experts));
  publish_matrix(rank, "drouter",
                 mgpu::as_matrix(layer.drouter, h, static_cast<std::size_t>(in.config.experts)));
  publish_matrix(rank, "dw",
                 mgpu::as_matrix(layer.dw, static_cast<std::size_t>(layer.local_experts) * h, h));
}

MGPU_CASE("11_7.expert_capacity") {
  // Fixed points, each bound at its inside end (no tokens; top_k == experts, every expert taken)
  // and a share that is not whole (rounded up), then a draw.
  const std::int64_t experts = ctx.pick<std::int64_t>({4, 8, 16});
  ctx.emit("capacity", std::vector<double>{static_cast<double>(ex::expert_capacity(0, 2, 8, 1.25)),
                                           static_cast<double>(ex::expert_capacity(12, 8, 8, 1.0)),
                                           static_cast<double>(ex::expert_capacity(10, 1, 8, 1.25)),
                                           static_cast<double>(ex::expert_capacity(
                                               ctx.uniform_int(1, 4096),
                                               ctx.uniform_int(1, static_cast<int>(experts)),
                                               experts, ctx.pick({1.0, 1.25, 2.0})))});
  // Just outside each end: top_k of 0 and above the experts, a negative token count, a factor of
  // 0. A check from one side only lets the other through as a capacity.
  ctx.emit_rejects("rejects_top_k_zero", [] { ex::expert_capacity(16, 0, 8, 1.0); });
  ctx.emit_rejects("rejects_top_k_above_experts", [] { ex::expert_capacity(16, 9, 8, 1.0); });
  ctx.emit_rejects("rejects_negative_tokens", [] { ex::expert_capacity(-1, 2, 8, 1.0); });
  ctx.emit_rejects("rejects_zero_factor", [] { ex::expert_capacity(16, 2, 8, 0.0); });
}
