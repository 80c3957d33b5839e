// A deterministic random number generator for weights and data: the same seed gives the same
// numbers with every compiler and standard library (std::normal_distribution does not promise
// that).
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace mgpu::model {

/// Seeded generator: std::mt19937_64 (fully specified by the standard) with our own uniform and
/// Box-Muller normal transforms, so streams are identical on every platform.
class Rng {
 public:
  /// Start the stream for `seed`.
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  /// A double uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// A standard normal sample (Box-Muller; the second value of each pair is kept for the next
  /// call).
  double normal();
  /// Fill `out` with normal samples of standard deviation `stddev`.
  void fill_normal(std::span<float> out, double stddev);
  /// Fill `out` with uniform samples in [lo, hi).
  void fill_uniform(std::span<float> out, double lo, double hi);

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace mgpu::model
