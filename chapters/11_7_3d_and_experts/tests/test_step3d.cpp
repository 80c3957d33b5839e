// Visible tests of the 11.7 3D training step on the simulated cluster, the README's ladder from
// one rank through each axis alone to 2x2x2 = 8 and 2x2x4 = 16 ranks: two steps give the loss, the
// gradients and the updated parameters of one-rank training on the same batch; the ledger holds
// per_gpu_memory's ZeRO-1 state for the rank's share; the traffic meter's bytes per group equal
// per_gpu_traffic term by term. The expected values come from one-rank training with the runtime's
// model, never from the code tested.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/formulas.hpp"
#include "11_7_3d_and_experts/step3d.hpp"
#include "helpers.hpp"
#include "mgpu/cluster.hpp"

using namespace mgpu;
using namespace mgpu::layout;

namespace {

constexpr int kSteps = 2;
constexpr std::uint64_t kSeed = 7;

using layout_test::config;

// One-rank training of the same model on the same batch: the loss, gradients and parameters
// after each step.
struct OneRank {
  std::vector<double> loss;
  std::vector<std::vector<float>> grads, params;
};

OneRank train_one_rank(const model::Model& m, const model::Batch& batch) {
  OneRank out;
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = m.make_replica(r.memory(), kSeed);
    model::Adam adam(r.memory(), m.num_params());
    for (int s = 0; s < kSteps; ++s) {
      model::zero(rep.grads.span());
      out.loss.push_back(m.forward_backward(r, rep.params.span(), rep.grads.span(), batch));
      out.grads.emplace_back(rep.grads.begin(), rep.grads.end());
      adam.step(rep.params.span(), rep.grads.span());
      out.params.emplace_back(rep.params.begin(), rep.params.end());
    }
  });
  return out;
}

// What one rank of the 3D run saw, recorded on its own thread.
struct RankRun {
  RankCoords coords;
  Share share;
  std::vector<std::optional<double>> loss;
  std::vector<std::vector<float>> grads, params;  // after each step
  std::size_t weights = 0, grads_bytes = 0, optimizer = 0;
  std::uint64_t tp_all_reduce = 0, tp_all_gather = 0, pp_sent = 0, dp_sent = 0;
};

std::vector<RankRun> train_3d(const model::Model& m, const model::Batch& batch, Layout l,
                              int micro_batches) {
  const int n = static_cast<int>(layout_gpus(l));
  std::vector<RankRun> runs(static_cast<std::size_t>(n));
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    ProcessGrid grid(r.world(), l);
    State3d state = make_state_3d(r, grid, m, kSeed);
    RankRun& run = runs[static_cast<std::size_t>(r.id())];
    run.coords = grid.coords();
    run.share = state.share;
    for (int s = 0; s < kSteps; ++s) {
      run.loss.push_back(train_step_3d(r, grid, m, state, batch, micro_batches));
      run.grads.emplace_back(state.grads.begin(), state.grads.end());
      run.params.emplace_back(state.params.begin(), state.params.end());
    }
    run.weights = r.memory().peak(Category::weights);
    run.grads_bytes = r.memory().peak(Category::grads);
    run.optimizer = r.memory().peak(Category::optimizer);
  });
  for (int i = 0; i < n; ++i) {
    const TrafficMeter& t = cluster.report(i).traffic;
    RankRun& run = runs[static_cast<std::size_t>(i)];
    run.tp_all_reduce = t.of(OpKind::all_reduce, "tp").bytes_sent;
    run.tp_all_gather = t.of(OpKind::all_gather, "tp").bytes_sent;
    run.pp_sent = t.group("pp").bytes_sent;
    run.dp_sent = t.group("dp").bytes_sent;
  }
  return runs;
}

// The layout model of one rank's share: its parameters padded to the ZeRO-1 flat are Psi', so
// Psi = Psi' * tp * pp, in fp32 with Adam, ZeRO-1 over dp.
LayoutModel layout_model(const model::ModelConfig& c, Layout l, const Share& share,
                         std::int64_t sequences_per_micro, int micro_batches) {
  LayoutModel lm;
  lm.params = static_cast<double>(share.padded) * static_cast<double>(l.tp * l.pp);
  lm.recipe = kFp32Adam;
  lm.layout = l;
  lm.zero_stage = 1;
  lm.shape = {c.seq_len, sequences_per_micro, c.d_model, c.n_heads, c.n_layers};
  lm.micro_batches = micro_batches;
  lm.bytes_per_activation = 4;
  return lm;
}

