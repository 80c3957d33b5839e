// 11.7 Context parallelism: your implementation. Split each sequence's tokens over the group,
// send keys and values round the ring while folding each visiting block into an online softmax,
// run it backward with the key and value gradients travelling home, and write the formulas of
// what it costs. The contract (shapes, orders, what is kept, what is sent) is in
// context_parallel.hpp.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_7 <id>` gives hints for it.
#include "11_7_3d_and_experts/context_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace mgpu::context {

std::vector<std::int64_t> cp_positions(std::int64_t seq, int ranks, int rank, Split split) {
  // TODO(11.7 cp_positions): the global positions of the tokens this rank holds, in the order
  //   the header gives, for both splits; reject what the header says it rejects (args::fail
  //   names the argument, its value and the fix).
  throw NotImplemented("11.7 cp_positions");
}

RingCache ring_attention_forward(Rank& rank, Comm& cp, const CpShape& shape, MatIn q, MatIn k,
                                 MatIn v, MatOut out) {
  // TODO(11.7 ring_attention_forward): out equals the unsplit causal attention for this rank's
  //   queries, although only one block of keys and values is here at a time. Start with
  //   check_cp_shape; keep the cache the header lists in Category::activations; charge the
  //   pairs the mask lets through with rank.compute. Calls: cp.isend, cp.irecv, cp_positions.
  throw NotImplemented("11.7 ring_attention_forward");
}

void ring_attention_backward(Rank& rank, Comm& cp, const CpShape& shape, const RingCache& cache,
                             MatIn d_out, MatOut dq, MatOut dk, MatOut dv) {
  // TODO(11.7 ring_attention_backward): dq, dk and dv equal the unsplit attention's gradients
  //   for this rank's tokens. The keys and values go round again; every rank a block visits adds
  //   its queries' share to that block's gradients, and those must end on the block's owner.
  throw NotImplemented("11.7 ring_attention_backward");
}

double cp_forward_bytes_per_rank(std::int64_t sequences, std::int64_t seq, std::int64_t width,
                                 int ranks, Split split) {
  // TODO(11.7 cp_forward_bytes_per_rank): what one rank puts on the ring in the forward pass.
  throw NotImplemented("11.7 cp_forward_bytes_per_rank");
}

double cp_backward_bytes_per_rank(std::int64_t sequences, std::int64_t seq, std::int64_t width,
                                  int ranks, Split split) {
  // TODO(11.7 cp_backward_bytes_per_rank): what one rank puts on the ring in the backward pass.
  throw NotImplemented("11.7 cp_backward_bytes_per_rank");
}

double cp_saved_activation_bytes_per_rank(std::int64_t sequences, std::int64_t seq,
                                          std::int64_t width, std::int64_t heads, int ranks,
                                          Split split) {
  // TODO(11.7 cp_saved_activation_bytes_per_rank): the bytes of one rank's RingCache.
  throw NotImplemented("11.7 cp_saved_activation_bytes_per_rank");
}

double cp_attention_flops(std::int64_t sequences, std::int64_t seq, std::int64_t width, int ranks,
                          int rank, Split split) {
  // TODO(11.7 cp_attention_flops): the forward FLOPs charged to one rank, counting only the
  //   (query, key) pairs the causal mask lets through.
  throw NotImplemented("11.7 cp_attention_flops");
}

}  // namespace mgpu::context
