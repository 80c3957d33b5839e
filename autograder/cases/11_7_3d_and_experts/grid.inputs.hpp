// What each rank of 11.7's process-grid cases is given (grid.host.cpp makes it, grid.cpp's rank
// bodies read it): the layout, the same on every rank. step3d.inputs.hpp reuses its serialiser.
#pragma once

#include "11_7_3d_and_experts/formulas.hpp"
#include "rank_code.hpp"

namespace mgpu::layout {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Layout, tp, pp, dp)
}  // namespace mgpu::layout
