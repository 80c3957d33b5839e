// Element types the labs move and reduce on the GPU, with their sizes and names. Kept free of
// the runtime's headers (and so of Eigen), because the .cu files include it through kernels.hpp.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

namespace mgpu::gpu {

/// Device bf16 element type (same 16-bit layout as Eigen::bfloat16, i.e. mgpu::bf16, on the host).
using bf16 = __nv_bfloat16;

/// Element type of a device buffer in a collective or a reduction.
enum class DType { f32, bf16 };

/// Bytes per element.
constexpr std::size_t dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

/// Name as nccl-tests prints it ("float", "bfloat16").
constexpr const char* dtype_name(DType t) { return t == DType::f32 ? "float" : "bfloat16"; }

}  // namespace mgpu::gpu
