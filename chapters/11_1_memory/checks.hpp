// 11.1 given argument checks: the validation the chapter's formulas share, kept here once so the
// skeleton and the reference solution use the same code. Not part of the exercise.
#pragma once

#include <cstdint>
#include <string>

#include "11_1_memory/formulas.hpp"
#include "mgpu/check_args.hpp"

namespace mgpu::memory {

/// Given: throws std::invalid_argument, naming `where`, unless seq, micro_batch, hidden, heads
/// and `tensor_parallel` are all at least 1 and `tensor_parallel` divides heads, as
/// activation_bytes_per_layer requires.
inline void check_shape(const char* where, const TransformerShape& shape,
                        std::int64_t tensor_parallel) {
  args::check_count(where, "seq", shape.seq);
  args::check_count(where, "micro_batch", shape.micro_batch);
  args::check_count(where, "hidden", shape.hidden);
  args::check_count(where, "heads", shape.heads);
  args::check_count(where, "tensor_parallel", tensor_parallel);
  if (shape.heads % tensor_parallel != 0)
    args::fail(where, "tensor_parallel", std::to_string(tensor_parallel),
               "does not divide heads=" + std::to_string(shape.heads) +
                   ": pick t among the divisors of heads");
}

}  // namespace mgpu::memory
