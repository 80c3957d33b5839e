// Row-major GEMM on cuBLAS with bf16 operands and fp32 accumulation (cublasGemmEx,
// CUBLAS_COMPUTE_32F). The labs think in row-major (batch, features) matrices; cuBLAS is
// column-major, and a row-major C = A B is the column-major C^T = B^T A^T, so the helper swaps
// the operands instead of transposing anything.
#pragma once

#include "common/check.hpp"
#include "common/device_buffer.hpp"
#include "common/dtype.hpp"

namespace mgpu::gpu {

/// Which operand is used transposed: op(X) = X or X^T.
enum class Trans { no, yes };

/// Row-major C(M, N) = alpha op(A) op(B) + beta C with op(A) (M, K), op(B) (K, N).
/// A is stored (M, K), or (K, M) when trans_a is yes; B is stored (K, N), or (N, K) when trans_b
/// is yes; C is stored (M, N) in `c_type` (bf16 or f32). Enqueued on the handle's stream.
void gemm(cublasHandle_t handle, Trans trans_a, Trans trans_b, int M, int N, int K, const bf16* A,
          const bf16* B, void* C, DType c_type, float alpha = 1.0f, float beta = 0.0f);

/// FLOPs of one such GEMM: 2 M N K.
constexpr double gemm_flops(double M, double N, double K) { return 2.0 * M * N * K; }

/// A cuBLAS handle for the current device bound to `stream`, destroyed with the object.
class CublasHandle {
 public:
  /// Creates the handle on the current device; its work goes to `stream`.
  explicit CublasHandle(cudaStream_t stream) {
    MGPU_CUBLAS_CHECK(cublasCreate(&handle_));
    MGPU_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() {
    if (!rank_unwinding()) cublasDestroy(handle_);  // frees its workspace: a device-wide wait
  }
  /// The raw handle.
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace mgpu::gpu
