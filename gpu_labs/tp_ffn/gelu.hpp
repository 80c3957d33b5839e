// Lab tp_ffn, the exercise's kernels: GELU and its derivative on bf16 buffers, computed in fp32.
// The tanh form of Hendrycks & Gimpel (2016), as in GPT-2:
//   gelu(x) = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2 / pi).
// The host reference is gelu_ref / gelu_grad_ref in reference.hpp.
#pragma once

#include "common/check.hpp"
#include "common/dtype.hpp"

#include <cstddef>

namespace mgpu::gpu {

/// a[i] = gelu(h[i]) for i < count; enqueued on `stream`.
void gelu_forward(const bf16* h, bf16* a, std::size_t count, cudaStream_t stream);

/// dh[i] = da[i] * gelu'(h[i]) for i < count; dh may be da (in place). Enqueued on `stream`.
void gelu_backward(const bf16* h, const bf16* da, bf16* dh, std::size_t count, cudaStream_t stream);

}  // namespace mgpu::gpu