std::string layout_name(Layout l) {
  return std::to_string(l.tp) + "x" + std::to_string(l.pp) + "x" + std::to_string(l.dp);
}

void check_layout_run(Layout l, int micro_batches, std::int64_t sequences_per_micro) {
  const model::Model m(config());
  const std::int64_t sequences = l.dp * micro_batches * sequences_per_micro;
  const model::Batch batch = m.make_batch(sequences, 11);
  const OneRank want = train_one_rank(m, batch);
  const std::vector<RankRun> runs = train_3d(m, batch, l, micro_batches);

  for (int s = 0; s < kSteps; ++s) {
    const std::string step = "step " + std::to_string(s + 1) + " of " + layout_name(l);
    double loss_sum = 0.0;
    int last_stage_replicas = 0;
    for (const RankRun& run : runs) {
      const std::string who = "rank " + share_compare::where(run.coords);
      const auto& loss = run.loss[static_cast<std::size_t>(s)];
      REQUIRE_MESSAGE(loss.has_value() == (run.coords.pp == l.pp - 1),
                      step << ": " << who
                           << (loss ? " returned a loss; only the last stage should"
                                    : " returned no loss; the last stage should"));
      if (loss && run.coords.tp == 0) {
        loss_sum += *loss;
        ++last_stage_replicas;
      }
      std::vector<float> grads(run.share.padded), params(run.share.padded);
      cut_share(m, run.share, run.coords, want.grads[static_cast<std::size_t>(s)], grads);
      cut_share(m, run.share, run.coords, want.params[static_cast<std::size_t>(s)], params);
      // The rank's ZeRO-1 shard of the gradient is the global batch's; every parameter agrees.
      const std::size_t first = static_cast<std::size_t>(run.coords.dp) * run.share.shard;
      const std::size_t own =
          std::min(run.share.shard, run.share.count - std::min(first, run.share.count));
      // The first rank whose share is wrong ends the test: the others would repeat its story.
      share_compare::check_share(m, run.share, run.grads[static_cast<std::size_t>(s)], grads, first,
                                 own, 1e-4, step, "grad (own ZeRO-1 shard)", who, true);
      share_compare::check_share(m, run.share, run.params[static_cast<std::size_t>(s)], params, 0,
                                 run.share.count, 1e-5, step, "param after Adam", who, true);
    }
    CHECK(last_stage_replicas == l.dp);
    CHECK_MESSAGE(loss_sum / static_cast<double>(l.dp) ==
                      doctest::Approx(want.loss[static_cast<std::size_t>(s)]).epsilon(1e-5),
                  step << ": mean loss over the replicas " << loss_sum / static_cast<double>(l.dp)
                       << ", one-rank training's " << want.loss[static_cast<std::size_t>(s)]);
  }

  for (const RankRun& run : runs) {
    INFO(layout_name(l) << ", rank " << share_compare::where(run.coords));
    const LayoutModel lm =
        layout_model(m.config(), l, run.share, sequences_per_micro, micro_batches);
    const GpuMemory mem = per_gpu_memory(lm);
    CHECK_MESSAGE(static_cast<double>(run.weights) == mem.weights_bytes, "peak weights bytes");
    CHECK_MESSAGE(static_cast<double>(run.grads_bytes) == mem.grads_bytes, "peak grads bytes");
    CHECK_MESSAGE(static_cast<double>(run.optimizer) == mem.optimizer_bytes,
                  "peak optimizer bytes (Adam's moments of one ZeRO-1 shard)");
    // Two steps of traffic; the formula's pipeline term is the middle (busiest) stage's, and
    // with two stages or more each end stage sends half of it.
    const GpuTraffic per_step = per_gpu_traffic(lm);
    const bool end_stage = run.coords.pp == 0 || run.coords.pp == l.pp - 1;
    const double pipeline =
        l.pp > 2 && end_stage ? per_step.pipeline_bytes / 2 : per_step.pipeline_bytes;
    CHECK_MESSAGE(static_cast<double>(run.tp_all_reduce) ==
                      doctest::Approx(kSteps * per_step.tensor_parallel_bytes),
                  "bytes sent in tp all-reduces over " << kSteps << " steps");
    CHECK_MESSAGE(static_cast<double>(run.pp_sent) == doctest::Approx(kSteps * pipeline),
                  "bytes sent across stage boundaries (pp) over " << kSteps << " steps");
    CHECK_MESSAGE(
        static_cast<double>(run.dp_sent) == doctest::Approx(kSteps * per_step.data_parallel_bytes),
        "bytes sent by ZeRO-1 (dp) over " << kSteps << " steps");
    // The boundary rebuilt on the receiving side: one all-gather per tensor received, which the
    // formula leaves out (a stage receives as many tensors as it sends).
    const double received_tensors =
        pipeline /
        (static_cast<double>(sequences_per_micro * m.config().seq_len * m.config().d_model * 4) /
         static_cast<double>(l.tp));
    const double gather =
        static_cast<double>(sequences_per_micro * m.config().seq_len * m.config().d_model * 4) *
        static_cast<double>(l.tp - 1) / static_cast<double>(l.tp);
    CHECK_MESSAGE(static_cast<double>(run.tp_all_gather) ==
                      doctest::Approx(kSteps * received_tensors * gather),
                  "bytes sent in tp all-gathers rebuilding received boundaries");
  }
}

}  // namespace

