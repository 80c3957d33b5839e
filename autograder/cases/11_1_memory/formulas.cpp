// Graded cases of 11.1 (memory in training): bytes per parameter, training state, activation
// memory with tensor/sequence parallelism and recomputation, training FLOPs and time.
#include "11_1_memory/formulas.hpp"
#include "case.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace mgpu::grade;
namespace m = mgpu::memory;

namespace {

mgpu::PrecisionRecipe random_preset(Ctx& ctx) {
  int i = ctx.uniform_int(0, static_cast<int>(mgpu::kPrecisionPresets.size()) - 1);
  return mgpu::kPrecisionPresets[static_cast<std::size_t>(i)].recipe;
}

mgpu::TransformerShape random_shape(Ctx& ctx) {
  mgpu::TransformerShape s;
  s.heads = ctx.pick<std::int64_t>({8, 16, 32, 64});
  s.hidden = s.heads * ctx.pick<std::int64_t>({64, 128});
  s.seq = ctx.pick<std::int64_t>({512, 1024, 2048, 4096});
  s.micro_batch = ctx.uniform_int(1, 8);
  s.layers = ctx.uniform_int(1, 96);
  return s;
}

// The grid every activation case runs: t = 1 (where every form agrees, so it proves nothing on
// its own), t = 2 and a drawn t of 4 or 8, each without and with sequence parallelism, under each
// recompute mode. A formula right only at t = 1, or only without sequence parallelism, fails a
// named point of it.
std::vector<m::ActivationOptions> option_grid(Ctx& ctx) {
  std::vector<m::ActivationOptions> grid;
  for (std::int64_t t : {std::int64_t{1}, std::int64_t{2}, ctx.pick<std::int64_t>({4, 8})})
    for (bool sp : {false, true})
      for (auto rc : {mgpu::Recompute::none, mgpu::Recompute::selective, mgpu::Recompute::full})
        grid.push_back({t, sp, rc});
  return grid;
}

// "t2_tensor_parallel_selective": the grid point a value belongs to, so feedback says which
// combination of t, sequence parallelism and recompute is wrong.
std::string option_name(const m::ActivationOptions& o) {
  const char* rc = o.recompute == mgpu::Recompute::none        ? "no_recompute"
                   : o.recompute == mgpu::Recompute::selective ? "selective"
                                                               : "full";
  return "t" + std::to_string(o.tensor_parallel) +
         (o.sequence_parallel ? "_sequence_parallel_" : "_tensor_parallel_") + rc;
}

}  // namespace

MGPU_CASE("11_1.bytes_per_parameter") {
  std::vector<double> out;
  for (const auto& p : mgpu::kPrecisionPresets) out.push_back(m::bytes_per_parameter(p.recipe));
  mgpu::PrecisionRecipe r{ctx.pick<double>({1, 2, 4}), ctx.pick<double>({2, 4}),
                          ctx.pick<double>({0, 4}), ctx.pick<double>({2, 4, 8, 12})};
  out.push_back(m::bytes_per_parameter(r));
  ctx.emit("bytes_per_parameter", out);
  // The header's three ways a recipe is invalid: every value above is right without the check.
  ctx.emit_rejects("rejects_negative_bytes", [] {
    m::bytes_per_parameter(mgpu::PrecisionRecipe{2, -2, 4, 8});
  });
  ctx.emit_rejects("rejects_nan_bytes", [] {
    m::bytes_per_parameter(mgpu::PrecisionRecipe{2, 2, 4, std::nan("")});
  });
  ctx.emit_rejects("rejects_no_weights", [] {
    m::bytes_per_parameter(mgpu::PrecisionRecipe{0, 2, 4, 8});
  });
}

