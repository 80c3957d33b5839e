// Rank-ordered reductions for float, double and bf16 (bf16 accumulates in float).
// Work goes block by block through a small accumulator that stays in cache while the n inputs
// stream through it; reading every input of a block before writing any output makes in-place
// all_reduce safe. Two-rank groups, the common and bandwidth-critical case, get a fused loop.
#include "kernels.hpp"

#include "mgpu/bf16.hpp"

#include <algorithm>

namespace mgpu::detail {

namespace {

template <class A>
A combine(ReduceOp op, A x, A y) {
  return op == ReduceOp::max ? std::max(x, y) : x + y;
}

// Two inputs in one pass: into both outputs (all_reduce on 2, `y` the second output) or into
// one (reduce_scatter on 2, `y` unused).
template <class T, class A, bool kBothOutputs>
void reduce_pair(ReduceOp op, const T* a, const T* b, T* x, T* y, std::size_t len, bool avg) {
  for (std::size_t j = 0; j < len; ++j) {
    A s = combine(op, A(a[j]), A(b[j]));
    if (avg) s /= A(2);
    x[j] = T(s);
    if constexpr (kBothOutputs) y[j] = T(s);
  }
}

// Any n and nouts, a block at a time through an accumulator that stays in cache.
template <class T, class A>
void reduce_blocked(ReduceOp op, const unsigned char* const* ins_b, int n,
                    unsigned char* const* outs_b, int nouts, std::size_t len, bool avg) {
  auto in = [&](int r) { return reinterpret_cast<const T*>(ins_b[r]); };
  auto out = [&](int k) { return reinterpret_cast<T*>(outs_b[k]); };
  constexpr std::size_t kBlock = 4096;
  const A nn = A(n);
  A acc[kBlock];
  for (std::size_t b = 0; b < len; b += kBlock) {
    const std::size_t m = std::min(kBlock, len - b);
    const T* in0 = in(0) + b;
    if (n >= 2) {
      const T* in1 = in(1) + b;
      for (std::size_t j = 0; j < m; ++j) acc[j] = combine(op, A(in0[j]), A(in1[j]));
    } else {
      for (std::size_t j = 0; j < m; ++j) acc[j] = A(in0[j]);
    }
    for (int r = 2; r < n; ++r) {
      const T* x = in(r) + b;
      if (op == ReduceOp::max) {
        for (std::size_t j = 0; j < m; ++j) acc[j] = std::max(acc[j], A(x[j]));
      } else {
        for (std::size_t j = 0; j < m; ++j) acc[j] += A(x[j]);
      }
    }
    // Divide rather than multiply by 1/n so avg is the correctly rounded quotient of the sum.
    if (avg)
      for (std::size_t j = 0; j < m; ++j) acc[j] /= nn;
    for (int k = 0; k < nouts; ++k) {
      T* o = out(k) + b;
      for (std::size_t j = 0; j < m; ++j) o[j] = T(acc[j]);
    }
  }
}

template <class T>
void reduce_typed(ReduceOp op, const unsigned char* const* ins_b, int n,
                  unsigned char* const* outs_b, int nouts, std::size_t len) {
  using A = typename ElementTraits<T>::Accum;
  auto in = [&](int r) { return reinterpret_cast<const T*>(ins_b[r]); };
  auto out = [&](int k) { return reinterpret_cast<T*>(outs_b[k]); };
  const bool avg = op == ReduceOp::avg && n > 1;
  if (n == 2 && nouts == 2)
    reduce_pair<T, A, true>(op, in(0), in(1), out(0), out(1), len, avg);
  else if (n == 2 && nouts == 1)
    reduce_pair<T, A, false>(op, in(0), in(1), out(0), nullptr, len, avg);
  else
    reduce_blocked<T, A>(op, ins_b, n, outs_b, nouts, len, avg);
}

}  // namespace

void reduce_slice(DType dtype, ReduceOp op, const unsigned char* const* ins, int n,
                  unsigned char* const* outs, int nouts, std::size_t len) {
  switch (dtype) {
    case DType::f32:
      reduce_typed<float>(op, ins, n, outs, nouts, len);
      break;
    case DType::f64:
      reduce_typed<double>(op, ins, n, outs, nouts, len);
      break;
    case DType::bf16:
      reduce_typed<bf16>(op, ins, n, outs, nouts, len);
      break;
  }
}

}  // namespace mgpu::detail
