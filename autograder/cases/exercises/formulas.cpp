// Graded cases of the module's exercises: the numbers the text asks for at the text's inputs
// (graded with the text's own tolerances, see the rubric), at fixed edge points and at random
// inputs, and the classification of the four techniques.
#include "exercises/formulas.hpp"
#include "case.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace mgpu::grade;
namespace ex = mgpu::exercises;

MGPU_CASE("ex.zero_state_gb") {
  ctx.emit("zero3_text", ex::zero3_state_gb_per_gpu(70e9, 64));
  ctx.emit("zero1_text", ex::zero1_state_gb_per_gpu(7e9, 8));
  // One GPU: nothing to shard, both stages hold all 16 bytes per parameter (112 GB for 7e9).
  ctx.emit("one_gpu", std::vector<double>{ex::zero3_state_gb_per_gpu(7e9, 1),
                                          ex::zero1_state_gb_per_gpu(7e9, 1)});
  double params = std::round(ctx.log_uniform(1e8, 1e12));
  std::int64_t gpus = ctx.uniform_int(2, 4096);
  ctx.emit("zero3_random", ex::zero3_state_gb_per_gpu(params, gpus));
  ctx.emit("zero1_random", ex::zero1_state_gb_per_gpu(params, gpus));
  // The bounds from outside (their inside ends, one GPU above and no parameters here, are fine):
  // an answer written as a closed form must still validate.
  ctx.emit("no_params",
           std::vector<double>{ex::zero3_state_gb_per_gpu(0, 8), ex::zero1_state_gb_per_gpu(0, 8)});
  ctx.emit_rejects("zero3_rejects_zero_gpus", [] { ex::zero3_state_gb_per_gpu(7e9, 0); });
  ctx.emit_rejects("zero3_rejects_negative_params", [] { ex::zero3_state_gb_per_gpu(-1, 8); });
  ctx.emit_rejects("zero1_rejects_zero_gpus", [] { ex::zero1_state_gb_per_gpu(7e9, 0); });
  ctx.emit_rejects("zero1_rejects_negative_params", [] { ex::zero1_state_gb_per_gpu(-1, 8); });
}

MGPU_CASE("ex.bubble_fraction") {
  ctx.emit("text", ex::bubble_fraction(4, 8));
  // One stage (no bubble), one micro-batch ((p-1)/p), fewer micro-batches than stages, and
  // m = 27 with p = 4, where the bubble is exactly 3/30 = 0.1.
  ctx.emit("edges", std::vector<double>{ex::bubble_fraction(1, 8), ex::bubble_fraction(4, 1),
                                        ex::bubble_fraction(8, 3), ex::bubble_fraction(4, 27)});
  ctx.emit("random", ex::bubble_fraction(ctx.uniform_int(1, 64), ctx.uniform_int(1, 256)));
  // Just below the inside ends p = 1 and m = 1 above.
  ctx.emit_rejects("rejects_zero_stages", [] { ex::bubble_fraction(0, 8); });
  ctx.emit_rejects("rejects_zero_micro_batches", [] { ex::bubble_fraction(4, 0); });
}

MGPU_CASE("ex.techniques") {
  std::vector<double> effect, critical;
  for (auto t : {ex::Technique::data_parallel, ex::Technique::zero, ex::Technique::tensor_parallel,
                 ex::Technique::pipeline_parallel}) {
    effect.push_back(ex::training_state_effect(t) == ex::Effect::reduces_memory_per_gpu ? 1.0
                                                                                        : 0.0);
    critical.push_back(ex::communication_on_critical_path(t) ? 1.0 : 0.0);
  }
  ctx.emit("reduces_memory", effect);
  ctx.emit("critical_path", critical);
  // Just outside the four values on both sides: no Technique, so both functions reject them.
  for (const int outside : {-1, 4}) {
    const auto t = static_cast<ex::Technique>(outside);
    const std::string at = outside < 0 ? "_negative" : "_past_the_last";
    ctx.emit_rejects("effect_rejects" + at, [&] { ex::training_state_effect(t); });
    ctx.emit_rejects("critical_path_rejects" + at, [&] { ex::communication_on_critical_path(t); });
  }
}

MGPU_CASE("ex.tensor_parallel_links") {
  mgpu::data_parallel::LinkModel nvlink{2e-6, 450e9}, network{10e-6, 50e9};
  auto c = ex::tensor_parallel_link_comparison(2048, 1, 8192, 8, 2, nvlink, network);
  ctx.emit("text", std::vector<double>{c.payload_bytes, c.intra_node_seconds, c.inter_node_seconds,
                                       c.slowdown});
  // t = 2: the smallest group, where a ring's 2(t-1)/t is exactly 1.
  auto two = ex::tensor_parallel_link_comparison(2048, 1, 8192, 2, 2, nvlink, network);
  ctx.emit("two_ranks", std::vector<double>{two.payload_bytes, two.intra_node_seconds,
                                            two.inter_node_seconds, two.slowdown});
  auto r = ex::tensor_parallel_link_comparison(
      ctx.pick<std::int64_t>({1024, 4096}), ctx.uniform_int(1, 4),
      ctx.pick<std::int64_t>({4096, 12288}), ctx.pick<std::int64_t>({2, 4, 8}), 2, nvlink, network);
  ctx.emit("random", std::vector<double>{r.payload_bytes, r.intra_node_seconds,
                                         r.inter_node_seconds, r.slowdown});
  // fp32 activations of 2 sequences on 4 ranks, at a fixed point: the text and the points above
  // are all bf16 (2 bytes), and the drawn micro-batch may be 1.
  auto fp32 = ex::tensor_parallel_link_comparison(1024, 2, 4096, 4, 4, nvlink, network);
  ctx.emit("fp32_two_sequences", std::vector<double>{fp32.payload_bytes, fp32.intra_node_seconds,
                                                     fp32.inter_node_seconds, fp32.slowdown});
  ctx.emit_rejects("rejects_one_rank", [&] {
    ex::tensor_parallel_link_comparison(2048, 1, 8192, 1, 2, nvlink, network);
  });
  ctx.emit_rejects("rejects_zero_bytes_per_element", [&] {
    ex::tensor_parallel_link_comparison(2048, 1, 8192, 8, 0, nvlink, network);
  });
}
