// 11.1 Why one GPU is not enough: the memory and compute arithmetic of training.
// Bytes of training state per parameter, activation bytes per transformer layer, and the
// 6ND compute estimate. Every function is pure and cheap: the grader calls each many times.
#pragma once

#include "mgpu/check_args.hpp"
#include "mgpu/course.hpp"  // PrecisionRecipe and its presets, TransformerShape, Recompute

#include <cstdint>

/// Section 11.1: memory (training state, activations) and compute (6ND) of one training run.
namespace mgpu::memory {

// ------------------------------------------------------------------ training state

/// Bytes of training state per parameter: weights + gradients + master + optimizer.
///
/// Example: kBf16MixedAdam gives 16, kBf16MixedSgdMomentum gives 12.
/// @throws std::invalid_argument when a field is negative or not finite ("bytes_grads=-2 is
///         negative: bytes per parameter are 0 or more"), or when bytes_weights is 0 (a model
///         always keeps its weights).
double bytes_per_parameter(const PrecisionRecipe& recipe);

/// Bytes of training state (weights, gradients, master copy, optimizer) for `params`
/// parameters: params * bytes_per_parameter(recipe). Activations are not included.
///
/// Example: 70e9 parameters with kBf16MixedAdam hold 1.12e12 bytes (1.12 TB).
/// @param params number of parameters Psi, 0 or more (a double: counts exceed 2^31).
/// @param recipe bytes per parameter of each kind of state.
/// @throws std::invalid_argument when params is negative or not finite, or the recipe is
///         invalid (see bytes_per_parameter).
double training_state_bytes(double params, const PrecisionRecipe& recipe);

// ------------------------------------------------------------------ activations

/// How the layer is split across GPUs and what is recomputed, for activation_bytes_per_layer.
struct ActivationOptions {
  std::int64_t tensor_parallel = 1;       ///< t: tensor-parallel degree (1 = no tensor parallelism)
  bool sequence_parallel = false;         ///< shard layer norms and dropouts along the sequence too
  Recompute recompute = Recompute::none;  ///< what is recomputed instead of stored
};

/// Bytes of activations one transformer layer keeps for the backward pass, per GPU, for one
/// micro-batch, with 16-bit activations (Korthikanti et al. 2022, "Reducing Activation
/// Recomputation in Large Transformer Models", section 4 and table 2).
///
/// With s = seq, b = micro_batch, h = hidden, a = heads, t = tensor_parallel:
/// - no parallelism (t = 1):               s*b*h * (34 + 5*a*s/h)
/// - tensor parallel t:                    s*b*h * (10 + 24/t + 5*a*s/(h*t))
/// - tensor + sequence parallel:           s*b*h * (34/t + 5*a*s/(h*t))
/// - selective recompute drops the attention-core term 5*a*s/(h*t):
///   s*b*h * (10 + 24/t) with tensor parallel only, s*b*h * 34/t with sequence parallel too
/// - full recompute keeps only the layer input in 16 bits: 2*s*b*h (the paper's form), and
///   2*s*b*h/t when sequence parallel shards that input across the tensor-parallel group (an
///   extension of the paper's table: the stored input is already cut along the sequence).
/// The 34 are, per token and unit of width: the two layer-norm inputs (2 + 2), the Q/K/V
/// projection input (2), Q and K (2 + 2), V (2), the output projection's input (2), the FFN's
/// first-linear input (2), the GeLU input and output (8 + 8, 4h wide) and two dropout masks
/// (1 + 1). The 10 in the tensor-parallel-only form stay replicated on every tensor-parallel
/// rank: the layer-norm inputs, the two block-opening linear inputs and the dropout masks.
/// The 5*a*s/h term is the attention core: softmax output (2), its dropout mask (1) and the
/// dropout output (2), one s x s matrix each per head. With t = 1 all forms agree.
/// The shape's `layers` field is ignored here. Embedding and output-layer activations are not
/// included.
/// @throws std::invalid_argument when seq, micro_batch, hidden, heads or tensor_parallel is
///         below 1, or when tensor_parallel does not divide heads (heads are split across the
///         tensor-parallel ranks: "tensor_parallel=3 does not divide heads=32: pick t among the
///         divisors of heads").
double activation_bytes_per_layer(const TransformerShape& shape,
                                  const ActivationOptions& options = {});

/// Activation bytes of the whole model for one micro-batch on one GPU without pipeline
/// parallelism: shape.layers * activation_bytes_per_layer(shape, options).
/// @throws std::invalid_argument as activation_bytes_per_layer, and when layers is below 1.
double activation_bytes(const TransformerShape& shape, const ActivationOptions& options = {});

// ------------------------------------------------------------------ compute and time

/// Training compute C = 6 * N * D in FLOPs: 2 FLOPs per parameter per token forward and 4
/// backward (section 10.5).
///
/// Example: 8e9 parameters on 15e12 tokens need 7.2e23 FLOPs ("about 7e23").
/// @throws std::invalid_argument when params or tokens is negative or not finite.
double training_flops(double params, double tokens);

/// Wall-clock seconds to do `flops` on `gpus` GPUs that each peak at `flops_per_gpu` FLOP/s and
/// sustain the fraction `mfu` of it (model FLOPs utilisation):
/// flops / (gpus * flops_per_gpu * mfu). Assumes perfect scaling across GPUs.
///
/// Example: 7e23 FLOPs on one GPU at 4e14 FLOP/s take 1.75e9 s, about 55 years.
/// @throws std::invalid_argument when flops is negative, gpus is below 1, flops_per_gpu is not
///         positive and finite, or mfu is outside (0, 1].
double training_seconds(double flops, std::int64_t gpus, double flops_per_gpu, double mfu = 1.0);

/// Seconds in a year of 365.25 days, to read training_seconds in years.
inline constexpr double kSecondsPerYear = 365.25 * 24 * 3600;

}  // namespace mgpu::memory
