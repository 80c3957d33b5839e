// Argument checks shared by the chapters' formula functions. Each throws std::invalid_argument
// naming the function, the argument, its value and what would be valid, so a bad input to any
// formula reads the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::args {

/// `value` as the shortest text a stream gives (1e+09, 0.5, ...), for error messages.
inline std::string show(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

/// Throws std::invalid_argument "<where>: <name>=<value> <fix>".
[[noreturn]] inline void fail(const char* where, const char* name, const std::string& value,
                              const std::string& fix) {
  throw std::invalid_argument(std::string(where) + ": " + name + "=" + value + " " + fix);
}

/// Counts (ranks, layers, micro-batches...) must be at least 1.
inline void check_count(const char* where, const char* name, std::int64_t value) {
  if (value < 1) fail(where, name, std::to_string(value), "is below 1: use 1 or more");
}

/// Sizes (bytes, parameters, tokens) must be finite and 0 or more.
inline void check_non_negative(const char* where, const char* name, double value) {
  if (!std::isfinite(value) || value < 0)
    fail(where, name, show(value), "is negative or not finite: use a finite value >= 0");
}

/// Rates and element sizes must be finite and above 0.
inline void check_positive(const char* where, const char* name, double value) {
  if (!std::isfinite(value) || value <= 0)
    fail(where, name, show(value), "is not positive: use a finite value > 0");
}

/// ZeRO stages are 0 (plain data parallelism) to 3; 11.3 and 11.7 both take one.
inline void check_zero_stage(const char* where, const char* name, int stage) {
  if (stage < 0 || stage > 3)
    fail(where, name, std::to_string(stage), "does not exist: use 0, 1, 2 or 3");
}

}  // namespace mgpu::args
