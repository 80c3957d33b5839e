// 11.5 given argument checks: the validation the chapter's formulas share, kept here once so the
// skeleton and the reference solution use the same code. Not part of the exercise.
#pragma once

#include <cstdint>
#include <string>

#include "mgpu/check_args.hpp"

namespace mgpu::pipeline {

/// Given: throws std::invalid_argument, naming `where`, unless `stage` is a stage of a
/// `p`-stage pipeline (stages are numbered 0 to p-1).
inline void check_stage(const char* where, std::int64_t stage, std::int64_t p) {
  if (stage < 0 || stage >= p)
    args::fail(where, "stage", std::to_string(stage),
               "is outside [0, " + std::to_string(p) + "): stages are numbered from 0 to p-1");
}

}  // namespace mgpu::pipeline
