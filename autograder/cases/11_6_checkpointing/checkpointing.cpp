// Graded cases of 11.6's running checkpointing code on the course model, over a grid of fixed
// edges and a draw: the gradients and loss against the reference's, the activation peak of the
// step (exact, both ways), the FLOPs recomputation adds, and the best interval for a drawn model.
#include <string>
#include <vector>

#include "11_6_checkpointing/checkpointing.hpp"
#include "case.hpp"
#include "model_inputs.hpp"
#include "step.hpp"
#include "untrusted.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::checkpointing_cases;
namespace ck = mgpu::checkpointing;
namespace model = mgpu::model;

namespace {

// A small course model whose shape comes from the seed, with or without attention.
model::ModelConfig drawn_model(Ctx& ctx) { return drawn_config(ctx, 9, 5, DrawnSwitch::attention); }

// One grid point: a model, a checkpoint interval and a batch size.
struct Point {
  std::string name;
  model::ModelConfig config;
  std::int64_t k = 1;
  std::int64_t sequences = 1;
};

// The fixed edges, then a draw: one block (k = L = 1), a checkpoint at every block (k = 1), one
// segment holding every block (k = L), a last segment shorter than k (7 blocks, k = 3), the
// FFN-only model with 2-block segments, and a drawn model at a drawn k.
std::vector<Point> grid(Ctx& ctx) {
  std::vector<Point> g{{"one_block", fixed_config(1, true), 1, 2},
                       {"every_block", fixed_config(4, true), 1, 2},
                       {"one_segment", fixed_config(4, true), 4, 1},
                       {"remainder", fixed_config(7, true), 3, 2},
                       {"ffn_only", fixed_config(6, false), 2, 3}};
  const model::ModelConfig drawn = drawn_model(ctx);
  g.push_back({"drawn", drawn, ctx.uniform_int(1, static_cast<int>(drawn.n_layers)),
               ctx.uniform_int(1, 4)});
  return g;
}

// One step on a fresh rank: plain when k is 0, else with a checkpoint every k blocks.
Step run_step(const model::Model& net, const model::Batch& batch, std::int64_t k,
              std::uint64_t seed) {
  return measure_step(net, seed, [&](mgpu::Rank& r, auto params, auto grads) {
    return k == 0 ? net.forward_backward(r, params, grads, batch)
                  : ck::checkpointed_forward_backward(r, net, params, grads, batch, k);
  });
}

// Runs `emit_point(name, model, batch, k)` at every point of the grid with one weight seed.
template <class F>
void over_grid(Ctx& ctx, F&& emit_point) {
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  for (const Point& p : grid(ctx)) {
    const model::Model net(p.config);
    const model::Batch batch = net.make_batch(p.sequences, seed + 1);
    ctx.emit(p.name + ".k", static_cast<double>(p.k));
    emit_point(p.name, net, batch, p.k, seed);
  }
}

}  // namespace

MGPU_CASE_ISOLATED("11_6.checkpointed_gradients") {
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::int64_t k, std::uint64_t seed) {
    emit_against_plain(ctx, at, run_step(net, batch, k, seed), run_step(net, batch, 0, seed));
  });
}

MGPU_CASE_ISOLATED("11_6.activation_peak") {
  // The ledger's activation peak, exact both ways: above the reference's means something is kept
  // that checkpointing should have freed (every block's cache, a second copy of a checkpoint),
  // below means less was kept than the backward needs at that k (the interval not honoured).
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::int64_t k, std::uint64_t seed) {
    ctx.emit(at + ".peak_activations", run_step(net, batch, k, seed).peak);
  });
}

MGPU_CASE_ISOLATED("11_6.recompute_flops") {
  // FLOPs over a plain step at the grid's k, and for every k of the drawn model: exactly one more
  // forward of every block, whatever k is (no block skipped, none recomputed twice).
  over_grid(ctx, [&](const std::string& at, const model::Model& net, const model::Batch& batch,
                     std::int64_t k, std::uint64_t seed) {
    const double plain = run_step(net, batch, 0, seed).flops;
    if (at != "drawn") {
      ctx.emit(at + ".extra_flops", run_step(net, batch, k, seed).flops - plain);
      return;
    }
    std::vector<double> extra;
    for (std::int64_t each = 1; each <= net.config().n_layers; ++each)
      extra.push_back(run_step(net, batch, each, seed).flops - plain);
    ctx.emit(at + ".extra_flops_every_k", extra);
  });
}

MGPU_CASE_ISOLATED("11_6.best_interval_model") {
  std::vector<double> best;
  for (int i = 0; i < 4; ++i) {
    const model::Model net(drawn_model(ctx));
    const std::int64_t tokens = net.config().seq_len * ctx.uniform_int(1, 8);
    // Student code outside Cluster::run: in a process of its own in graded runs.
    best.push_back(static_cast<double>(untrusted([&] { return ck::best_interval(net, tokens); })));
  }
  ctx.emit("best", best);
  // The drawn models have at most 9 blocks and a checkpoint at most a third of a block's saved
  // bytes, so their best k is nearly always 1. Deeper fixed models, where sqrt(L C / B) is 1.44
  // (attention, best 2), 2.19 (FFN-only, best 2) and 2.83 (FFN-only with d_ff = d_model, best 3):
  // the continuous optimum rounded down, to nearest or up is wrong on one of them.
  std::vector<double> best_fixed;
  model::ModelConfig narrow_ffn = fixed_config(24, false);
  narrow_ffn.d_ff = narrow_ffn.d_model;
  for (const model::ModelConfig& c :
       {fixed_config(24, true), fixed_config(24, false), narrow_ffn}) {
    const model::Model fixed(c);
    best_fixed.push_back(
        static_cast<double>(untrusted([&] { return ck::best_interval(fixed, 2 * c.seq_len); })));
  }
  ctx.emit("best_fixed", best_fixed);
  const model::Model net(drawn_model(ctx));
  const model::Batch batch = net.make_batch(1, 3);
  // The interval's bounds from outside, k = L + 1 and k = 0 (the inside ends, k = L and k = 1,
  // are grid points of the cases above): a k clamped into [1, L] instead of rejected is caught.
  auto rejects_k = [&](const char* name, std::int64_t k) {
    ctx.emit_rejects(name, [&] {
      mgpu::Cluster(1).run([&](mgpu::Rank& r) {
        model::Replica rep = net.make_replica(r.memory(), 1);
        ck::checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch, k);
      });
    });
  };
  rejects_k("rejects_k_above_layers", net.config().n_layers + 1);
  rejects_k("rejects_k_zero", 0);
}
