// Graded cases of 11.6's running checkpointing code on the course model, over a grid of fixed
// edges and a draw: the gradients and loss against the reference's, the activation peak of the
// step (exact, both ways), the FLOPs recomputation adds, and the best interval for a drawn model.
// Each step's rank runs checkpointing.cpp's step body, and best_interval is its student call.
#include <cstdint>
#include <string>
#include <vector>

#include "case.hpp"
#include "checkpointing.inputs.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "step.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::checkpointing_cases;
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

// One step of point `p`'s model on a fresh rank, from weights seeded `seed` and a batch seeded
// seed + 1: plain when k is 0, else with a checkpoint every k blocks.
Step run_step(const Point& p, std::int64_t k, std::uint64_t seed) {
  return measure_step("11_6.checkpointed_step", StepInput{.config = p.config,
                                                          .seed = seed,
                                                          .batch_seed = seed + 1,
                                                          .sequences = p.sequences,
                                                          .k = k});
}

// Runs `emit_point(point, seed)` at every point of the grid with one weight seed.
template <class F>
void over_grid(Ctx& ctx, F&& emit_point) {
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  for (const Point& p : grid(ctx)) {
    ctx.emit(p.name + ".k", static_cast<double>(p.k));
    emit_point(p, seed);
  }
}

// best_interval of `config` at `tokens`, the student's code in a process of its own in graded
// runs.
double best_interval(const model::ModelConfig& config, std::int64_t tokens) {
  return static_cast<double>(
      call_student<std::int64_t>("11_6.best_interval", IntervalInput{config, tokens}));
}

}  // namespace

MGPU_CASE_ISOLATED("11_6.checkpointed_gradients") {
  over_grid(ctx, [&](const Point& p, std::uint64_t seed) {
    emit_against_plain(ctx, p.name, run_step(p, p.k, seed), run_step(p, 0, seed));
  });
}

MGPU_CASE_ISOLATED("11_6.activation_peak") {
  // The ledger's activation peak, exact both ways: above the reference's means something is kept
  // that checkpointing should have freed (every block's cache, a second copy of a checkpoint),
  // below means less was kept than the backward needs at that k (the interval not honoured).
  over_grid(ctx, [&](const Point& p, std::uint64_t seed) {
    ctx.emit(p.name + ".peak_activations", run_step(p, p.k, seed).peak);
  });
}

MGPU_CASE_ISOLATED("11_6.recompute_flops") {
  // FLOPs over a plain step at the grid's k, and for every k of the drawn model: exactly one more
  // forward of every block, whatever k is (no block skipped, none recomputed twice).
  over_grid(ctx, [&](const Point& p, std::uint64_t seed) {
    const double plain = run_step(p, 0, seed).flops;
    if (p.name != "drawn") {
      ctx.emit(p.name + ".extra_flops", run_step(p, p.k, seed).flops - plain);
      return;
    }
    std::vector<double> extra;
    for (std::int64_t each = 1; each <= p.config.n_layers; ++each)
      extra.push_back(run_step(p, each, seed).flops - plain);
    ctx.emit(p.name + ".extra_flops_every_k", extra);
  });
}

MGPU_CASE_ISOLATED("11_6.best_interval_model") {
  std::vector<double> best;
  for (int i = 0; i < 4; ++i) {
    const model::ModelConfig config = drawn_model(ctx);
    const std::int64_t tokens = config.seq_len * ctx.uniform_int(1, 8);
    best.push_back(best_interval(config, tokens));
  }
  ctx.emit("best", best);
  // The drawn models have at most 9 blocks and a checkpoint at most a third of a block's saved
  // bytes, so their best k is nearly always 1. Deeper fixed models, where sqrt(L C / B) is 1.44
  // (attention, best 2), 2.19 (FFN-only, best 2) and 2.83 (FFN-only with d_ff = d_model, best 3):
  // the continuous optimum rounded down, to nearest or up is wrong on one of them.
  std::vector<double> best_fixed;
  model::ModelConfig narrow_ffn = fixed_config(24, false);
  narrow_ffn.d_ff = narrow_ffn.d_model;
  for (const model::ModelConfig& c : {fixed_config(24, true), fixed_config(24, false), narrow_ffn})
    best_fixed.push_back(best_interval(c, 2 * c.seq_len));
  ctx.emit("best_fixed", best_fixed);
  const model::ModelConfig config = drawn_model(ctx);
  // The interval's bounds from outside, k = L + 1 and k = 0 (the inside ends, k = L and k = 1,
  // are grid points of the cases above): a k clamped into [1, L] instead of rejected is caught.
  auto rejects_k = [&](const char* name, std::int64_t k) {
    ctx.emit_rejects(name, [&] {
      mgpu::Cluster cluster(1);
      run_ranks(cluster, "11_6.checkpointed_k", [&](int) {
        return StepInput{.config = config, .seed = 1, .batch_seed = 3, .sequences = 1, .k = k};
      });
    });
  };
  rejects_k("rejects_k_above_layers", config.n_layers + 1);
  rejects_k("rejects_k_zero", 0);
}
