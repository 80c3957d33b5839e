// Element types the labs move and reduce on the GPU, with their sizes and names.
#pragma once

#include <cstddef>

namespace mgpu::gpu {

/// Element type of a device buffer in a collective or a reduction.
enum class DType { f32, bf16 };

/// Bytes per element.
constexpr std::size_t dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

/// Name as nccl-tests prints it ("float", "bfloat16").
constexpr const char* dtype_name(DType t) { return t == DType::f32 ? "float" : "bfloat16"; }

}  // namespace mgpu::gpu
