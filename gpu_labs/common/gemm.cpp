// Row-major bf16 GEMM through cublasGemmEx; see gemm.hpp for the operand swap.
#include "common/gemm.hpp"

namespace mgpu::gpu {

void gemm(cublasHandle_t handle, Trans trans_a, Trans trans_b, int M, int N, int K, const bf16* A,
          const bf16* B, void* C, DType c_type, float alpha, float beta) {
  // Column-major view of a row-major (r, c) buffer is its transpose (c, r) with leading dim c.
  // We ask cuBLAS for C^T (N, M) = op(B)^T (N, K) * op(A)^T (K, M).
  const int lda = trans_a == Trans::yes ? M : K;
  const int ldb = trans_b == Trans::yes ? K : N;
  const cublasOperation_t op_b = trans_b == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t ct = c_type == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
  MGPU_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A,
                                 CUDA_R_16BF, lda, &beta, C, ct, N, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

}  // namespace mgpu::gpu
