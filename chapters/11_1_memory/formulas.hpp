// 11.1 Why one GPU is not enough: the memory and compute arithmetic of training.
// Bytes of training state per parameter, activation bytes per transformer layer, and the
// 6ND compute estimate. Every function is pure and cheap: the grader calls each many times.
#pragma once

#include "mgpu/check_args.hpp"

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

/// Section 11.1: memory (training state, activations) and compute (6ND) of one training run.
namespace mgpu::memory {

// ------------------------------------------------------------------ precision recipes

/// How many bytes each parameter costs, per kind of training state.
///
/// The four kinds are the ones a memory ledger tracks separately: the weights the forward and
/// backward passes read, the gradients they produce, the optimizer's high-precision master copy
/// of the weights (0 when the weights themselves are the master copy), and the optimizer's
/// running statistics (Adam: two per parameter; SGD with momentum: one).
/// Values are bytes per parameter and may be fractional (quantized optimizer states).
struct PrecisionRecipe {
  double bytes_weights = 0;    ///< working weights, e.g. 2 for bf16
  double bytes_grads = 0;      ///< gradients as accumulated, e.g. 2 for bf16, 4 for fp32
  double bytes_master = 0;     ///< fp32 master weights (0 when the weights are the master copy)
  double bytes_optimizer = 0;  ///< optimizer state, e.g. 8 for Adam's two fp32 moments
};

/// Throws std::invalid_argument, naming `where` and the field, if a byte count of `recipe` is
/// negative or not finite, or if it stores no weights. Given: every chapter that takes a recipe
/// checks it this way.
inline void validate_recipe(const char* where, const PrecisionRecipe& recipe) {
  args::check_non_negative(where, "bytes_weights", recipe.bytes_weights);
  args::check_non_negative(where, "bytes_grads", recipe.bytes_grads);
  args::check_non_negative(where, "bytes_master", recipe.bytes_master);
  args::check_non_negative(where, "bytes_optimizer", recipe.bytes_optimizer);
  if (recipe.bytes_weights == 0)
    args::fail(where, "bytes_weights", "0", "is zero: a model always stores its weights (use 2 for bf16)");
}

/// A named recipe together with where it is used, for `mgpu plan --precision NAME` and tables.
struct PrecisionPreset {
  std::string_view name;    ///< short identifier, e.g. "bf16-mixed-adam"
  std::string_view source;  ///< where this recipe is the default or documented
  PrecisionRecipe recipe;   ///< the bytes per parameter
};

/// bf16 weights and gradients, fp32 master weights, Adam's two moments in fp32: 2+2+4+8 = 16 B.
/// The recipe of the course text's table, and the ZeRO paper's accounting (Rajbhandari et al.
/// 2020: 2 + 2 + K bytes, with K = 12 for mixed-precision Adam).
inline constexpr PrecisionRecipe kBf16MixedAdam{2, 2, 4, 8};

/// Plain fp32 training with Adam (PyTorch's default dtype): 4+4+0+8 = 16 B. The weights are
/// their own master copy, so the same 16 bytes arrive by a different split.
inline constexpr PrecisionRecipe kFp32Adam{4, 4, 0, 8};

/// bf16 weights and gradients, fp32 master weights, SGD with one fp32 momentum buffer:
/// 2+2+4+4 = 12 B (the classic mixed-precision recipe of Micikevicius et al. 2018 with SGD).
inline constexpr PrecisionRecipe kBf16MixedSgdMomentum{2, 2, 4, 4};

/// Everything in bf16, Adam's moments included, no fp32 master copy: 2+2+0+4 = 8 B.
/// Used when memory is tight, usually with stochastic rounding or Kahan-compensated updates so
/// that small updates are not lost (Zamirai et al. 2020, "Revisiting BFloat16 Training").
inline constexpr PrecisionRecipe kBf16PureAdam{2, 2, 0, 4};

/// bf16 mixed precision with 8-bit Adam (Dettmers et al. 2022, bitsandbytes): both moments are
/// stored in 8 bits with block-wise scales, 2+2+4+2 = 10 B (the per-block fp32 scales, one per
/// 2048 values, are below 0.01 B and left out).
inline constexpr PrecisionRecipe kBf16MixedAdam8bit{2, 2, 4, 2};

/// Megatron-LM's bf16 recipe with fp32 gradient accumulation (its `main_grad` buffer): bf16
/// weights, fp32 gradients, fp32 master weights, fp32 Adam: 2+4+4+8 = 18 B. Section 11.3 explains
/// where the extra 2 bytes come from.
inline constexpr PrecisionRecipe kMegatronBf16Fp32Grads{2, 4, 4, 8};

/// Every named recipe above, first the course text's default.
inline constexpr std::array<PrecisionPreset, 6> kPrecisionPresets{{
    {"bf16-mixed-adam", "course text 11.1; ZeRO paper (Rajbhandari et al. 2020)", kBf16MixedAdam},
    {"fp32-adam", "PyTorch default fp32 training with torch.optim.Adam", kFp32Adam},
    {"bf16-mixed-sgd", "mixed precision (Micikevicius et al. 2018) with SGD + momentum",
     kBf16MixedSgdMomentum},
    {"bf16-pure-adam", "pure bf16 training (Zamirai et al. 2020)", kBf16PureAdam},
    {"bf16-mixed-adam8bit", "8-bit Adam (Dettmers et al. 2022, bitsandbytes)", kBf16MixedAdam8bit},
    {"megatron-bf16-fp32-grads", "Megatron-LM bf16 with fp32 main_grad accumulation",
     kMegatronBf16Fp32Grads},
}};

/// The preset called `name` (see kPrecisionPresets).
/// @throws std::invalid_argument naming the unknown name and listing the known ones.
inline PrecisionRecipe precision_preset(std::string_view name) {
  std::string known;
  for (const auto& p : kPrecisionPresets) {
    if (p.name == name) return p.recipe;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw std::invalid_argument("precision preset '" + std::string(name) +
                              "' is unknown: use one of " + known);
}

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

/// The shape of a decoder-only transformer as the activation formulas see it.
struct TransformerShape {
  std::int64_t seq = 1;          ///< s: tokens per sequence
  std::int64_t micro_batch = 1;  ///< b: sequences per micro-batch
  std::int64_t hidden = 1;       ///< h: model width
  std::int64_t heads = 1;        ///< a: attention heads
  std::int64_t layers = 1;       ///< L: transformer layers
};

/// What is recomputed in the backward pass instead of stored (Korthikanti et al. 2022).
enum class Recompute {
  none,       ///< store every activation the backward pass needs
  selective,  ///< recompute the attention core (softmax, its dropout, scores times V); 11.6 runs it on the fp32 course model
  full,       ///< store only each layer's input and rerun the layer's forward in backward
};

/// How the layer is split across GPUs and what is recomputed, for activation_bytes_per_layer.
struct ActivationOptions {
  std::int64_t tensor_parallel = 1;  ///< t: tensor-parallel degree (1 = no tensor parallelism)
  bool sequence_parallel = false;    ///< shard layer norms and dropouts along the sequence too
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
