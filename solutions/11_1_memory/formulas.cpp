// 11.1 reference solution: training-state bytes, activation bytes (Korthikanti et al. 2022),
// 6ND compute and the time it takes. Implements chapters/11_1_memory/formulas.hpp.
#include "11_1_memory/formulas.hpp"
#include "11_1_memory/checks.hpp"  // check_shape (given)

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::memory {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

// ------------------------------------------------------------------ training state

double bytes_per_parameter(const PrecisionRecipe& recipe) {
  const char* where = "bytes_per_parameter";
  validate_recipe(where, recipe);
  return recipe.bytes_weights + recipe.bytes_grads + recipe.bytes_master + recipe.bytes_optimizer;
}

double training_state_bytes(double params, const PrecisionRecipe& recipe) {
  check_non_negative("training_state_bytes", "params", params);
  return params * bytes_per_parameter(recipe);
}

// ------------------------------------------------------------------ activations

double activation_bytes_per_layer(const TransformerShape& shape, const ActivationOptions& options) {
  check_shape("activation_bytes_per_layer", shape, options.tensor_parallel);
  const double s = static_cast<double>(shape.seq);
  const double b = static_cast<double>(shape.micro_batch);
  const double h = static_cast<double>(shape.hidden);
  const double a = static_cast<double>(shape.heads);
  const double t = static_cast<double>(options.tensor_parallel);
  const double sbh = s * b * h;

  if (options.recompute == Recompute::full) {
    // Only the layer input survives the forward; sequence parallelism stores it sharded.
    return options.sequence_parallel ? 2.0 * sbh / t : 2.0 * sbh;
  }
  // Bytes per token and unit of width. Tensor parallelism splits 24 of the 34 (Q, K, V, the
  // output projection's input, the GeLU input and output, 2+2+2+2+8+8); 10 stay replicated on every
  // rank (the two layer-norm inputs, the inputs of the first linear layer of attention and of the
  // FFN, the two dropout masks) unless sequence parallelism splits those along the sequence.
  const double linear_part = options.sequence_parallel ? 34.0 / t : 10.0 + 24.0 / t;
  // The attention core, s x s per head: softmax output (2), its dropout mask (1) and the
  // dropout output (2), so 5as/h, split across heads.
  const double attention_core =
      options.recompute == Recompute::selective ? 0.0 : 5.0 * a * s / (h * t);
  return sbh * (linear_part + attention_core);
}

double activation_bytes(const TransformerShape& shape, const ActivationOptions& options) {
  check_count("activation_bytes", "layers", shape.layers);
  return static_cast<double>(shape.layers) * activation_bytes_per_layer(shape, options);
}

// ------------------------------------------------------------------ compute and time

double training_flops(double params, double tokens) {
  check_non_negative("training_flops", "params", params);
  check_non_negative("training_flops", "tokens", tokens);
  return 6.0 * params * tokens;
}

double training_seconds(double flops, std::int64_t gpus, double flops_per_gpu, double mfu) {
  const char* where = "training_seconds";
  check_non_negative(where, "flops", flops);
  check_count(where, "gpus", gpus);
  check_positive(where, "flops_per_gpu", flops_per_gpu);
  if (!(mfu > 0 && mfu <= 1))
    fail(where, "mfu", show(mfu), "is outside (0, 1]: a sustained fraction of peak, e.g. 0.4");
  return flops / (static_cast<double>(gpus) * flops_per_gpu * mfu);
}

}  // namespace mgpu::memory
