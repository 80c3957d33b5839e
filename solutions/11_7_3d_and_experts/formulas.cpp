// 11.7 reference solution: 3D layouts (validity, rank numbering), per-GPU memory and traffic
// under a layout, and expert-parallel all-to-all volume.
// Implements chapters/11_7_3d_and_experts/formulas.hpp.
#include "11_7_3d_and_experts/formulas.hpp"
#include "11_7_3d_and_experts/checks.hpp"  // check_degrees, check_index, check_model (given)

#include "mgpu/check_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::layout {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

std::int64_t layout_gpus(const Layout& layout) {
  check_degrees("layout_gpus", layout);
  return layout.tp * layout.pp * layout.dp;
}

std::optional<std::string> layout_problem(const Layout& layout, std::int64_t gpus,
                                          std::int64_t gpus_per_node, std::int64_t layers) {
  const std::string tp = std::to_string(layout.tp);
  const std::string pp = std::to_string(layout.pp);
  const std::string dp = std::to_string(layout.dp);
  for (auto [name, value] :
       {std::pair{"tp", layout.tp}, std::pair{"pp", layout.pp}, std::pair{"dp", layout.dp},
        std::pair{"gpus", gpus}, std::pair{"gpus_per_node", gpus_per_node}})
    if (value < 1)
      return std::string(name) + "=" + std::to_string(value) + " is below 1: use 1 or more";
  if (layout.tp * layout.pp * layout.dp != gpus)
    return "tp*pp*dp = " + tp + "*" + pp + "*" + dp + " = " +
           std::to_string(layout.tp * layout.pp * layout.dp) + " but the cluster has " +
           std::to_string(gpus) + " GPUs: choose degrees whose product is " + std::to_string(gpus);
  if (layout.tp > gpus_per_node || gpus_per_node % layout.tp != 0)
    return "tp=" + tp + " does not divide gpus_per_node=" + std::to_string(gpus_per_node) +
           ": tensor parallelism must stay inside one node, use a divisor of " +
           std::to_string(gpus_per_node);
  if (layers > 0 && layers % layout.pp != 0)
    return "pp=" + pp + " does not divide layers=" + std::to_string(layers) +
           ": stages must have equal depth, use a divisor of " + std::to_string(layers);
  return std::nullopt;
}

void check_layout(const Layout& layout, std::int64_t gpus, std::int64_t gpus_per_node,
                  std::int64_t layers) {
  if (auto problem = layout_problem(layout, gpus, gpus_per_node, layers))
    throw std::invalid_argument("check_layout: " + *problem);
}

RankCoords rank_coordinates(std::int64_t rank, const Layout& layout) {
  check_index("rank_coordinates", "rank", rank, layout_gpus(layout));
  // tp varies fastest, so a node's consecutive ranks share everything but their tp index.
  RankCoords c;
  c.tp = rank % layout.tp;
  c.pp = (rank / layout.tp) % layout.pp;
  c.dp = rank / (layout.tp * layout.pp);
  return c;
}

std::int64_t global_rank(const RankCoords& coords, const Layout& layout) {
  check_degrees("global_rank", layout);
  check_index("global_rank", "coords.tp", coords.tp, layout.tp);
  check_index("global_rank", "coords.pp", coords.pp, layout.pp);
  check_index("global_rank", "coords.dp", coords.dp, layout.dp);
  return coords.tp + layout.tp * (coords.pp + layout.pp * coords.dp);
}

GpuMemory per_gpu_memory(const LayoutModel& model) {
  check_model("per_gpu_memory", model);
  const Layout& l = model.layout;
  // tp and pp each hold a slice of every parameter; ZeRO then shards that slice over dp.
  const double share = model.params / static_cast<double>(l.tp * l.pp);
  const double n = static_cast<double>(l.dp);
  const int stage = model.zero_stage;
  auto held = [&](bool sharded, double bytes) { return share * bytes / (sharded ? n : 1.0); };
  GpuMemory m;
  m.master_bytes = held(stage >= 1, model.recipe.bytes_master);
  m.optimizer_bytes = held(stage >= 1, model.recipe.bytes_optimizer);
  m.grads_bytes = held(stage >= 2, model.recipe.bytes_grads);
  m.weights_bytes = held(stage >= 3, model.recipe.bytes_weights);
  // 1F1B: the first stage holds min(m, pp) micro-batches of its layers' activations.
  const double layers_here = static_cast<double>(model.shape.layers / l.pp);
  const double in_flight = static_cast<double>(std::min(model.micro_batches, l.pp));
  m.activation_bytes = model.activation_bytes_per_layer * layers_here * in_flight;
  return m;
}

