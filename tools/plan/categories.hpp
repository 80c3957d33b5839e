// The memory categories in the order the bars stack them, with the letter (text bar) and colour
// (SVG) each renderer uses, so every view draws the same stack the same way.
#pragma once

#include <array>

#include "plan/model.hpp"

namespace mgpu::planner {

/// One stacked segment of a per-GPU memory bar.
struct MemoryCategory {
  const char* key;                   ///< JSON key, e.g. "optimizer"
  const char* label;                 ///< wording in the report
  char letter;                       ///< text-bar character
  const char* color;                 ///< SVG fill
  double layout::GpuMemory::*bytes;  ///< which field of layout::GpuMemory it is
};

/// Bottom of the stack first: what every GPU always holds, then what ZeRO shards, then activations.
inline constexpr std::array<MemoryCategory, 5> kMemoryCategories{{
    {"weights", "weights (bf16)", 'W', "#4e79a7", &layout::GpuMemory::weights_bytes},
    {"grads", "gradients (bf16)", 'G', "#f28e2b", &layout::GpuMemory::grads_bytes},
    {"master", "master weights (fp32)", 'M', "#59a14f", &layout::GpuMemory::master_bytes},
    {"optimizer", "Adam moments (fp32)", 'O', "#b07aa1", &layout::GpuMemory::optimizer_bytes},
    {"activations", "activations", 'A', "#e15759", &layout::GpuMemory::activation_bytes},
}};

}  // namespace mgpu::planner
