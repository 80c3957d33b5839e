// 11.6 given argument checks: the validation the chapter's formulas share, kept here once so the
// skeleton and the reference solution use the same code. Not part of the exercise.
#pragma once

#include <cstdint>
#include <string>

#include "mgpu/check_args.hpp"

namespace mgpu::checkpointing {

/// Given: throws std::invalid_argument, naming `where`, unless `layers` is at least 1 and the
/// checkpoint interval `k` lies in [1, layers].
inline void check_interval(const char* where, std::int64_t layers, std::int64_t k) {
  args::check_count(where, "layers", layers);
  if (k < 1 || k > layers)
    args::fail(
        where, "k", std::to_string(k),
        "is outside [1, " + std::to_string(layers) + "]: a segment holds 1 to layers layers");
}

}  // namespace mgpu::checkpointing
