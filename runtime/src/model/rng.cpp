// Platform-independent normal and uniform samples for the course model (see mgpu/model/rng.hpp).
#include "mgpu/model/rng.hpp"

#include <cmath>
#include <numbers>

namespace mgpu::model {

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - uniform() lies in (0, 1], so the logarithm is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

void Rng::fill_normal(std::span<float> out, double stddev) {
  for (float& x : out) x = static_cast<float>(stddev * normal());
}

void Rng::fill_uniform(std::span<float> out, double lo, double hi) {
  for (float& x : out) x = static_cast<float>(lo + (hi - lo) * uniform());
}

}  // namespace mgpu::model
