// Optimizer steps on flat spans of parameters: Adam(W) and SGD with momentum.
// They work on any slice of the flat parameter buffer, so a ZeRO rank can update just its shard;
// elementwise maths only, so every rank that steps the same numbers gets the same bits.
#pragma once

#include "mgpu/types.hpp"

#include <cstdint>
#include <span>

namespace mgpu::model {

/// Adam hyper-parameters (Kingma and Ba 2015), with decoupled weight decay (AdamW) when
/// weight_decay > 0.
struct AdamConfig {
  float lr = 1e-3f;           ///< learning rate
  float beta1 = 0.9f;         ///< decay of the running mean of gradients
  float beta2 = 0.999f;       ///< decay of the running mean of squared gradients
  float eps = 1e-8f;          ///< added to sqrt(v) to avoid dividing by zero
  float weight_decay = 0.0f;  ///< decoupled decay: p -= lr * weight_decay * p
};

/// One Adam step, elementwise over equal-length spans: m and v are the optimizer state (zero at the
/// start), step counts from 1 and sets the bias correction.
/// @throws std::invalid_argument when the spans differ in length or step < 1.
void adam_step(std::span<float> params, std::span<const float> grads, std::span<float> m,
               std::span<float> v, std::int64_t step, const AdamConfig& cfg);

/// Mixed-precision Adam (the 16-bytes-per-parameter recipe): steps the fp32 `master` weights with
/// fp32 `grads` and state, then writes the rounded bf16 copy the next forward pass uses into
/// `weights`. All five spans have the same length.
/// @throws std::invalid_argument when the spans differ in length or step < 1.
void adam_step_mixed(std::span<float> master, std::span<const float> grads, std::span<float> m,
                     std::span<float> v, std::int64_t step, const AdamConfig& cfg,
                     std::span<bf16> weights);

/// Rounds fp32 values to bf16 (round to nearest even); the spans have the same length.
void to_bf16(std::span<const float> in, std::span<bf16> out);
/// Widens bf16 values to fp32 (exact); the spans have the same length.
void to_float(std::span<const bf16> in, std::span<float> out);

/// SGD with optional momentum (PyTorch's form: buf = momentum*buf + g; p -= lr*buf).
/// velocity may be empty when momentum is 0.
/// @throws std::invalid_argument when the spans differ in length.
void sgd_step(std::span<float> params, std::span<const float> grads, std::span<float> velocity,
              float lr, float momentum = 0.0f);

}  // namespace mgpu::model
