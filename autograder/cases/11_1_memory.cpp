// Graded cases of 11.1 (memory in training): bytes per parameter, training state, activation
// memory with tensor/sequence parallelism and recomputation, training FLOPs and time.
#include "11_1_memory/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace m = mgpu::memory;

namespace {

m::PrecisionRecipe random_preset(Ctx& ctx) {
  int i = ctx.uniform_int(0, static_cast<int>(m::kPrecisionPresets.size()) - 1);
  return m::kPrecisionPresets[static_cast<std::size_t>(i)].recipe;
}

m::TransformerShape random_shape(Ctx& ctx) {
  m::TransformerShape s;
  s.heads = ctx.pick<std::int64_t>({8, 16, 32, 64});
  s.hidden = s.heads * ctx.pick<std::int64_t>({64, 128});
  s.seq = ctx.pick<std::int64_t>({512, 1024, 2048, 4096});
  s.micro_batch = ctx.uniform_int(1, 8);
  s.layers = ctx.uniform_int(1, 96);
  return s;
}

}  // namespace

MGPU_CASE("11_1.bytes_per_parameter") {
  std::vector<double> out;
  for (const auto& p : m::kPrecisionPresets) out.push_back(m::bytes_per_parameter(p.recipe));
  m::PrecisionRecipe r{ctx.pick<double>({1, 2, 4}), ctx.pick<double>({2, 4}), ctx.pick<double>({0, 4}), ctx.pick<double>({2, 4, 8, 12})};
  out.push_back(m::bytes_per_parameter(r));
  ctx.emit("bytes_per_parameter", out);
}

MGPU_CASE("11_1.training_state_bytes") {
  double params = std::round(ctx.log_uniform(1e6, 1e12));
  ctx.emit("random_model", m::training_state_bytes(params, random_preset(ctx)));
  ctx.emit("llama_70b_bf16_adam", m::training_state_bytes(70e9, m::kBf16MixedAdam));
  ctx.emit_rejects("rejects_negative_params", [] { m::training_state_bytes(-1, m::kBf16MixedAdam); });
}

MGPU_CASE("11_1.activation_bytes_per_layer") {
  m::TransformerShape s = random_shape(ctx);
  std::int64_t t = ctx.pick<std::int64_t>({1, 2, 4, 8});
  std::vector<double> out;
  for (bool sp : {false, true})
    for (auto rc : {m::Recompute::none, m::Recompute::selective, m::Recompute::full})
      out.push_back(m::activation_bytes_per_layer(s, {t, sp, rc}));
  ctx.emit("bytes", out);
  ctx.emit_rejects("rejects_t_not_dividing_heads", [&] { m::activation_bytes_per_layer(s, {3, false, m::Recompute::none}); });
}

MGPU_CASE("11_1.activation_bytes") {
  m::TransformerShape s = random_shape(ctx);
  m::ActivationOptions o{ctx.pick<std::int64_t>({1, 2, 4}), ctx.uniform_int(0, 1) == 1,
                         ctx.pick({m::Recompute::none, m::Recompute::selective, m::Recompute::full})};
  ctx.emit("bytes", m::activation_bytes(s, o));
}

MGPU_CASE("11_1.training_flops_and_time") {
  double n = ctx.log_uniform(1e8, 1e12);
  double d = ctx.log_uniform(1e9, 3e13);
  double flops = m::training_flops(n, d);
  ctx.emit("flops", flops);
  std::int64_t gpus = ctx.pick<std::int64_t>({1, 8, 64, 1024, 16384});
  double rate = ctx.pick<double>({3.12e14, 4e14, 9.89e14});
  double mfu = ctx.uniform_real(0.2, 1.0);
  ctx.emit("seconds", m::training_seconds(flops, gpus, rate, mfu));
  ctx.emit("years_8b_15t_one_gpu", m::training_seconds(m::training_flops(8e9, 15e12), 1, 4e14) / m::kSecondsPerYear);
  ctx.emit_rejects("rejects_mfu_above_one", [&] { m::training_seconds(flops, gpus, rate, 1.5); });
}
