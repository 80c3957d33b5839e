// Lab tp_ffn, harness: the float64 CPU reference of the unsplit FFN (Eigen), and the host-side
// data the lab feeds both sides. The GPU result is checked against this by relative error.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <vector>

namespace mgpu::gpu {

/// Row-major float64 matrix, the layout of the device buffers.
using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the form the kernels use.
double gelu_ref(double x);
/// d gelu / dx.
double gelu_grad_ref(double x);

/// y = gelu(x w1) w2; also returns h = x w1 (the saved pre-activation).
/// x (B, d), w1 (d, f), w2 (f, d) -> h (B, f), y (B, d).
void ffn_forward_ref(const Eigen::Ref<const MatD>& x, const Eigen::Ref<const MatD>& w1,
                     const Eigen::Ref<const MatD>& w2, Eigen::Ref<MatD> h, Eigen::Ref<MatD> y);

/// Gradients of <y, dy> for the block above: dx (B, d), dw1 (d, f), dw2 (f, d).
void ffn_backward_ref(const Eigen::Ref<const MatD>& x, const Eigen::Ref<const MatD>& w1,
                      const Eigen::Ref<const MatD>& w2, const Eigen::Ref<const MatD>& dy,
                      Eigen::Ref<MatD> dx, Eigen::Ref<MatD> dw1, Eigen::Ref<MatD> dw2);

/// A (rows, cols) matrix of N(0, stddev^2) values rounded to bf16 (so the GPU and the reference
/// start from identical numbers), from a fixed seed.
MatD random_bf16_matrix(int rows, int cols, double stddev, std::uint32_t seed);

/// Columns [c0, c0 + n) of m: W1's block for one rank.
MatD column_block(const MatD& m, int c0, int n);
/// Rows [r0, r0 + n) of m: W2's block for one rank.
MatD row_block(const MatD& m, int r0, int n);

/// m's elements, row-major, as raw bf16 bits (the device layout). Values must be bf16-exact or
/// are rounded to nearest even.
std::vector<std::uint16_t> to_bf16_bits(const MatD& m);
/// Inverse of to_bf16_bits for a (rows, cols) matrix.
MatD from_bf16_bits(const std::vector<std::uint16_t>& bits, int rows, int cols);

}  // namespace mgpu::gpu
