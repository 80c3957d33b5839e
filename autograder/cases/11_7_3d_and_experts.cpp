// Graded cases of 11.7's formulas: the rank layout of tp x pp x dp, per-GPU memory and traffic
// of a layout, and expert parallelism's placement and all-to-all volume.
#include "11_7_3d_and_experts/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace ly = mgpu::layout;

namespace {

ly::Layout random_layout(Ctx& ctx) {
  return {ctx.pick<std::int64_t>({1, 2, 4, 8}), ctx.pick<std::int64_t>({1, 2, 4}), ctx.uniform_int(1, 8)};
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
  m.recompute = ctx.pick({mgpu::memory::Recompute::none, mgpu::memory::Recompute::selective, mgpu::memory::Recompute::full});
  return m;
}

}  // namespace

MGPU_CASE("11_7.layout_and_coordinates") {
  ly::Layout l = random_layout(ctx);
  std::int64_t n = ly::layout_gpus(l);
  ctx.emit("gpus", static_cast<double>(n));
  ctx.emit("text_example", static_cast<double>(ly::layout_gpus({8, 4, 32})));
  std::vector<double> coords, round_trip;
  for (std::int64_t r = 0; r < n; ++r) {
    ly::RankCoords c = ly::rank_coordinates(r, l);
    coords.insert(coords.end(), {static_cast<double>(c.tp), static_cast<double>(c.pp), static_cast<double>(c.dp)});
    round_trip.push_back(static_cast<double>(ly::global_rank(c, l)));
  }
  ctx.emit("coordinates", coords);
  ctx.emit("global_rank", round_trip);
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
  ctx.emit_rejects("check_rejects_bad_layout", [] { ly::check_layout({8, 4, 16}, 1024, 8); });
}

MGPU_CASE("11_7.per_gpu_memory") {
  ly::LayoutModel m = random_model(ctx);
  ly::GpuMemory g = ly::per_gpu_memory(m);
  ctx.emit("parts", std::vector<double>{g.weights_bytes, g.grads_bytes, g.master_bytes, g.optimizer_bytes, g.activation_bytes});
}

MGPU_CASE("11_7.per_gpu_traffic") {
  ly::LayoutModel m = random_model(ctx);
  ly::GpuTraffic t = ly::per_gpu_traffic(m);
  ctx.emit("parts", std::vector<double>{t.data_parallel_bytes, t.tensor_parallel_bytes, t.pipeline_bytes});
}

MGPU_CASE("11_7.experts") {
  std::int64_t ranks = ctx.pick<std::int64_t>({1, 2, 4, 8, 16});
  std::int64_t experts = ranks * ctx.uniform_int(1, 8);
  std::int64_t top_k = ctx.uniform_int(1, static_cast<int>(std::min<std::int64_t>(experts, 4)));
  ctx.emit("experts_per_rank", static_cast<double>(ly::experts_per_rank(experts, ranks)));
  ctx.emit("all_to_all_bytes", ly::expert_all_to_all_bytes_per_rank(ctx.uniform_int(0, 65536), ctx.pick<std::int64_t>({1024, 4096}),
                                                                    top_k, experts, ranks, 2));
  ctx.emit_rejects("rejects_uneven_experts", [] { ly::experts_per_rank(64, 6); });
}
