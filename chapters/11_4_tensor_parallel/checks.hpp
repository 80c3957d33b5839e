// 11.4 given argument checks: the validation the chapter's formulas share, kept here once so the
// skeleton and the reference solution use the same code. Not part of the exercise.
#pragma once

#include <cstdint>
#include <string>

#include "mgpu/check_args.hpp"

namespace mgpu::tensor_parallel {

/// Given: throws std::invalid_argument, naming `where` and the argument `name`, unless `divisor`
/// divides `value` (the argument called `what`); the message says `why` it must.
inline void check_divides(const char* where, const char* name, std::int64_t divisor,
                          const char* what, std::int64_t value, const char* why) {
  if (value % divisor != 0)
    args::fail(where, name, std::to_string(divisor),
               std::string("does not divide ") + what + "=" + std::to_string(value) + ": " + why);
}

}  // namespace mgpu::tensor_parallel
