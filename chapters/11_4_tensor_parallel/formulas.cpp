// 11.4 skeleton: weights per tensor-parallel rank and a tensor-parallel block's all-reduce
// traffic. The contract is in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_4 <id>` gives hints for it.
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
  // TODO(11.4 ffn_params_per_rank): the FFN weights one of t ranks holds (no biases): the whole
  // FFN at t = 1, and the t ranks' shares add up to it. Sizes below 1, or a t that does not
  // divide ffn_hidden, throw (check_count, check_divides).
  throw NotImplemented("11.4 ffn_params_per_rank");
}

double attention_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t t) {
  // TODO(11.4 attention_params_per_rank): the attention weights (Q, K, V, O, no biases) one of
  // t ranks holds when each takes whole heads; shares add up to the unsplit layer. heads must
  // divide hidden and t must divide heads (check_divides).
  throw NotImplemented("11.4 attention_params_per_rank");
}

double block_params_per_rank(std::int64_t hidden, std::int64_t heads, std::int64_t ffn_hidden,
                             std::int64_t t) {
  // TODO(11.4 block_params_per_rank): one transformer block's weights per rank, including the
  // small parameters that are not split (README, "The formulas").
  throw NotImplemented("11.4 block_params_per_rank");
}

std::int64_t all_reduces_per_block(Pass pass) {
  // TODO(11.4 all_reduces_per_block): how many all-reduces one block (attention + FFN) needs in
  // `pass`; Pass::both is the sum of the other two, and a value outside the enum throws.
  throw NotImplemented("11.4 all_reduces_per_block");
}

double all_reduce_payload_bytes(const TransformerShape& shape, double bytes_per_element) {
  // TODO(11.4 all_reduce_payload_bytes): the bytes of the tensor one of those all-reduces sums;
  // sizes below 1 and a non-positive bytes_per_element throw.
  throw NotImplemented("11.4 all_reduce_payload_bytes");
}

double block_bytes_sent_per_rank(const TransformerShape& shape, std::int64_t t,
                                 double bytes_per_element, Pass pass) {
  // TODO(11.4 block_bytes_sent_per_rank): the bytes one rank sends for a block's all-reduces in
  // `pass`, with ring accounting (section 11.2): 0 at t = 1, and not falling as t grows.
  throw NotImplemented("11.4 block_bytes_sent_per_rank");
}

}  // namespace mgpu::tensor_parallel
