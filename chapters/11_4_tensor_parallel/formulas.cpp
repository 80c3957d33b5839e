// 11.4 skeleton: weights per tensor-parallel rank and a tensor-parallel block's all-reduce
// traffic. The contract is in formulas.hpp; fill in each TODO.
#include "11_4_tensor_parallel/formulas.hpp"
#include "11_4_tensor_parallel/checks.hpp"  // check_divides (given)

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::tensor_parallel {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

double ffn_params_per_rank(std::int64_t hidden, std::int64_t ffn_hidden, std::int64_t t) {
  // TODO(11.4): validate (counts, t divides ffn_hidden). Which slice of W1 and of W2 does rank i
  // keep so that phi(x W1_i) W2_i needs no communication until the final sum?
  throw NotImplemented("11.4 ffn_params_per_rank");
}

double attention_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t t) {
  // TODO(11.4): validate (heads divides hidden, t divides heads). Count the Q, K, V columns and
  // W_O rows of heads/t heads.
  throw NotImplemented("11.4 attention_params_per_rank");
}

double block_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t ffn_hidden,
                             std::int64_t t) {
  // TODO(11.4): the two functions above together, plus the layer norms every rank keeps whole.
  throw NotImplemented("11.4 block_params_per_rank");
}

std::int64_t all_reduces_per_block(Pass pass) {
  // TODO(11.4): where must partial results be summed in the forward, and which gradients must
  // be summed in the backward? Count them per pass.
  throw NotImplemented("11.4 all_reduces_per_block");
}

double all_reduce_payload_bytes(const TransformerShape& shape, double bytes_per_element) {
  // TODO(11.4): validate; the all-reduced tensor has the block's output shape (s, b, h).
  throw NotImplemented("11.4 all_reduce_payload_bytes");
}

double block_bytes_sent_per_rank(const TransformerShape& shape, std::int64_t t,
                                 double bytes_per_element, Pass pass) {
  // TODO(11.4): all-reduces in this pass, times what a ring all-reduce over t ranks sends per
  // rank for one payload (section 11.2).
  throw NotImplemented("11.4 block_bytes_sent_per_rank");
}

}  // namespace mgpu::tensor_parallel
