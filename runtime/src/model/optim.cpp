// Adam and SGD steps on flat spans (see mgpu/model/optim.hpp).
#include "mgpu/model/optim.hpp"

#include "mgpu/bf16.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace mgpu::model {

void adam_step(std::span<float> params, std::span<const float> grads, std::span<float> m,
               std::span<float> v, std::int64_t step, const AdamConfig& cfg) {
  const std::size_t n = params.size();
  if (grads.size() != n || m.size() != n || v.size() != n) {
    throw std::invalid_argument("adam_step: params " + std::to_string(n) + ", grads " +
                                std::to_string(grads.size()) + ", m " + std::to_string(m.size()) +
                                ", v " + std::to_string(v.size()) +
                                " must all have the same length");
  }
  if (step < 1)
    throw std::invalid_argument("adam_step: step " + std::to_string(step) + " must count from 1");
  const float c1 = 1.0f - std::pow(cfg.beta1, static_cast<float>(step));
  const float c2 = 1.0f - std::pow(cfg.beta2, static_cast<float>(step));
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    m[i] = cfg.beta1 * m[i] + (1.0f - cfg.beta1) * g;
    v[i] = cfg.beta2 * v[i] + (1.0f - cfg.beta2) * g * g;
    const float update = (m[i] / c1) / (std::sqrt(v[i] / c2) + cfg.eps);
    params[i] -= cfg.lr * (update + cfg.weight_decay * params[i]);
  }
}

void adam_step_mixed(std::span<float> master, std::span<const float> grads, std::span<float> m,
                     std::span<float> v, std::int64_t step, const AdamConfig& cfg,
                     std::span<bf16> weights) {
  adam_step(master, grads, m, v, step, cfg);
  to_bf16(master, weights);
}

void to_bf16(std::span<const float> in, std::span<bf16> out) {
  if (in.size() != out.size()) {
    throw std::invalid_argument("to_bf16: " + std::to_string(in.size()) + " inputs for " +
                                std::to_string(out.size()) +
                                " outputs; the spans must have the same length");
  }
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = bf16(in[i]);
}

void to_float(std::span<const bf16> in, std::span<float> out) {
  if (in.size() != out.size()) {
    throw std::invalid_argument("to_float: " + std::to_string(in.size()) + " inputs for " +
                                std::to_string(out.size()) +
                                " outputs; the spans must have the same length");
  }
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<float>(in[i]);
}

void sgd_step(std::span<float> params, std::span<const float> grads, std::span<float> velocity,
              float lr, float momentum) {
  const std::size_t n = params.size();
  if (grads.size() != n || (momentum != 0.0f && velocity.size() != n)) {
    throw std::invalid_argument(
        "sgd_step: params " + std::to_string(n) + ", grads " + std::to_string(grads.size()) +
        ", velocity " + std::to_string(velocity.size()) +
        ": lengths must match (velocity may be empty only without momentum)");
  }
  for (std::size_t i = 0; i < n; ++i) {
    float g = grads[i];
    if (momentum != 0.0f) {
      velocity[i] = momentum * velocity[i] + g;
      g = velocity[i];
    }
    params[i] -= lr * g;
  }
}

}  // namespace mgpu::model
