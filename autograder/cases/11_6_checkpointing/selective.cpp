// Graded cases of 11.6's selective recomputation on the course model, over fixed edges and a
// draw: the gradients and loss against the reference's, the step's activation peak (exact, both
// ways) and the FLOPs the rebuilt attention cores add (exact).
#include <cstring>
#include <string>
#include <vector>

#include "11_6_checkpointing/checkpointing.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

using namespace mgpu::grade;
namespace ck = mgpu::checkpointing;
namespace model = mgpu::model;

namespace {

// A fixed model of `layers` blocks.
model::ModelConfig fixed_config(std::int64_t layers, bool attention, bool causal) {
  model::ModelConfig c;
  c.d_in = 3;
  c.d_model = 4;
  c.d_ff = 8;
  c.n_heads = 2;
  c.n_layers = layers;
  c.seq_len = 3;
  c.d_out = 2;
  c.attention = attention;
  c.causal = causal;
  return c;
}

// A small model whose shape comes from the seed; d_in and d_out stay at most d_model.
model::ModelConfig drawn_config(Ctx& ctx) {
  model::ModelConfig c;
  c.n_heads = ctx.pick({1, 2, 4});
  c.d_model = c.n_heads * ctx.uniform_int(2, 5);
  c.d_in = ctx.uniform_int(2, static_cast<int>(c.d_model));
  c.d_ff = ctx.pick({1, 2, 4}) * c.d_model;
  c.n_layers = ctx.uniform_int(2, 6);
  c.seq_len = ctx.uniform_int(2, 6);
  c.d_out = ctx.uniform_int(1, static_cast<int>(c.d_model));
  c.causal = ctx.pick({0, 1}) == 1;
  return c;
}

struct Point {
  std::string name;
  model::ModelConfig config;
  std::int64_t sequences = 1;
};

// One block; several causal blocks; non-causal blocks (every probability non-zero); FFN-only
// blocks (no core: selective is plain training); a drawn model.
std::vector<Point> grid(Ctx& ctx) {
  return {{"one_block", fixed_config(1, true, true), 2},
          {"causal", fixed_config(4, true, true), 2},
          {"non_causal", fixed_config(3, true, false), 3},
          {"ffn_only", fixed_config(3, false, true), 2},
          {"drawn", drawn_config(ctx), ctx.uniform_int(1, 4)}};
}

struct Step {
  std::vector<float> grads;
  double loss = 0;
  double peak = 0;   // ledger peak of Category::activations during the step
  double flops = 0;  // compute charged to the clock during the step, in FLOPs
};

Step run_step(const model::Model& net, const model::Batch& batch, bool selective,
              std::uint64_t seed) {
  Step s;
  mgpu::Cluster(1).run([&](mgpu::Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), seed);
    r.memory().reset_peaks();
    const double t0 = r.clock().compute_time();
    s.loss = selective ? ck::selective_forward_backward(r, net, rep.params.span(), rep.grads.span(),
                                                        batch)
                       : net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
    s.flops = (r.clock().compute_time() - t0) * r.config().flops_per_second;
    s.peak = static_cast<double>(r.memory().peak(mgpu::Category::activations));
    s.grads.assign(rep.grads.begin(), rep.grads.end());
  });
  return s;
}

template <class F>
void over_grid(Ctx& ctx, F&& emit_point) {
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  for (const Point& p : grid(ctx)) {
    const model::Model net(p.config);
    emit_point(p.name, net, net.make_batch(p.sequences, seed + 1), seed);
  }
}

}  // namespace

MGPU_CASE("11_6.selective_gradients") {
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::uint64_t seed) {
    const Step plain = run_step(net, batch, false, seed), sel = run_step(net, batch, true, seed);
    ctx.emit(at + ".grads", every_kth(sel.grads), DType::f32);
    ctx.emit(at + ".loss", sel.loss, DType::f32);
    const bool same =
        sel.grads.size() == plain.grads.size() &&
        std::memcmp(sel.grads.data(), plain.grads.data(), plain.grads.size() * sizeof(float)) == 0;
    ctx.emit(at + ".bitwise_same_as_plain", same ? 1.0 : 0.0);
  });
  const model::Model net(fixed_config(2, true, true));
  ctx.emit_rejects("rejects_a_unit_that_is_not_a_block", [&] {
    mgpu::Cluster(1).run([&](mgpu::Rank& r) {
      model::UnitCache cache;
      cache.filled = true;
      ck::recompute_attention_core(r, net, 0, cache);
    });
  });
}

MGPU_CASE("11_6.selective_peak") {
  // Exact both ways: above the reference's, a core was kept (or several rebuilt at once); below,
  // more was dropped than the core (the whole block recomputed instead).
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::uint64_t seed) {
    ctx.emit(at + ".peak_activations", run_step(net, batch, true, seed).peak);
  });
}

MGPU_CASE("11_6.selective_flops") {
  // Exactly one attention core per block more than a plain step: 0 means the core was kept (or
  // never rebuilt), more means more than the core was rerun.
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::uint64_t seed) {
    ctx.emit(at + ".extra_flops",
             run_step(net, batch, true, seed).flops - run_step(net, batch, false, seed).flops);
  });
}
