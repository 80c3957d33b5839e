// 11.1 skeleton: training-state bytes, activation bytes (Korthikanti et al. 2022), 6ND compute
// and training time. The contract and the formulas are in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_1 <id>` gives hints for it.
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
  // TODO(11.1 bytes_per_parameter): done when kBf16MixedAdam gives 16 and every preset gives its
  // table total, and a negative, NaN or weightless recipe throws. validate_recipe (formulas.hpp)
  // does the checking.
  throw NotImplemented("11.1 bytes_per_parameter");
}

double training_state_bytes(double params, const PrecisionRecipe& recipe) {
  // TODO(11.1 training_state_bytes): 70e9 parameters of kBf16MixedAdam hold 1.12e12 bytes; a
  // negative or non-finite count throws (check_non_negative), and so does a bad recipe.
  throw NotImplemented("11.1 training_state_bytes");
}

// ------------------------------------------------------------------ activations

double activation_bytes_per_layer(const TransformerShape& shape, const ActivationOptions& options) {
  // TODO(11.1 activation_bytes_per_layer): every row of the header's table, selected by
  // `options`; at t = 1 all forms agree, sequence parallelism divides the no-recompute bytes by
  // exactly t, and each recompute level keeps less than the one before. check_shape (checks.hpp)
  // rejects bad shapes. Work in doubles: s*b*h overflows 32-bit integers at real sizes.
  throw NotImplemented("11.1 activation_bytes_per_layer");
}

double activation_bytes(const TransformerShape& shape, const ActivationOptions& options) {
  // TODO(11.1 activation_bytes): the whole model's activations for one micro-batch; layers
  // below 1 throw (check_count).
  throw NotImplemented("11.1 activation_bytes");
}

// ------------------------------------------------------------------ compute and time

double training_flops(double params, double tokens) {
  // TODO(11.1 training_flops): 8e9 parameters on 15e12 tokens give about 7e23 FLOPs; negative
  // inputs throw (check_non_negative).
  throw NotImplemented("11.1 training_flops");
}

double training_seconds(double flops, std::int64_t gpus, double flops_per_gpu, double mfu) {
  // TODO(11.1 training_seconds): 7e23 FLOPs on one GPU at 4e14 FLOP/s take about 55 years
  // (kSecondsPerYear). Every argument is checked: mfu outside (0, 1], NaN included, throws
  // (check_count, check_positive, fail and show from mgpu/check_args.hpp).
  throw NotImplemented("11.1 training_seconds");
}

}  // namespace mgpu::memory
