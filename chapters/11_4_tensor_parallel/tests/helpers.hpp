// What the 11.4 test programs share: random inputs, the largest difference of two matrices, the
// fp32 tolerance and the tensor-parallel group every test runs in.
#pragma once

#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>

#include <cmath>
#include <cstdint>
#include <span>

#include "11_4_tensor_parallel/tensor_parallel.hpp"

namespace tp_test {

using mgpu::tensor_parallel::MatIn;
using mgpu::tensor_parallel::MatrixRM;

/// A (rows, cols) matrix of N(0, 1) draws from model::Rng(seed).
inline MatrixRM random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  MatrixRM m(rows, cols);
  mgpu::model::Rng rng(seed);
  rng.fill_normal(std::span<float>(m.data(), static_cast<std::size_t>(m.size())), 1.0);
  return m;
}

/// The largest |a - b| over the entries (mgpu_test's, on matrices; infinite when the shapes
/// differ). Safe in a rank's thread, unlike doctest's assertions.
inline double max_abs_diff(MatIn a, MatIn b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return INFINITY;
  return mgpu_test::max_abs_diff(a.reshaped(), b.reshaped());
}

/// fp32 tolerance for sums of a few dozen products of O(1) numbers.
inline constexpr double kTol = 1e-5;

/// A tensor-parallel group of t ranks; the cluster holds two such groups side by side (ranks
/// [0, t) and [t, 2t)), so every test also checks that a group talks only to itself.
inline mgpu::Comm tp_group(mgpu::Rank& r, int t) {
  return r.world().split(r.id() / t, r.id() % t, "tp");
}

}  // namespace tp_test
