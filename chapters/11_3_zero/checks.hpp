// 11.3 given argument checks: the validation the chapter's formulas share, kept here once so the
// skeleton and the reference solution use the same code. Not part of the exercise.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "11_3_zero/formulas.hpp"
#include "mgpu/check_args.hpp"

namespace mgpu::zero {

/// Given: throws std::invalid_argument, naming `where`, unless `stage` is a ZeRO stage (0 to 3).
inline void check_stage(const char* where, int stage) {
  args::check_zero_stage(where, "stage", stage);
}

/// Given: the checks zero_state_per_gpu and zero_traffic_per_gpu share. Throws
/// std::invalid_argument unless `params` is finite and >= 0, `recipe` is valid
/// (validate_recipe), `stage` is 0 to 3 and `dp` is at least 1.
inline void check_common(const char* where, double params, const PrecisionRecipe& recipe, int stage,
                         std::int64_t dp) {
  args::check_non_negative(where, "params", params);
  validate_recipe(where, recipe);
  check_stage(where, stage);
  args::check_count(where, "dp", dp);
}

/// Given: throws std::invalid_argument unless `setup` has at least one node and one GPU per node
/// and an additional_buffer_factor of 1 or more, as the DeepSpeed estimates require.
inline void check_setup(const char* where, const DeepSpeedSetup& setup) {
  args::check_count(where, "gpus_per_node", setup.gpus_per_node);
  args::check_count(where, "nodes", setup.nodes);
  if (!std::isfinite(setup.additional_buffer_factor) || setup.additional_buffer_factor < 1)
    args::fail(where, "additional_buffer_factor", args::show(setup.additional_buffer_factor),
               "is below 1: it is a safety margin, use 1 or more (DeepSpeed's default is 1.5)");
}

}  // namespace mgpu::zero
