// Lab tp_ffn: YOUR tensor-parallel FFN, forward and backward. Spec in tp_ffn.hpp; run
// `bin/gpu_tp_ffn` to check it against the float64 CPU reference and time it.
// A TODO's id is the last word in its parentheses: `./mgpu hint tp_ffn <id>` gives hints for it.
#include "tp_ffn/tp_ffn.hpp"

#include "tp_ffn/gelu.hpp"

#include <mgpu/not_implemented.hpp>

namespace mgpu::gpu {

void tp_ffn_forward(DeviceComm& comm, cublasHandle_t cublas, const FfnShape& shape, TpFfnRank& p,
                    const bf16* x, bf16* y) {
  const int fl = shape.f / comm.size();  // this rank's slice of the hidden width
  // TODO(gpu tp_ffn forward): y holds GELU(x W1) W2 of the unsplit weights on every rank, and
  //   p.h and p.a hold what the backward reads (shapes in tp_ffn.hpp). Calls: gemm()
  //   (common/gemm.hpp: row-major, a transpose flag per operand, M, N, K of the product),
  //   gelu_forward on comm.stream(), and DeviceComm collectives. Work out which products run,
  //   their shapes, and how little communication is enough.
  (void)cublas, (void)p, (void)x, (void)y, (void)fl;
  throw mgpu::NotImplemented("gpu tp_ffn forward");
}

void tp_ffn_backward(DeviceComm& comm, cublasHandle_t cublas, const FfnShape& shape, TpFfnRank& p,
                     const bf16* x, const bf16* dy, bf16* dx) {
  const int fl = shape.f / comm.size();
  // TODO(gpu tp_ffn backward): dx is the unsplit FFN's input gradient on every rank, and dw1 and
  //   dw2 are this rank's blocks of the unsplit weight gradients (overwritten, not added to).
  //   p.da is the one scratch buffer. Calls: gemm() with the transpose flags it offers,
  //   gelu_backward, DeviceComm collectives; the fewer bytes sent, the better.
  (void)cublas, (void)p, (void)x, (void)dy, (void)dx, (void)fl;
  throw mgpu::NotImplemented("gpu tp_ffn backward");
}

}  // namespace mgpu::gpu
