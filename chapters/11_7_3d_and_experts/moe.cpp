// 11.7 Expert parallelism: your implementation. Route each token to its top-k experts, send the
// copies to the experts' ranks with all_to_all_v, bring the outputs back, and run it all
// backward. The contract (shapes, orders, what is kept) is in moe.hpp.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_7 <id>` gives hints for it.
#include "11_7_3d_and_experts/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace mgpu::experts {

std::int64_t expert_capacity(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                             double capacity_factor) {
  // TODO(11.7 expert_capacity): the slots one expert offers one rank's tokens: a perfectly even
  //   routing must fit exactly at factor 1.0, and the factor scales that share. Bad arguments
  //   throw std::invalid_argument (args::check_count, check_positive, fail).
  throw NotImplemented("11.7 expert_capacity");
}

Routing moe_route(MatIn x, MatIn router, std::int64_t top_k, double capacity_factor) {
  // TODO(11.7 moe_route): fill a Routing for x's tokens: probs is the row-wise softmax of
  //   x router (stable even for large logits), each token's k best experts best first (a tie
  //   goes to the lower expert), their probabilities as gates, and the capacity rule of the
  //   header deciding kept and dropped. Calls: expert_capacity, std::stable_sort.
  throw NotImplemented("11.7 moe_route");
}

Dispatch moe_dispatch(Rank& rank, Comm& ep, const MoeLayer& layer, MatIn x,
                      const Routing& routing) {
  // TODO(11.7 moe_dispatch): every kept copy's row of x reaches the rank hosting its expert,
  //   in the block order moe.hpp fixes, and every field of Dispatch is filled on both sides.
  //   A receiver cannot know its counts in advance: exchange them first. Calls:
  //   ep.all_to_all (a std::vector<double> of E counts each way), then ep.all_to_all_v on a
  //   packed Buffer (Category::comm) into d.received (Category::activations).
  throw NotImplemented("11.7 moe_dispatch");
}

Buffer<float> moe_combine(Rank& rank, Comm& ep, const Dispatch& dispatch, MatIn expert_out,
                          const Routing& routing, MatOut y) {
  // TODO(11.7 moe_combine): the experts' outputs travel back the way their inputs came, and y
  //   is each token's gate-weighted sum of its returned copies (zeros when all were dropped).
  //   Return the copies (Category::activations) for the backward pass. Calls: ep.all_to_all_v
  //   with the dispatch's counts; which side's counts does each argument take now?
  throw NotImplemented("11.7 moe_combine");
}

MoeCache moe_forward(Rank& rank, Comm& ep, const MoeLayer& layer, MatIn x, MatOut y) {
  // TODO(11.7 moe_forward): y equals the unsplit layer's output for this rank's tokens. Each
  //   local expert multiplies exactly the rows it was sent (dispatch.rows_from says how many,
  //   source by source), and their FLOPs are charged with rank.compute(model::linear_flops(...),
  //   label). The cache holds what moe_backward needs.
  throw NotImplemented("11.7 moe_forward");
}

void moe_backward(Rank& rank, Comm& ep, MoeLayer& layer, MatIn x, const MoeCache& cache, MatIn dy,
                  MatOut dx) {
  // TODO(11.7 moe_backward): dx, layer.dw and layer.drouter as the unsplit layer's backward
  //   gives them (dw and drouter accumulate). Three paths: the output gradients to the experts
  //   and the input gradients back (two ep.all_to_all_v with the dispatch's counts), each
  //   gate's gradient through the softmax into the router and x, and a dropped copy adds
  //   nothing anywhere. Charge the experts' backward matmuls with rank.compute.
  throw NotImplemented("11.7 moe_backward");
}

}  // namespace mgpu::experts
