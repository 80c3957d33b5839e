// Lab zero3, harness: float64 CPU references for the linear stack and for Adam, so the GPU
// reference step can itself be checked on a machine with a GPU, and the maths tested without one.
#pragma once

#include "common/kernels.hpp"

#include <vector>

namespace mgpu::gpu {

/// One Adam step in float64 (same formula as adam_step, common/kernels.hpp); `step` from 1.
void adam_step_ref(std::vector<double>& master, std::vector<double>& m, std::vector<double>& v,
                   const std::vector<double>& grad, const AdamConfig& cfg, int step);

/// Loss 0.5 / rows * |x W_0 ... W_{L-1} - target|^2 and its gradient with respect to every
/// W_l, in float64. x and target (rows, d) row-major; weights (L, d, d) row-major.
double linear_stack_loss_grad(const std::vector<double>& weights, const std::vector<double>& x,
                              const std::vector<double>& target, int layers, int d, int rows,
                              std::vector<double>& grad);

}  // namespace mgpu::gpu
