// What each rank of 11.7's ring-attention cases is given (context_parallel.host.cpp makes it,
// context_parallel.cpp's rank body reads it): the shape, and the rows of q, k, v and d_out at the
// positions the rank holds, nothing of the other ranks' positions.
#pragma once

#include "11_7_3d_and_experts/context_parallel.hpp"
#include "mgpu/model/layers.hpp"
#include "rank_code.hpp"

namespace mgpu::context {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CpShape, seq, heads, split)
}  // namespace mgpu::context

namespace mgpu::grade::cases_11_7 {

struct RingInput {
  mgpu::context::CpShape shape;
  mgpu::model::MatrixRM q, k, v, d_out;  // (sequences * s/c, width): this rank's rows
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RingInput, shape, q, k, v, d_out)

}  // namespace mgpu::grade::cases_11_7
