// 11.1 skeleton: training-state bytes, activation bytes (Korthikanti et al. 2022), 6ND compute
// and training time. The contract and the formulas are in formulas.hpp; fill in each TODO.
#include "11_1_memory/formulas.hpp"
#include "11_1_memory/checks.hpp"  // check_shape (given)

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::memory {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

// ------------------------------------------------------------------ training state

double bytes_per_parameter(const PrecisionRecipe& recipe) {
  // TODO(11.1): validate the recipe with validate_recipe("bytes_per_parameter", recipe) (given,
  // in formulas.hpp), then add the four kinds of state.
  throw NotImplemented("11.1 bytes_per_parameter");
}

double training_state_bytes(double params, const PrecisionRecipe& recipe) {
  // TODO(11.1): params must be >= 0; reuse bytes_per_parameter (it validates the recipe).
  throw NotImplemented("11.1 training_state_bytes");
}

// ------------------------------------------------------------------ activations

double activation_bytes_per_layer(const TransformerShape& shape, const ActivationOptions& options) {
  // TODO(11.1): validate with check_shape. Work in doubles (s*b*h overflows int32 quickly).
  // Handle full recompute first (only the layer input is kept). Otherwise the result is
  // s*b*h times (a part for the linear layers and norms) + (the attention-core part); which
  // terms tensor parallelism, sequence parallelism and selective recompute change is in the
  // header's table. Check your version against t = 1, where all forms must agree.
  throw NotImplemented("11.1 activation_bytes_per_layer");
}

double activation_bytes(const TransformerShape& shape, const ActivationOptions& options) {
  // TODO(11.1): layers must be at least 1; then it is one layer's bytes, layers times.
  throw NotImplemented("11.1 activation_bytes");
}

// ------------------------------------------------------------------ compute and time

double training_flops(double params, double tokens) {
  // TODO(11.1): 2 FLOPs per parameter and token forward, twice that backward.
  throw NotImplemented("11.1 training_flops");
}

double training_seconds(double flops, std::int64_t gpus, double flops_per_gpu, double mfu) {
  // TODO(11.1): validate every argument (mfu must lie in (0, 1]; NaN must fail too), then
  // divide the work by the sustained rate of all GPUs together.
  throw NotImplemented("11.1 training_seconds");
}

}  // namespace mgpu::memory
