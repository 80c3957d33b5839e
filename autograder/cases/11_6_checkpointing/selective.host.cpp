// Graded cases of 11.6's selective recomputation on the course model, over fixed edges and a
// draw: the gradients and loss against the reference's, the step's activation peak (exact, both
// ways) and the FLOPs the rebuilt attention cores add (exact). Each rank runs selective.cpp's
// rank bodies on the inputs made here.
#include <cstdint>
#include <string>
#include <vector>

#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "selective.inputs.hpp"
#include "step.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::checkpointing_cases;
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

// One step of point `p`'s model on a fresh rank, from weights seeded `seed` and a batch seeded
// seed + 1: plain, or with the attention cores recomputed.
Step run_step(const Point& p, bool selective, std::uint64_t seed) {
  return measure_step("11_6.selective_step", StepInput{.config = p.config,
                                                       .seed = seed,
                                                       .batch_seed = seed + 1,
                                                       .sequences = p.sequences,
                                                       .selective = selective});
}

template <class F>
void over_grid(Ctx& ctx, F&& emit_point) {
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  for (const Point& p : grid(ctx)) emit_point(p, seed);
}

}  // namespace

MGPU_CASE_ISOLATED("11_6.selective_gradients") {
  over_grid(ctx, [&](const Point& p, std::uint64_t seed) {
    emit_against_plain(ctx, p.name, run_step(p, true, seed), run_step(p, false, seed));
  });
  // The block bounds, units 1 to L, at both ends from both sides: the embedding (0) and the head
  // (L + 1) are no blocks; the first and last blocks, with a cache their forward saved without
  // the core, are. A check written for unit indices (0 to L + 1) or for 0-based blocks (0 to
  // L - 1) gets one end wrong.
  const model::ModelConfig config = fixed_config(2, true, true);
  const int blocks = static_cast<int>(config.n_layers);
  auto rejects_unit = [&](const std::string& name, int u) {
    ctx.emit_rejects(name, [&] {
      mgpu::Cluster cluster(1);
      run_ranks(cluster, "11_6.recompute_attention_core", [&](int) {
        return CoreInput{config, u};
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
  over_grid(ctx, [&](const Point& p, std::uint64_t seed) {
    ctx.emit(p.name + ".peak_activations", run_step(p, true, seed).peak);
  });
}

MGPU_CASE_ISOLATED("11_6.selective_flops") {
  // Exactly one attention core per block more than a plain step: 0 means the core was kept (or
  // never rebuilt), more means more than the core was rerun.
  over_grid(ctx, [&](const Point& p, std::uint64_t seed) {
    ctx.emit(p.name + ".extra_flops",
             run_step(p, true, seed).flops - run_step(p, false, seed).flops);
  });
}
