// Shared helpers of the runtime tests: deterministic per-rank data and a naive reduction.
#pragma once

#include "mgpu/mgpu.hpp"
#include "mgpu_test/compare.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace mgpu::test {

/// A value that differs by rank and index, exactly representable in float and double.
template <class T>
T value(int rank, std::size_t i) {
  const auto k = (static_cast<std::size_t>(rank) * 7919u + i * 104729u) % 1000u;
  return T(float(k) / 64.0f - 7.0f);
}

/// The reduction of value<T>(r, i) over ranks 0..n-1, computed the obvious way in rank order.
template <class T>
T naive_reduce(const std::vector<std::vector<T>>& in, std::size_t i, ReduceOp op) {
  using A = typename ElementTraits<T>::Accum;
  A acc = A(in[0][i]);
  for (std::size_t r = 1; r < in.size(); ++r) {
    acc = op == ReduceOp::max ? std::max(acc, A(in[r][i])) : acc + A(in[r][i]);
  }
  if (op == ReduceOp::avg) acc /= A(in.size());
  return T(acc);
}

using mgpu_test::max_abs_diff;  // the largest |a - b|, infinite for different sizes

}  // namespace mgpu::test
