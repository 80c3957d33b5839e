// Graded cases of 11.7's formulas: the rank layout of tp x pp x dp, per-GPU memory and traffic
// of a layout (over a fixed grid of edge layouts plus a drawn one), and expert parallelism's
// placement and all-to-all volume. The process grid's cases are in
// 11_7_3d_and_experts/grid.host.cpp, the MoE layer's in 11_7_3d_and_experts/moe.host.cpp.
#include "11_7_3d_and_experts/formulas.hpp"
#include "case.hpp"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace mgpu::grade;
namespace ly = mgpu::layout;

namespace {

ly::Layout random_layout(Ctx& ctx) {
  return {ctx.pick<std::int64_t>({1, 2, 4, 8}), ctx.pick<std::int64_t>({1, 2, 4}),
          ctx.uniform_int(1, 8)};
}

ly::LayoutModel random_model(Ctx& ctx) {
  ly::LayoutModel m;
  m.layout = random_layout(ctx);
  m.params = std::round(ctx.log_uniform(1e9, 1e12));
  m.zero_stage = ctx.uniform_int(0, 3);
  m.shape.heads = 64;
  m.shape.hidden = 8192;
  m.shape.seq = ctx.pick<std::int64_t>({2048, 4096});
  m.shape.micro_batch = ctx.uniform_int(1, 4);
  m.shape.layers = m.layout.pp * ctx.uniform_int(1, 20);
  m.micro_batches = ctx.uniform_int(1, 32);
  m.activation_bytes_per_layer = ctx.log_uniform(1e8, 1e10);
  m.recompute =
      ctx.pick({mgpu::Recompute::none, mgpu::Recompute::selective, mgpu::Recompute::full});
  return m;
}

// A fixed model on `layout`: 80 layers (every pp of the grid divides it), the text's width,
// 1e9 activation bytes per layer, so every part of the memory and traffic is non-zero.
ly::LayoutModel fixed_model(ly::Layout layout, int zero_stage, std::int64_t micro_batches,
                            mgpu::Recompute recompute = mgpu::Recompute::none) {
  ly::LayoutModel m;
  m.layout = layout;
  m.params = 70e9;
  m.zero_stage = zero_stage;
  m.shape = {4096, 1, 8192, 64, 80};
  m.micro_batches = micro_batches;
  m.activation_bytes_per_layer = 1e9;
  m.recompute = recompute;
  return m;
}

// Fixed edge points of a layout, each named so feedback says which one is wrong: one GPU; the
// text's 8 x 4 x 32 at every ZeRO stage (stage 2 must shard gradients, stage 3 weights too) with
// more micro-batches than stages; fewer micro-batches than stages and a single one (1F1B holds
// min(m, p)); two stages (one direction of pipeline traffic each); full and selective recompute
// (full reruns the forward's tensor-parallel all-reduces, selective does not). Every pipelined
// point but one has tp > 1, where one GPU sends only 1/tp of its stage's boundary bytes.
std::vector<std::pair<std::string, ly::LayoutModel>> edge_models() {
  using mgpu::Recompute;
  std::vector<std::pair<std::string, ly::LayoutModel>> points{
      {"one_gpu", fixed_model({1, 1, 1}, 0, 1)}};
  for (int stage = 0; stage <= 3; ++stage)
    points.push_back(
        {"text_layout_zero" + std::to_string(stage), fixed_model({8, 4, 32}, stage, 8)});
  points.push_back({"micro_batches_below_stages", fixed_model({2, 8, 2}, 1, 3)});
  points.push_back({"one_micro_batch", fixed_model({1, 4, 4}, 2, 1)});
  points.push_back({"two_stages", fixed_model({2, 2, 4}, 0, 6)});
  points.push_back({"full_recompute", fixed_model({4, 2, 2}, 3, 4, Recompute::full)});
  points.push_back({"selective_recompute", fixed_model({4, 2, 2}, 3, 4, Recompute::selective)});
  return points;
}

}  // namespace