MGPU_CASE("11_1.training_state_bytes") {
  double params = std::round(ctx.log_uniform(1e6, 1e12));
  ctx.emit("random_model", m::training_state_bytes(params, random_preset(ctx)));
  ctx.emit("llama_70b_bf16_adam", m::training_state_bytes(70e9, mgpu::kBf16MixedAdam));
  // Every preset at one drawn count: the drawn preset above (and the text's) may be one of the two
  // 16-byte recipes, where a fixed 16 bytes per parameter is right by chance.
  std::vector<double> presets;
  for (const auto& p : mgpu::kPrecisionPresets)
    presets.push_back(m::training_state_bytes(params, p.recipe));
  ctx.emit("every_preset", presets);
  ctx.emit_rejects("rejects_no_weights", [] {
    m::training_state_bytes(1e9, mgpu::PrecisionRecipe{0, 2, 4, 8});
  });
  ctx.emit_rejects("rejects_negative_params",
                   [] { m::training_state_bytes(-1, mgpu::kBf16MixedAdam); });
  // The inside end of the same bound: no parameters hold no bytes, and are no error.
  ctx.emit("no_params", m::training_state_bytes(0, mgpu::kBf16MixedAdam));
}

MGPU_CASE("11_1.activation_bytes_per_layer") {
  // A drawn shape, and the text's layer (s = 2048, b = 1, h = 8192, a = 64) at fixed numbers.
  const mgpu::TransformerShape drawn = random_shape(ctx);
  const mgpu::TransformerShape text{2048, 1, 8192, 64, 1};
  for (const m::ActivationOptions& o : option_grid(ctx)) {
    ctx.emit(option_name(o), m::activation_bytes_per_layer(drawn, o));
    ctx.emit("text_layer_" + option_name(o), m::activation_bytes_per_layer(text, o));
  }
  ctx.emit_rejects("rejects_t_not_dividing_heads", [&] {
    m::activation_bytes_per_layer(drawn, {3, false, mgpu::Recompute::none});
  });
}

MGPU_CASE("11_1.activation_bytes") {
  const mgpu::TransformerShape s = random_shape(ctx);
  for (const m::ActivationOptions& o : option_grid(ctx))
    ctx.emit(option_name(o), m::activation_bytes(s, o));
  ctx.emit_rejects("rejects_zero_layers", [&] {
    mgpu::TransformerShape none = s;
    none.layers = 0;
    m::activation_bytes(none, {});
  });
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
  ctx.emit("years_8b_15t_one_gpu",
           m::training_seconds(m::training_flops(8e9, 15e12), 1, 4e14) / m::kSecondsPerYear);
  // Many GPUs below peak at a fixed point: the drawn GPU count above may be 1, where a time that
  // ignores the GPU count is right.
  ctx.emit("days_70b_2t_1024_gpus_mfu_0_4",
           m::training_seconds(m::training_flops(70e9, 2e12), 1024, 9.89e14, 0.4) / 86400.0);
  ctx.emit_rejects("rejects_mfu_above_one", [&] { m::training_seconds(flops, gpus, rate, 1.5); });
  ctx.emit_rejects("rejects_mfu_zero", [&] { m::training_seconds(flops, gpus, rate, 0.0); });
  // Each remaining bound on both sides: no parameters or tokens (0 FLOPs) and no FLOPs (0 s) are
  // inside; negative counts, no GPU and no rate are outside.
  ctx.emit("edge_flops", std::vector<double>{m::training_flops(0, d), m::training_flops(n, 0)});
  ctx.emit("edge_seconds", m::training_seconds(0, gpus, rate, mfu));
  ctx.emit_rejects("flops_rejects_negative_params", [&] { m::training_flops(-1, d); });
  ctx.emit_rejects("flops_rejects_negative_tokens", [&] { m::training_flops(n, -1); });
  ctx.emit_rejects("rejects_negative_flops", [&] { m::training_seconds(-1, gpus, rate, mfu); });
  ctx.emit_rejects("rejects_zero_gpus", [&] { m::training_seconds(flops, 0, rate, mfu); });
  ctx.emit_rejects("rejects_zero_rate", [&] { m::training_seconds(flops, gpus, 0.0, mfu); });
}
