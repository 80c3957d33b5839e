// Graded cases of 11.3's formulas: per-GPU training state and traffic at each ZeRO stage, the
// smallest GPU count that fits, and the DeepSpeed and Megatron-LM memory estimates.
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "11_3_zero/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace z = mgpu::zero;

namespace {

mgpu::PrecisionRecipe random_preset(Ctx& ctx) {
  int i = ctx.uniform_int(0, static_cast<int>(mgpu::kPrecisionPresets.size()) - 1);
  return mgpu::kPrecisionPresets[static_cast<std::size_t>(i)].recipe;
}

// A drawn model size, GPU count and recipe.
struct Point {
  double params;
  std::int64_t n;
  mgpu::PrecisionRecipe recipe;
};

Point draw_point(Ctx& ctx) {
  Point p;
  p.params = std::round(ctx.log_uniform(1e8, 1e12));
  p.n = ctx.uniform_int(1, 2048);
  p.recipe = random_preset(ctx);
  return p;
}

// The four parts (`parts(recipe, stage)`, an array of four) and the total (`total(recipe,
// stage)`) at stages 0 to 3: for the drawn recipe ("parts", "totals"), then for every preset at
// the same count and N ("every_preset_parts", "every_preset_totals"), where a drawn recipe could
// make a wrong part right by chance.
template <class Parts, class Total>
void emit_every_stage(Ctx& ctx, const mgpu::PrecisionRecipe& drawn, Parts parts, Total total) {
  auto stages = [&](const mgpu::PrecisionRecipe& recipe, std::vector<double>& all,
                    std::vector<double>& totals) {
    for (int stage = 0; stage <= 3; ++stage) {
      const auto four = parts(recipe, stage);
      all.insert(all.end(), four.begin(), four.end());
      totals.push_back(total(recipe, stage));
    }
  };
  std::vector<double> all, totals, every_all, every_totals;
  stages(drawn, all, totals);
  ctx.emit("parts", all);
  ctx.emit("totals", totals);
  for (const auto& preset : mgpu::kPrecisionPresets) stages(preset.recipe, every_all, every_totals);
  ctx.emit("every_preset_parts", every_all);
  ctx.emit("every_preset_totals", every_totals);
}

}  // namespace

MGPU_CASE("11_3.state_per_gpu") {
  // Every preset as well as the drawn one: some keep no master copy (fp32 Adam, pure bf16), where
  // a master left out or left unsharded is right by chance.
  const Point p = draw_point(ctx);
  emit_every_stage(
      ctx, p.recipe,
      [&](const mgpu::PrecisionRecipe& r, int stage) {
        const z::StateBytes s = z::zero_state_per_gpu(p.params, r, stage, p.n);
        return std::array{s.weights_bytes, s.grads_bytes, s.master_bytes, s.optimizer_bytes};
      },
      [&](const mgpu::PrecisionRecipe& r, int stage) {
        return z::zero_state_bytes_per_gpu(p.params, r, stage, p.n);
      });
  // The stage just outside both ends (every stage inside is priced above).
  ctx.emit_rejects("rejects_stage_4", [&] { z::zero_state_per_gpu(p.params, p.recipe, 4, p.n); });
  ctx.emit_rejects("rejects_negative_stage",
                   [&] { z::zero_state_per_gpu(p.params, p.recipe, -1, p.n); });
}

MGPU_CASE("11_3.traffic_per_gpu") {
  // Every preset as well as the drawn one: all but one store weights and gradients in the same
  // type, where gathers sized by the gradient bytes are right by chance.
  const Point p = draw_point(ctx);
  emit_every_stage(
      ctx, p.recipe,
      [&](const mgpu::PrecisionRecipe& r, int stage) {
        const z::TrafficBytes t = z::zero_traffic_per_gpu(p.params, r, stage, p.n);
        return std::array{t.all_reduce_bytes, t.reduce_scatter_bytes, t.all_gather_forward_bytes,
                          t.all_gather_backward_bytes};
      },
      [&](const mgpu::PrecisionRecipe& r, int stage) {
        return z::zero_traffic_bytes_per_gpu(p.params, r, stage, p.n);
      });
  // The stage just outside both ends: 4 is not stage 3 again, -1 not stage 0.
  ctx.emit_rejects("rejects_stage_4", [&] { z::zero_traffic_per_gpu(p.params, p.recipe, 4, p.n); });
  ctx.emit_rejects("rejects_negative_stage",
                   [&] { z::zero_traffic_per_gpu(p.params, p.recipe, -1, p.n); });
}

