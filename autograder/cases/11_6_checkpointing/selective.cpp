// Graded cases of 11.6's selective recomputation on the course model, over fixed edges and a
// draw: the gradients and loss against the reference's, the step's activation peak (exact, both
// ways) and the FLOPs the rebuilt attention cores add (exact).
#include <string>
#include <vector>

#include "11_6_checkpointing/checkpointing.hpp"
#include "case.hpp"
#include "model_inputs.hpp"
#include "step.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::checkpointing_cases;
namespace ck = mgpu::checkpointing;
namespace model = mgpu::model;

namespace {

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
          {"drawn", drawn_config(ctx, 6, 6, DrawnSwitch::causal), ctx.uniform_int(1, 4)}};
}

// One step on a fresh rank: plain, or with the attention cores recomputed.
Step run_step(const model::Model& net, const model::Batch& batch, bool selective,
              std::uint64_t seed) {
  return measure_step(net, seed, [&](mgpu::Rank& r, auto params, auto grads) {
    return selective ? ck::selective_forward_backward(r, net, params, grads, batch)
                     : net.forward_backward(r, params, grads, batch);
  });
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

MGPU_CASE_ISOLATED("11_6.selective_gradients") {
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::uint64_t seed) {
    emit_against_plain(ctx, at, run_step(net, batch, true, seed),
                       run_step(net, batch, false, seed));
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

MGPU_CASE_ISOLATED("11_6.selective_peak") {
  // Exact both ways: above the reference's, a core was kept (or several rebuilt at once); below,
  // more was dropped than the core (the whole block recomputed instead).
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::uint64_t seed) {
    ctx.emit(at + ".peak_activations", run_step(net, batch, true, seed).peak);
  });
}

MGPU_CASE_ISOLATED("11_6.selective_flops") {
  // Exactly one attention core per block more than a plain step: 0 means the core was kept (or
  // never rebuilt), more means more than the core was rerun.
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::uint64_t seed) {
    ctx.emit(at + ".extra_flops",
             run_step(net, batch, true, seed).flops - run_step(net, batch, false, seed).flops);
  });
}
