// 11.4 reference solution: weights per tensor-parallel rank and the all-reduce traffic of a
// tensor-parallel block. Implements chapters/11_4_tensor_parallel/formulas.hpp.
#include "11_4_tensor_parallel/formulas.hpp"
#include "11_4_tensor_parallel/checks.hpp"  // check_divides (given)

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::tensor_parallel {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

double ffn_params_per_rank(std::int64_t hidden, std::int64_t ffn_hidden, std::int64_t t) {
  const char* where = "ffn_params_per_rank";
  check_count(where, "hidden", hidden);
  check_count(where, "ffn_hidden", ffn_hidden);
  check_count(where, "t", t);
  check_divides(where, "t", t, "ffn_hidden", ffn_hidden,
                "each rank needs a whole number of columns of W1 and rows of W2");
  // W1's columns and W2's matching rows: ffn_hidden/t of each, hidden wide.
  const double slice = static_cast<double>(ffn_hidden / t);
  return 2.0 * static_cast<double>(hidden) * slice;
}

double attention_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t t) {
  const char* where = "attention_params_per_rank";
  check_count(where, "hidden", hidden);
  check_count(where, "heads", heads);
  check_count(where, "t", t);
  check_divides(where, "heads", heads, "hidden", hidden, "every head needs the same width");
  check_divides(where, "t", t, "heads", heads, "each rank takes whole heads");
  // Q, K, V columns and W_O rows of heads/t heads, each head_dim = hidden/heads wide.
  const double h = static_cast<double>(hidden);
  const double width = static_cast<double>(heads / t) * static_cast<double>(hidden / heads);
  return 4.0 * h * width;
}

double block_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t ffn_hidden,
                             std::int64_t t) {
  // Two layer norms, gain and bias each: replicated, so not divided by t.
  const double layer_norms = 4.0 * static_cast<double>(hidden);
  return attention_params_per_rank(hidden, heads, t) + ffn_params_per_rank(hidden, ffn_hidden, t) +
         layer_norms;
}

std::int64_t all_reduces_per_block(Pass pass) {
  switch (pass) {
    case Pass::forward:
      return 2;  // after attention's W_O, after the FFN's W2
    case Pass::backward:
      return 2;  // input gradients of attention's QKV and of the FFN's W1
    case Pass::both:
      return 4;
  }
  throw std::invalid_argument(
      "all_reduces_per_block: pass=" + std::to_string(static_cast<int>(pass)) +
      " is not a Pass value: use forward, backward or both");
}

double all_reduce_payload_bytes(const TransformerShape& shape, double bytes_per_element) {
  const char* where = "all_reduce_payload_bytes";
  check_count(where, "seq", shape.seq);
  check_count(where, "micro_batch", shape.micro_batch);
  check_count(where, "hidden", shape.hidden);
  check_positive(where, "bytes_per_element", bytes_per_element);
  return static_cast<double>(shape.seq) * static_cast<double>(shape.micro_batch) *
         static_cast<double>(shape.hidden) * bytes_per_element;
}

double block_bytes_sent_per_rank(const TransformerShape& shape, std::int64_t t,
                                 double bytes_per_element, Pass pass) {
  check_count("block_bytes_sent_per_rank", "t", t);
  const double n = static_cast<double>(t);
  const double per_all_reduce =
      2.0 * (n - 1.0) / n * all_reduce_payload_bytes(shape, bytes_per_element);
  return static_cast<double>(all_reduces_per_block(pass)) * per_all_reduce;
}

}  // namespace mgpu::tensor_parallel