// The ladder of the README, one rung a case (`./mgpu test '11_7.*rung 3'` runs rung 3): each
// rung adds one axis to what the previous ones proved.

TEST_CASE("11.7 3D rung 1: 1x1x1, one rank, equals one-rank training") {
  check_layout_run({1, 1, 1}, 2, 2);
}

TEST_CASE("11.7 3D rung 2: tp only (2x1x1, 4x1x1) equals one-rank training") {
  SUBCASE("2x1x1") { check_layout_run({2, 1, 1}, 2, 1); }
  SUBCASE("4x1x1") { check_layout_run({4, 1, 1}, 2, 1); }
}

TEST_CASE("11.7 3D rung 3: pp only (1x2x1, 1x4x1 with m = 6 and m = 2) equals one-rank training") {
  SUBCASE("1x2x1, m = 4") { check_layout_run({1, 2, 1}, 4, 1); }
  SUBCASE("1x4x1, m = 6") { check_layout_run({1, 4, 1}, 6, 1); }
  SUBCASE("1x4x1, m = 2 < pp") { check_layout_run({1, 4, 1}, 2, 1); }
}

TEST_CASE("11.7 3D rung 4: dp only (1x1x2, 1x1x4) equals one-rank training") {
  SUBCASE("1x1x2") { check_layout_run({1, 1, 2}, 2, 1); }
  SUBCASE("1x1x4") { check_layout_run({1, 1, 4}, 1, 1); }
}

TEST_CASE("11.7 3D rung 5: 2x2x2 and 2x2x4 equal one-rank training, memory and bytes per group") {
  SUBCASE("2x2x2") { check_layout_run({2, 2, 2}, 4, 1); }
  SUBCASE("2x2x4") { check_layout_run({2, 2, 4}, 4, 1); }
}

TEST_CASE("11.7 3D rung 5: mixed layouts (4x1x2, 2x4x1 with m = 2) equal one-rank training") {
  SUBCASE("4x1x2") { check_layout_run({4, 1, 2}, 2, 1); }
  SUBCASE("2x4x1, m = 2 < pp") { check_layout_run({2, 4, 1}, 2, 2); }
}

TEST_CASE("11.7 3D rung 5: a batch that does not split is refused before any work") {
  const model::Model m(config());
  const model::Batch batch = m.make_batch(6, 1);
  CHECK_THROWS_AS(Cluster(2).run([&](Rank& r) {
    ProcessGrid grid(r.world(), {1, 1, 2});
    State3d state = make_state_3d(r, grid, m, kSeed);
    (void)train_step_3d(r, grid, m, state, batch, 2);
  }),
                  std::invalid_argument);
}
