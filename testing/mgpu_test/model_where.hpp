// Where an element of the course model's flat parameter (or gradient) buffer sits, for a
// comparison's report: "block1.w1 [2, 5] of 8x16, unit 2", rather than only its index in a buffer
// of thousands. Pass it as mgpu_test::Context::where.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "mgpu/model/model.hpp"

namespace mgpu_test {

/// A Context::where for a buffer in `model`'s flat layout (Model::tensors()): element i is named
/// by its tensor, its [row, column] in it and the tensor's shape. The tensors are copied, so the
/// function outlives the model.
inline std::function<std::string(std::size_t)> model_tensors(const mgpu::model::Model& model) {
  return [tensors = std::vector<mgpu::model::TensorInfo>(model.tensors())](std::size_t i) {
    for (const mgpu::model::TensorInfo& t : tensors) {
      if (i < t.offset || i >= t.offset + t.size()) continue;
      const auto at = static_cast<std::int64_t>(i - t.offset);
      return t.name + " [" + std::to_string(at / t.cols) + ", " + std::to_string(at % t.cols) +
             "] of " + std::to_string(t.rows) + "x" + std::to_string(t.cols) + ", unit " +
             std::to_string(t.unit);
    }
    return std::string("past the model's last tensor");
  };
}

}  // namespace mgpu_test
