// What each rank of 11.7's MoE cases is given (moe.host.cpp makes it, moe.cpp's rank body reads
// it): the layer's shape and seed and, where a case forces a routing, the router, which every
// rank holds whole in the exercise (it is replicated); then the rank's own T tokens and their
// two output gradients, nothing of the other ranks' tokens.
#pragma once

#include <cstdint>

#include "11_7_3d_and_experts/moe.hpp"
#include "mgpu/model/layers.hpp"
#include "rank_code.hpp"

namespace mgpu::experts {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MoeConfig, hidden, experts, top_k, capacity_factor)
}  // namespace mgpu::experts

namespace mgpu::grade::cases_11_7 {

struct MoeInput {
  mgpu::experts::MoeConfig config;
  std::uint64_t seed = 0;             // of the layer's unsplit weights (make_moe_layer)
  mgpu::model::MatrixRM router;       // (h, E) replacing the drawn router; empty: the drawn one
  mgpu::model::MatrixRM x, dy1, dy2;  // (T, h): this rank's tokens and their output gradients
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MoeInput, config, seed, router, x, dy1, dy2)

}  // namespace mgpu::grade::cases_11_7
