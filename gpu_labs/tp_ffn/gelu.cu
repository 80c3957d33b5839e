// Lab tp_ffn: YOUR GELU kernels. Spec in gelu.hpp. Write one __global__ kernel each (a
// grid-stride loop like those in common/kernels.cu) and launch it from these host functions.
#include "tp_ffn/gelu.hpp"

#include <mgpu/not_implemented.hpp>

namespace mgpu::gpu {

// TODO(gpu tp_ffn gelu_forward): a kernel computing a = gelu(h) in fp32 (__bfloat162float,
// tanhf, __float2bfloat16_rn), launched on `stream`, then MGPU_CUDA_CHECK_LAUNCH().
void gelu_forward(const bf16* h, bf16* a, std::size_t count, cudaStream_t stream) {
  (void)h, (void)a, (void)count, (void)stream;
  throw mgpu::NotImplemented("gpu tp_ffn gelu_forward");
}

// TODO(gpu tp_ffn gelu_backward): dh = da * gelu'(h). With u = k (x + 0.044715 x^3) and
// t = tanh(u): gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2).
// Read da[i] before writing dh[i]: they may be the same buffer.
void gelu_backward(const bf16* h, const bf16* da, bf16* dh, std::size_t count, cudaStream_t stream) {
  (void)h, (void)da, (void)dh, (void)count, (void)stream;
  throw mgpu::NotImplemented("gpu tp_ffn gelu_backward");
}

}  // namespace mgpu::gpu
