// Shared helpers of the runtime tests: deterministic per-rank data and a naive reduction.
#pragma once

#include "mgpu/mgpu.hpp"

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

/// Largest |a - b| as double (0 for equal vectors).
template <class T>
double max_abs_diff(const std::vector<T>& a, const std::vector<T>& b) {
  double m = a.size() == b.size() ? 0.0 : 1e300;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  }
  return m;
}

}  // namespace mgpu::test