GpuTraffic per_gpu_traffic(const LayoutModel& model) {
  const char* where = "per_gpu_traffic";
  check_model(where, model);
  check_count(where, "shape.seq", model.shape.seq);
  check_count(where, "shape.micro_batch", model.shape.micro_batch);
  check_count(where, "shape.hidden", model.shape.hidden);
  check_positive(where, "bytes_per_activation", model.bytes_per_activation);
  const Layout& l = model.layout;
  const double share = model.params / static_cast<double>(l.tp * l.pp);
  const double m = static_cast<double>(model.micro_batches);
  const double activation = static_cast<double>(model.shape.seq) *
                            static_cast<double>(model.shape.micro_batch) *
                            static_cast<double>(model.shape.hidden) * model.bytes_per_activation;
  GpuTraffic t;

  // Data parallel: ZeRO's collectives on this GPU's slice, over the dp group.
  const double d = static_cast<double>(l.dp);
  const double f_dp = (d - 1.0) / d;
  const double g = share * model.recipe.bytes_grads;
  const double w = share * model.recipe.bytes_weights;
  switch (model.zero_stage) {
    case 0:
      t.data_parallel_bytes = 2.0 * f_dp * g;
      break;
    case 1:
    case 2:
      t.data_parallel_bytes = f_dp * (g + w);
      break;
    default:
      t.data_parallel_bytes = f_dp * (g + 2.0 * w);
      break;
  }

  // Tensor parallel: 2 all-reduces forward, 2 backward per layer and micro-batch, and the
  // forward's 2 again when full recompute reruns it.
  const double tp = static_cast<double>(l.tp);
  const double all_reduces = model.recompute == Recompute::full ? 6.0 : 4.0;
  const double layers_here = static_cast<double>(model.shape.layers / l.pp);
  t.tensor_parallel_bytes = layers_here * m * all_reduces * 2.0 * (tp - 1.0) / tp * activation;

  // Pipeline: a middle stage sends activations forward and gradients backward. The tp ranks of
  // a stage hold the same boundary tensor (or, under sequence parallelism, one slice each), so
  // each sends only its 1/tp slice across the boundary and the stage sends every tensor once.
  const double directions = l.pp >= 3 ? 2.0 : (l.pp == 2 ? 1.0 : 0.0);
  t.pipeline_bytes = directions * m * activation / tp;
  return t;
}

// ------------------------------------------------------------------ expert parallelism

std::int64_t experts_per_rank(std::int64_t experts, std::int64_t ranks) {
  check_count("experts_per_rank", "experts", experts);
  check_count("experts_per_rank", "ranks", ranks);
  if (experts % ranks != 0)
    fail("experts_per_rank", "ranks", std::to_string(ranks),
         "does not divide experts=" + std::to_string(experts) +
             ": use a rank count that divides the expert count");
  return experts / ranks;
}

double expert_all_to_all_bytes_per_rank(std::int64_t tokens_per_rank, std::int64_t hidden,
                                        std::int64_t top_k, std::int64_t experts,
                                        std::int64_t ranks, double bytes_per_element) {
  const char* where = "expert_all_to_all_bytes_per_rank";
  if (tokens_per_rank < 0)
    fail(where, "tokens_per_rank", std::to_string(tokens_per_rank), "is negative: use 0 or more");
  check_count(where, "hidden", hidden);
  check_count(where, "top_k", top_k);
  experts_per_rank(experts, ranks);  // validates experts and ranks
  if (top_k > experts)
    fail(where, "top_k", std::to_string(top_k),
         "exceeds experts=" + std::to_string(experts) + ": a token picks at most every expert");
  check_positive(where, "bytes_per_element", bytes_per_element);
  const double n = static_cast<double>(ranks);
  const double copies = static_cast<double>(tokens_per_rank) * static_cast<double>(top_k);
  const double leaving = copies * static_cast<double>(hidden) * bytes_per_element * (n - 1.0) / n;
  return 2.0 * leaving;  // dispatch out, combine back
}

}  // namespace mgpu::layout
