// The vocabulary the chapters' formulas share: how many bytes each parameter's training state
// costs (the precision recipe), the shape of the transformer, and what backward recomputes.
// Data and given checks only. It lives in the runtime so that every chapter can use it while
// depending on the runtime and its own header alone (11.1 teaches these types; later chapters
// take them as arguments).
#pragma once

#include "mgpu/check_args.hpp"

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mgpu {

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
    args::fail(where, "bytes_weights", "0",
               "is zero: a model always stores its weights (use 2 for bf16)");
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

// ------------------------------------------------------------------ transformer shape

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
  selective,  ///< recompute the attention core (softmax, its dropout, scores times V); 11.6 runs it
              ///< on the fp32 course model
  full,       ///< store only each layer's input and rerun the layer's forward in backward
};

}  // namespace mgpu