MGPU_CASE("11_7.layout_and_coordinates") {
  // A fixed layout with every degree above 1 and all three different (so swapped axes or the
  // wrong fastest axis show), then a drawn one.
  for (const auto& [name, l] :
       {std::pair<std::string, ly::Layout>{"fixed", {2, 3, 4}}, {"drawn", random_layout(ctx)}}) {
    const std::int64_t n = ly::layout_gpus(l);
    ctx.emit(name + "_gpus", static_cast<double>(n));
    std::vector<double> coords, round_trip;
    for (std::int64_t r = 0; r < n; ++r) {
      ly::RankCoords c = ly::rank_coordinates(r, l);
      coords.insert(coords.end(), {static_cast<double>(c.tp), static_cast<double>(c.pp),
                                   static_cast<double>(c.dp)});
      round_trip.push_back(static_cast<double>(ly::global_rank(c, l)));
    }
    ctx.emit(name + "_coordinates", coords);
    ctx.emit(name + "_global_rank", round_trip);
  }
  ctx.emit("text_example", static_cast<double>(ly::layout_gpus({8, 4, 32})));
  // Every index just outside both ends of its range on the fixed 2 x 3 x 4 layout (the inside
  // ends, 0 and the degree - 1, are in the loops above): a rank of -1 or 24, and each coordinate
  // at -1 and at its degree. A check against one end only, or with > for >=, lets one through.
  const ly::Layout l{2, 3, 4};
  ctx.emit_rejects("coordinates_reject_rank_negative", [&] { ly::rank_coordinates(-1, l); });
  ctx.emit_rejects("coordinates_reject_rank_gpus", [&] { ly::rank_coordinates(24, l); });
  const ly::RankCoords inside{1, 2, 3};  // the last index on every axis, fine
  ctx.emit("global_rank_last", static_cast<double>(ly::global_rank(inside, l)));
  using Axis = std::int64_t ly::RankCoords::*;
  for (const auto& [axis, member, degree] :
       {std::tuple<std::string, Axis, std::int64_t>{"tp", &ly::RankCoords::tp, l.tp},
        {"pp", &ly::RankCoords::pp, l.pp},
        {"dp", &ly::RankCoords::dp, l.dp}})
    for (const std::int64_t outside : {std::int64_t{-1}, degree}) {
      ly::RankCoords c = inside;
      c.*member = outside;
      ctx.emit_rejects("global_rank_rejects_" + axis + (outside < 0 ? "_negative" : "_degree"),
                       [&] { ly::global_rank(c, l); });
    }
  // A degree is at least 1 (1 is the one_gpu layout above); 0 on the last axis, which a check
  // of tp and pp alone misses, has the product 0 instead of a rejection.
  ctx.emit_rejects("gpus_rejects_zero_dp", [] { ly::layout_gpus({2, 3, 0}); });
}

MGPU_CASE("11_7.layout_problem") {
  // 1 where the layout is reported as a problem, 0 where it is fine; the messages are free text.
  std::vector<double> flags;
  for (int i = 0; i < 8; ++i) {
    ly::Layout l = random_layout(ctx);
    std::int64_t gpus = ctx.uniform_int(0, 1) ? ly::layout_gpus(l) : ctx.uniform_int(1, 512);
    std::int64_t per_node = ctx.pick<std::int64_t>({4, 8});
    std::int64_t layers = ctx.pick<std::int64_t>({0, 24, 32});
    flags.push_back(ly::layout_problem(l, gpus, per_node, layers).has_value() ? 1.0 : 0.0);
  }
  ctx.emit("has_problem", flags);
  // The draws above almost only ever break the product (their pp always divides 24 and 32, their
  // tp always divides the node when it fits in it). One fixed layout per check, each fine but for
  // that check, and layouts right at the limits that are fine.
  struct Fixed {
    ly::Layout layout;
    std::int64_t gpus, per_node, layers;
  };
  const Fixed fixed[] = {
      {{0, 2, 2}, 0, 8, 0},       // a degree below 1 (the product 0 matches gpus = 0)
      {{3, 2, 4}, 24, 8, 0},      // tp = 3 fits in a node of 8 but does not divide it
      {{8, 2, 2}, 32, 4, 0},      // tp = 8 is above a node of 4
      {{2, 5, 2}, 20, 8, 32},     // pp = 5 does not divide 32 layers
      {{8, 4, 32}, 1024, 8, 32},  // the text's layout: tp fills the node exactly, fine
      {{2, 5, 2}, 20, 8, 0},      // layers = 0 skips the pp check, fine
      {{1, 1, 1}, 1, 1, 1}};      // one GPU, fine
  std::vector<double> fixed_flags;
  for (const Fixed& f : fixed)
    fixed_flags.push_back(
        ly::layout_problem(f.layout, f.gpus, f.per_node, f.layers).has_value() ? 1.0 : 0.0);
  ctx.emit("fixed_has_problem", fixed_flags);
  ctx.emit_rejects("check_rejects_bad_layout", [] { ly::check_layout({8, 4, 16}, 1024, 8); });
  ctx.emit_rejects("check_rejects_uneven_stages", [] { ly::check_layout({2, 5, 2}, 20, 8, 32); });
}

