// Lab tp_ffn, the exercise: a tensor-parallel feed-forward block y = GELU(x W1) W2 on t GPUs,
// W1 split by columns and W2 by rows (Megatron-LM), forward and backward, one all-reduce each.
// The contract for gpu_labs/tp_ffn/tp_ffn.cpp (skeleton) and its reference solution.
#pragma once

#include "common/comm.hpp"
#include "common/device_buffer.hpp"
#include "common/gemm.hpp"

namespace mgpu::gpu {

/// Sizes of the block: `tokens` rows (batch x sequence), model width `d`, hidden width `f`.
struct FfnShape {
  int tokens = 0;  ///< B: rows of x
  int d = 0;       ///< model width
  int f = 0;       ///< hidden width (4d in GPT-style models); divisible by the rank count
};

/// What one rank holds: its weight blocks, their gradients, and what forward saves for backward.
/// The harness allocates every buffer (with fl = f / t) and fills the weights.
struct TpFfnRank {
  DeviceBuffer<bf16> w1;   ///< (d, fl)  columns [r fl, (r+1) fl) of W1           (weights)
  DeviceBuffer<bf16> w2;   ///< (fl, d)  rows    [r fl, (r+1) fl) of W2           (weights)
  DeviceBuffer<bf16> dw1;  ///< (d, fl)  gradient of w1                             (grads)
  DeviceBuffer<bf16> dw2;  ///< (fl, d)  gradient of w2                             (grads)
  DeviceBuffer<bf16> h;    ///< (B, fl)  x w1, saved by forward                     (activations)
  DeviceBuffer<bf16> a;    ///< (B, fl)  GELU(h), saved by forward                  (activations)
  DeviceBuffer<bf16> da;   ///< (B, fl)  backward scratch: dL/da, then dL/dh        (activations)
};

/// Forward on this rank: h = x w1; a = GELU(h); y = a w2 summed over ranks (one all-reduce).
/// Every GEMM is gemm() (common/gemm.hpp): bf16 operands, fp32 accumulation, bf16 results.
/// @param x (B, d) the full input, the same on every rank.
/// @param y (B, d) output; on return (once the stream has run) the full y on every rank.
/// Work is enqueued on comm.stream() (the stream `cublas` is bound to); nothing synchronises.
void tp_ffn_forward(DeviceComm& comm, cublasHandle_t cublas, const FfnShape& shape, TpFfnRank& p,
                    const bf16* x, bf16* y);

/// Backward on this rank, after tp_ffn_forward with the same x:
/// dw2 = a^T dy; da = dy w2^T; dh = da * GELU'(h); dw1 = x^T dh; dx = dh w1^T summed over
/// ranks (one all-reduce).
/// @param dy (B, d) gradient of the loss with respect to y, the same on every rank.
/// @param dx (B, d) output: the full gradient with respect to x on every rank.
void tp_ffn_backward(DeviceComm& comm, cublasHandle_t cublas, const FfnShape& shape, TpFfnRank& p,
                     const bf16* x, const bf16* dy, bf16* dx);

}  // namespace mgpu::gpu
