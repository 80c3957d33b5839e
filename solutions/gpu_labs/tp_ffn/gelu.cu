// Lab tp_ffn, reference: GELU (tanh form) and its derivative, bf16 in and out, fp32 inside.
#include "tp_ffn/gelu.hpp"

namespace mgpu::gpu {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr int kThreads = 256;

unsigned blocks_for(std::size_t count) {
  const std::size_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? (b == 0 ? 1 : b) : 65536);
}

__global__ void gelu_forward_kernel(const bf16* h, bf16* a, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float x = __bfloat162float(h[i]);
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    a[i] = __float2bfloat16_rn(0.5f * x * (1.0f + t));
  }
}

__global__ void gelu_backward_kernel(const bf16* h, const bf16* da, bf16* dh, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float x = __bfloat162float(h[i]);
    const float g = __bfloat162float(da[i]);  // read before dh[i] is written: they may alias
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dh[i] = __float2bfloat16_rn(g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du));
  }
}

}  // namespace

void gelu_forward(const bf16* h, bf16* a, std::size_t count, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(h, a, count);
  MGPU_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const bf16* h, const bf16* da, bf16* dh, std::size_t count,
                   cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(h, da, dh, count);
  MGPU_CUDA_CHECK_LAUNCH();
}

}  // namespace mgpu::gpu
