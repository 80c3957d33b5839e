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
  // The block bounds, units 1 to L, at both ends from both sides: the embedding (0) and the head
  // (L + 1) are no blocks; the first and last blocks, with a cache their forward saved without
  // the core, are. A check written for unit indices (0 to L + 1) or for 0-based blocks (0 to
  // L - 1) gets one end wrong.
  const model::Model net(fixed_config(2, true, true));
  const int blocks = static_cast<int>(net.config().n_layers);
  auto rejects_unit = [&](const std::string& name, int u) {
    ctx.emit_rejects(name, [&] {
      mgpu::Cluster(1).run([&](mgpu::Rank& r) {
        model::Replica rep = net.make_replica(r.memory(), 1);
        model::UnitCache cache;
        cache.filled = true;  // a cache the embedding's or head's forward would have filled
        if (u >= 1 && u <= blocks) {
          const std::int64_t tokens = net.config().seq_len;
          mgpu::Buffer<float> x(r.memory(), mgpu::Category::activations,
                                static_cast<std::size_t>(tokens * net.config().d_model), "x");
          x = net.unit_forward(r, u, net.unit_view(rep.params.span(), u), std::move(x), tokens,
                               &cache, model::Save::without_attention_core);
        }
        ck::recompute_attention_core(r, net, u, cache);
      });
    });
  };
  rejects_unit("rejects_a_unit_that_is_not_a_block", 0);
  rejects_unit("rejects_the_head", blocks + 1);
  rejects_unit("rejects_the_first_block", 1);
  rejects_unit("rejects_the_last_block", blocks);
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
