// Error checks for every CUDA, cuBLAS and NCCL call in the GPU labs.
// A failed call throws std::runtime_error naming the call, the error and the file:line, so a
// failure on a remote GPU node is readable from the log alone.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace mgpu::gpu {

/// Throws if `status` is not cudaSuccess; `expr`, `file` and `line` name the failed call.
inline void check_cuda(cudaError_t status, const char* expr, const char* file, int line) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ") in `" + expr + "` at " + file + ":" +
                             std::to_string(line));
  }
}

/// Throws if `status` is not CUBLAS_STATUS_SUCCESS.
inline void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS error ") + cublasGetStatusName(status) + " (" +
                             cublasGetStatusString(status) + ") in `" + expr + "` at " + file +
                             ":" + std::to_string(line));
  }
}

/// Throws if `status` is not ncclSuccess; adds NCCL's last error text when it has one.
inline void check_nccl(ncclResult_t status, const char* expr, const char* file, int line) {
  if (status != ncclSuccess && status != ncclInProgress) {
    throw std::runtime_error(std::string("NCCL error ") + ncclGetErrorString(status) + " in `" +
                             expr + "` at " + file + ":" + std::to_string(line) +
                             " (run with NCCL_DEBUG=WARN for details)");
  }
}

}  // namespace mgpu::gpu

/// Checks a CUDA runtime call; throws with the call text, error name and file:line.
#define MGPU_CUDA_CHECK(expr) ::mgpu::gpu::check_cuda((expr), #expr, __FILE__, __LINE__)
/// Checks a cuBLAS call.
#define MGPU_CUBLAS_CHECK(expr) ::mgpu::gpu::check_cublas((expr), #expr, __FILE__, __LINE__)
/// Checks an NCCL call.
#define MGPU_NCCL_CHECK(expr) ::mgpu::gpu::check_nccl((expr), #expr, __FILE__, __LINE__)
/// Checks that the last kernel launch was accepted (launch errors surface here, not at sync).
#define MGPU_CUDA_CHECK_LAUNCH() \
  ::mgpu::gpu::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
