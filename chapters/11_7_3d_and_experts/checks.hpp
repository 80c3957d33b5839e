// 11.7 given argument checks: the validation the chapter's formulas share, kept here once so the
// skeleton and the reference solution use the same code. Not part of the exercise.
#pragma once

#include <cstdint>
#include <string>

#include "11_7_3d_and_experts/formulas.hpp"
#include "mgpu/check_args.hpp"

namespace mgpu::layout {

/// Given: throws std::invalid_argument, naming `where`, unless tp, pp and dp of `layout` are all
/// at least 1.
inline void check_degrees(const char* where, const Layout& layout) {
  args::check_count(where, "tp", layout.tp);
  args::check_count(where, "pp", layout.pp);
  args::check_count(where, "dp", layout.dp);
}

/// Given: the check ProcessGrid's constructor starts with. Throws std::invalid_argument, naming
/// `where`, unless tp, pp and dp are at least 1 and their product is `world_size`, the number of
/// ranks the grid is laid over.
inline void check_grid(const char* where, const Layout& layout, int world_size) {
  check_degrees(where, layout);
  const std::int64_t gpus = layout.tp * layout.pp * layout.dp;
  if (gpus != world_size)
    args::fail(where, "layout",
               std::to_string(layout.tp) + "x" + std::to_string(layout.pp) + "x" +
                   std::to_string(layout.dp),
               "needs " + std::to_string(gpus) + " ranks but the communicator has " +
                   std::to_string(world_size) + ": choose degrees whose product is " +
                   std::to_string(world_size));
}

/// Given: throws std::invalid_argument, naming `where` and the index `name`, unless `value`
/// lies in [0, size).
inline void check_index(const char* where, const char* name, std::int64_t value,
                        std::int64_t size) {
  if (value < 0 || value >= size)
    args::fail(where, name, std::to_string(value),
               "is outside [0, " + std::to_string(size) + "): use an index below the degree");
}

/// Given: the checks per_gpu_memory and per_gpu_traffic share. Throws std::invalid_argument
/// unless the degrees are at least 1, params is finite and >= 0, the recipe is valid, zero_stage
/// is 0 to 3, pp divides shape.layers, micro_batches is at least 1 and
/// activation_bytes_per_layer is finite and >= 0.
inline void check_model(const char* where, const LayoutModel& model) {
  check_degrees(where, model.layout);
  args::check_non_negative(where, "params", model.params);
  validate_recipe(where, model.recipe);
  args::check_zero_stage(where, "zero_stage", model.zero_stage);
  args::check_count(where, "shape.layers", model.shape.layers);
  if (model.shape.layers % model.layout.pp != 0)
    args::fail(where, "layout.pp", std::to_string(model.layout.pp),
               "does not divide shape.layers=" + std::to_string(model.shape.layers) +
                   ": stages must have equal depth");
  args::check_count(where, "micro_batches", model.micro_batches);
  args::check_non_negative(where, "activation_bytes_per_layer", model.activation_bytes_per_layer);
}

}  // namespace mgpu::layout
