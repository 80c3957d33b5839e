// Lab tp_ffn: YOUR GELU kernels. Spec in gelu.hpp. Write one __global__ kernel each (a
// grid-stride loop like those in common/kernels.cu) and launch it from these host functions.
// A TODO's id is the last word in its parentheses: `./mgpu hint tp_ffn <id>` gives hints for it.
#include "tp_ffn/gelu.hpp"

#include <mgpu/not_implemented.hpp>

namespace mgpu::gpu {

// TODO(gpu tp_ffn gelu_forward): a[i] = gelu(h[i]) (gelu.hpp) for every i < count, any count
// (0 and counts larger than one launch's threads included), arithmetic in fp32 and one rounding
// to bf16. Enqueued on `stream`, never synchronising; MGPU_CUDA_CHECK_LAUNCH() after the launch.
void gelu_forward(const bf16* h, bf16* a, std::size_t count, cudaStream_t stream) {
  (void)h, (void)a, (void)count, (void)stream;
  throw mgpu::NotImplemented("gpu tp_ffn gelu_forward");
}

// TODO(gpu tp_ffn gelu_backward): dh[i] = da[i] * gelu'(h[i]), the derivative of the tanh form
// in gelu.hpp (gelu_grad_ref in reference.hpp is the host version to compare with). dh may be
// the same buffer as da. Same launch rules as gelu_forward.
void gelu_backward(const bf16* h, const bf16* da, bf16* dh, std::size_t count,
                   cudaStream_t stream) {
  (void)h, (void)da, (void)dh, (void)count, (void)stream;
  throw mgpu::NotImplemented("gpu tp_ffn gelu_backward");
}

}  // namespace mgpu::gpu
