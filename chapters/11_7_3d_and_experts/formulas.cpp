// 11.7 skeleton: 3D layouts (validity, rank numbering), per-GPU memory and traffic under a
// layout, and expert-parallel all-to-all volume. The contract is in formulas.hpp; fill in each
// TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_7 <id>` gives hints for it.
#include "11_7_3d_and_experts/formulas.hpp"
#include "11_7_3d_and_experts/checks.hpp"  // check_degrees, check_index, check_model (given)

#include "mgpu/check_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::layout {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

std::int64_t layout_gpus(const Layout& layout) {
  // TODO(11.7 layout_gpus): validate with check_degrees.
  throw NotImplemented("11.7 layout_gpus");
}

std::optional<std::string> layout_problem(const Layout& layout, std::int64_t gpus,
                                          std::int64_t gpus_per_node, std::int64_t layers) {
  // TODO(11.7 layout_problem): the four rules of the header, in that order; return a message that
  //   names the values and the fix for the first one broken, std::nullopt when all hold.
  throw NotImplemented("11.7 layout_problem");
}

void check_layout(const Layout& layout, std::int64_t gpus, std::int64_t gpus_per_node,
                  std::int64_t layers) {
  // TODO(11.7 check_layout): turn layout_problem's message into an exception.
  throw NotImplemented("11.7 check_layout");
}

RankCoords rank_coordinates(std::int64_t rank, const Layout& layout) {
  // TODO(11.7 rank_coordinates): validate the rank (check_index against layout_gpus). Like digits
  //   of a number in a mixed radix: tp is the lowest digit, then pp, then dp.
  throw NotImplemented("11.7 rank_coordinates");
}

std::int64_t global_rank(const RankCoords& coords, const Layout& layout) {
  // TODO(11.7 global_rank): validate each coordinate, then put the digits back together.
  throw NotImplemented("11.7 global_rank");
}

GpuMemory per_gpu_memory(const LayoutModel& model) {
  // TODO(11.7 per_gpu_memory): the bytes of the busiest GPU (the first stage) as the header
  //   lists them, after check_model. ZeRO over dp acts on what tp and pp leave a GPU, by your
  //   11.3 rules rewritten here (chapters stay independent); the activations are those 1F1B
  //   keeps alive on the first stage (section 11.5).
  throw NotImplemented("11.7 per_gpu_memory");
}

GpuTraffic per_gpu_traffic(const LayoutModel& model) {
  // TODO(11.7 per_gpu_traffic): check_model plus the shape and bytes_per_activation. Three
  //   independent terms: ZeRO's collectives on the GPU's parameter share over dp; the tp
  //   all-reduces of every layer on this stage for every micro-batch (mind full recompute); the
  //   stage-boundary sends of a middle stage, of which one GPU sends only its tp share.
  throw NotImplemented("11.7 per_gpu_traffic");
}

// ------------------------------------------------------------------ expert parallelism

std::int64_t experts_per_rank(std::int64_t experts, std::int64_t ranks) {
  // TODO(11.7 experts_per_rank): validate (ranks divides experts).
  throw NotImplemented("11.7 experts_per_rank");
}

double expert_all_to_all_bytes_per_rank(std::int64_t tokens_per_rank, std::int64_t hidden,
                                        std::int64_t top_k, std::int64_t experts,
                                        std::int64_t ranks, double bytes_per_element) {
  // TODO(11.7 expert_all_to_all_bytes_per_rank): validate. How many token copies does the rank
  //   make, what fraction of them is bound for another rank under even routing, and how many times
  //   does each cross?
  throw NotImplemented("11.7 expert_all_to_all_bytes_per_rank");
}

}  // namespace mgpu::layout
