// Lab tp_ffn, reference: the tensor-parallel FFN of Megatron-LM (Shoeybi et al. 2019).
// W1 by columns lets GELU act on each rank's slice alone; W2 by rows then leaves each rank with
// a partial sum of y, so one all-reduce per direction is the only communication.
#include "tp_ffn/tp_ffn.hpp"

#include "tp_ffn/gelu.hpp"

namespace mgpu::gpu {

void tp_ffn_forward(DeviceComm& comm, cublasHandle_t cublas, const FfnShape& shape, TpFfnRank& p,
                    const bf16* x, bf16* y) {
  const int B = shape.tokens, d = shape.d, fl = shape.f / comm.size();
  const std::size_t hidden = static_cast<std::size_t>(B) * static_cast<std::size_t>(fl);
  gemm(cublas, Trans::no, Trans::no, B, fl, d, x, p.w1.data(), p.h.data(), DType::bf16);  // (B, fl)
  gelu_forward(p.h.data(), p.a.data(), hidden, comm.stream());
  gemm(cublas, Trans::no, Trans::no, B, d, fl, p.a.data(), p.w2.data(), y,
       DType::bf16);  // (B, d) partial
  comm.all_reduce(y, y, static_cast<std::size_t>(B) * static_cast<std::size_t>(d), DType::bf16);
}

void tp_ffn_backward(DeviceComm& comm, cublasHandle_t cublas, const FfnShape& shape, TpFfnRank& p,
                     const bf16* x, const bf16* dy, bf16* dx) {
  const int B = shape.tokens, d = shape.d, fl = shape.f / comm.size();
  const std::size_t hidden = static_cast<std::size_t>(B) * static_cast<std::size_t>(fl);
  // Weight gradients only involve this rank's own slices (and the replicated x, dy): no comm.
  gemm(cublas, Trans::yes, Trans::no, fl, d, B, p.a.data(), dy, p.dw2.data(),
       DType::bf16);  // (fl, d)
  gemm(cublas, Trans::no, Trans::yes, B, fl, d, dy, p.w2.data(), p.da.data(),
       DType::bf16);                                                           // (B, fl)
  gelu_backward(p.h.data(), p.da.data(), p.da.data(), hidden, comm.stream());  // dh
  gemm(cublas, Trans::yes, Trans::no, d, fl, B, x, p.da.data(), p.dw1.data(),
       DType::bf16);  // (d, fl)
  // x fed every rank's slice, so its gradient is the sum of the slices' contributions.
  gemm(cublas, Trans::no, Trans::yes, B, d, fl, p.da.data(), p.w1.data(), dx,
       DType::bf16);  // (B, d) partial
  comm.all_reduce(dx, dx, static_cast<std::size_t>(B) * static_cast<std::size_t>(d), DType::bf16);
}

}  // namespace mgpu::gpu