MGPU_CASE("11_7.per_gpu_memory") {
  for (const auto& [name, model] : edge_models()) {
    const ly::GpuMemory g = ly::per_gpu_memory(model);
    ctx.emit(name, std::vector<double>{g.weights_bytes, g.grads_bytes, g.master_bytes,
                                       g.optimizer_bytes, g.activation_bytes});
  }
  const ly::GpuMemory g = ly::per_gpu_memory(random_model(ctx));
  ctx.emit("drawn", std::vector<double>{g.weights_bytes, g.grads_bytes, g.master_bytes,
                                        g.optimizer_bytes, g.activation_bytes});
  // The ZeRO stage just outside both ends (0 and 3 are priced above): -1 is no stage, and 4 is not
  // stage 3 again.
  for (const int stage : {-1, 4})
    ctx.emit_rejects("rejects_zero_stage_" + std::string(stage < 0 ? "negative" : "4"), [&] {
      ly::per_gpu_memory(fixed_model({8, 4, 32}, stage, 8));
    });
}

MGPU_CASE("11_7.per_gpu_traffic") {
  for (const auto& [name, model] : edge_models()) {
    const ly::GpuTraffic t = ly::per_gpu_traffic(model);
    ctx.emit(name,
             std::vector<double>{t.data_parallel_bytes, t.tensor_parallel_bytes, t.pipeline_bytes});
  }
  const ly::GpuTraffic t = ly::per_gpu_traffic(random_model(ctx));
  ctx.emit("drawn",
           std::vector<double>{t.data_parallel_bytes, t.tensor_parallel_bytes, t.pipeline_bytes});
  // The ZeRO stage just outside both ends, as for the memory.
  for (const int stage : {-1, 4})
    ctx.emit_rejects("rejects_zero_stage_" + std::string(stage < 0 ? "negative" : "4"), [&] {
      ly::per_gpu_traffic(fixed_model({8, 4, 32}, stage, 8));
    });
}

MGPU_CASE("11_7.experts") {
  std::int64_t ranks = ctx.pick<std::int64_t>({1, 2, 4, 8, 16});
  std::int64_t experts = ranks * ctx.uniform_int(1, 8);
  std::int64_t top_k = ctx.uniform_int(1, static_cast<int>(std::min<std::int64_t>(experts, 4)));
  ctx.emit("experts_per_rank", static_cast<double>(ly::experts_per_rank(experts, ranks)));
  ctx.emit("all_to_all_bytes", ly::expert_all_to_all_bytes_per_rank(
                                   ctx.uniform_int(0, 65536), ctx.pick<std::int64_t>({1024, 4096}),
                                   top_k, experts, ranks, 2));
  // Fixed points: 64 experts on 8 ranks with top-2 routing, and one rank (nothing leaves it).
  ctx.emit("fixed_all_to_all_bytes",
           std::vector<double>{ly::expert_all_to_all_bytes_per_rank(4096, 4096, 2, 64, 8, 2),
                               ly::expert_all_to_all_bytes_per_rank(4096, 4096, 2, 8, 1, 2)});
  ctx.emit_rejects("rejects_uneven_experts", [] { ly::experts_per_rank(64, 6); });
  ctx.emit_rejects("rejects_top_k_above_experts",
                   [] { ly::expert_all_to_all_bytes_per_rank(16, 8, 3, 2, 2, 2); });
  ctx.emit_rejects("rejects_negative_tokens",
                   [] { ly::expert_all_to_all_bytes_per_rank(-1, 8, 1, 2, 2, 2); });
  // top_k's lower end: a token routed nowhere is rejected (its inside end, 1, is below).
  ctx.emit_rejects("rejects_top_k_zero",
                   [] { ly::expert_all_to_all_bytes_per_rank(16, 8, 0, 2, 2, 2); });
  // The inside ends of the same two bounds: a token that picks every expert (top_k == experts)
  // and a rank with no tokens are both allowed.
  ctx.emit("inside_bounds_all_to_all_bytes",
           std::vector<double>{ly::expert_all_to_all_bytes_per_rank(16, 8, 2, 2, 2, 2),
                               ly::expert_all_to_all_bytes_per_rank(0, 8, 1, 2, 2, 2)});
}