MGPU_CASE("11_3.min_gpus_to_fit") {
  double params = std::round(ctx.log_uniform(1e9, 1e12));
  double capacity = ctx.pick<double>({24e9, 40e9, 80e9, 141e9});
  std::int64_t multiple = ctx.pick<std::int64_t>({1, 8});
  std::vector<double> out;
  for (int stage = 0; stage <= 3; ++stage) {
    auto n = z::min_gpus_to_fit(params, mgpu::kBf16MixedAdam, stage, capacity, multiple);
    out.push_back(n ? static_cast<double>(*n) : -1.0);  // -1: no GPU count fits
  }
  ctx.emit("gpus", out);
  // Fixed points, whatever was drawn above (one capacity, one multiple): the header's example
  // (70e9 on 80 GB, 1120 / 80 = 14 GPUs exactly at stage 3, 16 in whole servers), and 13e9 and
  // 405e9 on 24 and 80 GB, one GPU at a time and in whole 8-GPU servers, where sharded / room is
  // mostly not a whole number and the count mostly no multiple of 8.
  std::vector<double> fixed;
  for (double p : {70e9, 13e9, 405e9})
    for (double cap : {24e9, 80e9})
      for (std::int64_t mult : {1, 8})
        for (int stage = 0; stage <= 3; ++stage) {
          auto n = z::min_gpus_to_fit(p, mgpu::kBf16MixedAdam, stage, cap, mult);
          fixed.push_back(n ? static_cast<double>(*n) : -1.0);
        }
  ctx.emit("fixed_gpus", fixed);
  // The branch where nothing needs sharding: 1e9 parameters (16 GB at stage 0) on 24 GB, and 5e9
  // (80 GB, exactly full) on 80 GB, where a full GPU still fits. Every stage fits on one GPU, so
  // the answer is one server's worth when GPUs come in multiples of 8, not 1.
  std::vector<double> fits;
  for (const auto& [p, cap] : {std::pair{1e9, 24e9}, std::pair{5e9, 80e9}})
    for (std::int64_t mult : {1, 8})
      for (int stage = 0; stage <= 3; ++stage) {
        auto n = z::min_gpus_to_fit(p, mgpu::kBf16MixedAdam, stage, cap, mult);
        fits.push_back(n ? static_cast<double>(*n) : -1.0);
      }
  ctx.emit("already_fits_gpus", fits);
  // Just outside the capacity and multiple bounds (both must be at least 1 byte / 1 GPU).
  ctx.emit_rejects("rejects_zero_capacity",
                   [] { z::min_gpus_to_fit(1e9, mgpu::kBf16MixedAdam, 3, 0.0, 1); });
  ctx.emit_rejects("rejects_zero_multiple",
                   [] { z::min_gpus_to_fit(1e9, mgpu::kBf16MixedAdam, 3, 24e9, 0); });
}

MGPU_CASE("11_3.deepspeed_estimates") {
  double params = std::round(ctx.log_uniform(1e8, 1e11));
  double largest = std::round(params * ctx.uniform_real(0.001, 0.05));
  std::vector<double> out;
  for (bool offload : {false, true})
    for (bool offload_params : {false, true})
      for (bool zero_init : {false, true}) {
        z::DeepSpeedSetup s;
        s.gpus_per_node = ctx.pick<std::int64_t>({1, 4, 8});
        s.nodes = ctx.uniform_int(1, 16);
        s.cpu_offload = offload;
        s.cpu_offload_params = offload && offload_params;
        s.zero_init = zero_init;
        s.additional_buffer_factor = ctx.pick<double>({1.0, 1.5});
        auto e2 = z::deepspeed_zero2_estimate(params, s);
        auto e3 = z::deepspeed_zero3_estimate(params, largest, s);
        out.insert(out.end(), {e2.gpu_bytes, e2.cpu_bytes, e3.gpu_bytes, e3.cpu_bytes});
      }
  ctx.emit("bytes", out);
  // The bounds at both ends: a largest layer of the whole model and a buffer factor of exactly 1
  // are priced; a layer above the model or below 0, a factor below 1 and 0 nodes are rejected.
  z::DeepSpeedSetup one;
  one.additional_buffer_factor = 1.0;
  const z::DeepSpeedEstimate whole = z::deepspeed_zero3_estimate(params, params, one);
  const z::DeepSpeedEstimate at_one = z::deepspeed_zero2_estimate(params, one);
  ctx.emit("inside_bounds", std::vector<double>{whole.gpu_bytes, whole.cpu_bytes, at_one.gpu_bytes,
                                                at_one.cpu_bytes});
  ctx.emit_rejects("zero3_rejects_layer_above_params",
                   [&] { z::deepspeed_zero3_estimate(params, params + 1, {}); });
  ctx.emit_rejects("zero3_rejects_negative_layer",
                   [&] { z::deepspeed_zero3_estimate(params, -1, {}); });
  z::DeepSpeedSetup thin = one, empty = one;
  thin.additional_buffer_factor = 0.5;
  empty.nodes = 0;
  ctx.emit_rejects("zero2_rejects_factor_below_one",
                   [&] { z::deepspeed_zero2_estimate(params, thin); });
  ctx.emit_rejects("zero2_rejects_zero_nodes", [&] { z::deepspeed_zero2_estimate(params, empty); });
}

MGPU_CASE("11_3.megatron_state") {
  double params = std::round(ctx.log_uniform(1e8, 1e12));
  std::int64_t n = ctx.uniform_int(1, 512);
  std::vector<double> out;
  for (auto p :
       {z::MegatronPrecision::fp16_params_fp16_grads, z::MegatronPrecision::bf16_params_fp32_grads,
        z::MegatronPrecision::fp32_params_fp32_grads})
    for (bool distributed : {false, true})
      out.push_back(z::megatron_state_bytes_per_gpu(params, p, distributed, n));
  ctx.emit("bytes", out);
}
