// Graded cases of the module's exercises: the numbers the text asks for, at the text's inputs and
// at random ones, and the classification of the four techniques.
#include "case.hpp"
#include "exercises/formulas.hpp"

using namespace mgpu::grade;
namespace ex = mgpu::exercises;

MGPU_CASE("ex.zero_state_gb") {
  ctx.emit("zero3_text", ex::zero3_state_gb_per_gpu(70e9, 64));
  ctx.emit("zero1_text", ex::zero1_state_gb_per_gpu(7e9, 8));
  double params = std::round(ctx.log_uniform(1e8, 1e12));
  std::int64_t gpus = ctx.uniform_int(1, 4096);
  ctx.emit("zero3_random", ex::zero3_state_gb_per_gpu(params, gpus));
  ctx.emit("zero1_random", ex::zero1_state_gb_per_gpu(params, gpus));
}

MGPU_CASE("ex.bubble_fraction") {
  ctx.emit("text", ex::bubble_fraction(4, 8));
  ctx.emit("random", ex::bubble_fraction(ctx.uniform_int(1, 64), ctx.uniform_int(1, 256)));
}

MGPU_CASE("ex.techniques") {
  std::vector<double> effect, critical;
  for (auto t : {ex::Technique::data_parallel, ex::Technique::zero, ex::Technique::tensor_parallel,
                 ex::Technique::pipeline_parallel}) {
    effect.push_back(ex::training_state_effect(t) == ex::Effect::reduces_memory_per_gpu ? 1.0 : 0.0);
    critical.push_back(ex::communication_on_critical_path(t) ? 1.0 : 0.0);
  }
  ctx.emit("reduces_memory", effect);
  ctx.emit("critical_path", critical);
}

MGPU_CASE("ex.tensor_parallel_links") {
  mgpu::data_parallel::LinkModel nvlink{2e-6, 450e9}, network{10e-6, 50e9};
  auto c = ex::tensor_parallel_link_comparison(2048, 1, 8192, 8, 2, nvlink, network);
  ctx.emit("text", std::vector<double>{c.payload_bytes, c.intra_node_seconds, c.inter_node_seconds, c.slowdown});
  auto r = ex::tensor_parallel_link_comparison(ctx.pick<std::int64_t>({1024, 4096}), ctx.uniform_int(1, 4),
                                               ctx.pick<std::int64_t>({4096, 12288}), ctx.pick<std::int64_t>({2, 4, 8}), 2,
                                               nvlink, network);
  ctx.emit("random", std::vector<double>{r.payload_bytes, r.intra_node_seconds, r.inter_node_seconds, r.slowdown});
}
