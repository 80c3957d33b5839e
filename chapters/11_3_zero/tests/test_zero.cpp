// 11.3 visible tests of the running ZeRO stages: same weights as plain data parallelism, the
// ledger's per-rank state against zero_state_per_gpu, the traffic meter against
// zero_traffic_per_gpu (stage 3 = 1.5x stage 0), and prefetch on the virtual clock.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "11_3_zero/formulas.hpp"
#include "11_3_zero/zero.hpp"

using namespace mgpu;
using namespace mgpu::zero;

namespace {

model::ModelConfig small_config() {
  model::ModelConfig c;
  c.d_in = 5;
  c.d_model = 12;
  c.d_ff = 24;
  c.n_layers = 3;
  c.n_heads = 2;
  c.seq_len = 4;
  c.d_out = 3;
  return c;
}

constexpr std::uint64_t kWeightSeed = 11;
const model::AdamConfig kAdam{.lr = 1e-2f};
constexpr int kSteps = 3;

// What a ZeRO run left behind on every rank.
struct Run {
  std::vector<std::vector<float>> weights;                  // full weights per rank, after the steps
  std::vector<std::array<std::size_t, kCategoryCount>> peaks;  // per rank, peak bytes per category
  std::vector<double> bytes_sent_per_step;                  // per rank
  double makespan = 0;                                      // virtual seconds of the whole run
  double overlap = 0;                                       // rank 0's comm hidden behind compute
  std::size_t comm_peak = 0;                                // rank 0's transient bytes during the steps
};

Run train_zero(const model::ModelConfig& cfg, const ClusterConfig& cc, int stage, bool prefetch = false,
               std::int64_t sequences_per_rank = 2) {
  const model::Model net(cfg);
  const auto n = static_cast<std::size_t>(cc.world_size);
  Run run;
  run.weights.resize(n);
  run.bytes_sent_per_step.resize(n);
  Cluster cluster(cc);
  cluster.run([&](Rank& r) {
    ZeroState state = make_zero_state(r, r.world(), net, stage, kWeightSeed, kAdam);
    r.memory().reset_peaks();  // the state stays allocated, so its peaks are unchanged
    const auto before = static_cast<double>(r.traffic().total().bytes_sent);
    for (int s = 0; s < kSteps; ++s) {
      const model::Batch batch = net.make_batch(sequences_per_rank * cc.world_size, 500 + static_cast<std::uint64_t>(s));
      zero_step(r, r.world(), net, state, batch, prefetch);
    }
    const auto id = static_cast<std::size_t>(r.id());
    run.bytes_sent_per_step[id] = (static_cast<double>(r.traffic().total().bytes_sent) - before) / kSteps;
    if (id == 0) run.comm_peak = r.memory().peak(Category::comm);
    run.weights[id] = full_weights(r, r.world(), net, state);
  });
  for (const RankReport& rep : cluster.reports()) {
    std::array<std::size_t, kCategoryCount> p{};
    for (std::size_t c = 0; c < kCategoryCount; ++c) p[c] = rep.memory.peak(static_cast<Category>(c));
    run.peaks.push_back(p);
  }
  run.makespan = cluster.makespan();
  run.overlap = cluster.report(0).clock.overlap_time(0, cluster.report(0).clock.end_time());
  return run;
}

// Plain data parallelism with the runtime all-reduce and model::Adam only (no chapter code: the
// batch is sliced here, not by zero_local_batch): the weights every stage must reproduce.
std::vector<float> reference_dp(const model::ModelConfig& cfg, int ranks, std::int64_t sequences_per_rank = 2) {
  const model::Model net(cfg);
  std::vector<float> out;
  Cluster cluster(ranks);
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    model::Adam adam(r.memory(), net.num_params(), kAdam);
    for (int s = 0; s < kSteps; ++s) {
      const model::Batch batch = net.make_batch(sequences_per_rank * ranks, 500 + static_cast<std::uint64_t>(s));
      model::zero(replica.grads.span());
      const model::Batch slice = batch.slice(r.id() * sequences_per_rank, sequences_per_rank);
      net.forward_backward(r, replica.params.span(), replica.grads.span(), slice);
      r.world().all_reduce(replica.grads.span(), ReduceOp::avg);
      adam.step(replica.params.span(), replica.grads.span());
    }
    if (r.id() == 0) out.assign(replica.params.begin(), replica.params.end());
  });
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

std::size_t peak_of(const Run& run, int rank, Category c) {
  return run.peaks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(c)];
}

}  // namespace

TEST_CASE("plan_shards: equal padded shards per unit whose owned ranges cover every unit once") {
  const model::Model net(small_config());
  for (int n : {1, 2, 3, 4, 7}) {
    const ShardLayout layout = plan_shards(net, n);
    REQUIRE(layout.unit_shard.size() == static_cast<std::size_t>(net.num_units()));
    std::size_t total = 0;
    for (int u = 0; u < net.num_units(); ++u) {
      const std::size_t count = net.unit(u).count;
      const std::size_t s = layout.unit_shard[static_cast<std::size_t>(u)];
      CHECK(s * static_cast<std::size_t>(n) >= count);
      CHECK(s * static_cast<std::size_t>(n) < count + static_cast<std::size_t>(n));
      CHECK(layout.unit_offset[static_cast<std::size_t>(u)] == total);
      std::size_t covered = 0;
      for (int r = 0; r < n; ++r) {
        const OwnedRange own = owned_range(layout, u, r, count);
        CHECK(own.first == std::min(count, static_cast<std::size_t>(r) * s));
        covered += own.size();
      }
      CHECK(covered == count);
      total += s;
    }
    CHECK(layout.shard_size == total);
  }
  CHECK_THROWS_AS(plan_shards(net, 0), std::invalid_argument);
}

TEST_CASE("every stage ends with the weights of plain data parallelism (fp32 tolerance)") {
  const model::ModelConfig cfg = small_config();
  for (int n : {2, 3, 4}) {
    const std::vector<float> expected = reference_dp(cfg, n);
    ClusterConfig cc;
    cc.world_size = n;
    for (int stage = 0; stage <= 3; ++stage) {
      const Run run = train_zero(cfg, cc, stage);
      const double err = max_abs_diff(run.weights[0], expected);
      std::printf("N=%d stage %d: max |w - w_dp| = %.3g\n", n, stage, err);
      CHECK(err <= 1e-6);
      for (int r = 1; r < n; ++r)  // every rank ends with the same full weights
        CHECK(std::memcmp(run.weights[static_cast<std::size_t>(r)].data(), run.weights[0].data(),
                          run.weights[0].size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("ledger state per rank equals zero_state_per_gpu within the padding and falls with the stage") {
  const model::ModelConfig cfg = small_config();
  const model::Model net(cfg);
  const auto p = static_cast<double>(net.num_params());
  const double units = net.num_units();
  for (int n : {2, 4}) {
    ClusterConfig cc;
    cc.world_size = n;
    double previous_total = 1e300;
    for (int stage = 0; stage <= 3; ++stage) {
      const Run run = train_zero(cfg, cc, stage);
      const StateBytes want = zero_state_per_gpu(p, kZeroRecipe, stage, n);
      for (int r = 0; r < n; ++r) {
        const auto w = static_cast<double>(peak_of(run, r, Category::weights));
        const auto g = static_cast<double>(peak_of(run, r, Category::grads));
        const auto m = static_cast<double>(peak_of(run, r, Category::master));
        const auto o = static_cast<double>(peak_of(run, r, Category::optimizer));
        if (r == 0)
          std::printf("N=%d stage %d: weights %.0f/%.0f grads %.0f/%.0f master %.0f/%.0f optimizer %.0f/%.0f "
                      "(measured/formula bytes)\n",
                      n, stage, w, want.weights_bytes, g, want.grads_bytes, m, want.master_bytes, o,
                      want.optimizer_bytes);
        // A shard is ceil(count_u / N) per unit: at most one element per unit above P / N.
        CHECK(w >= want.weights_bytes);
        CHECK(w <= want.weights_bytes + kZeroRecipe.bytes_weights * units);
        CHECK(g >= want.grads_bytes);
        CHECK(g <= want.grads_bytes + kZeroRecipe.bytes_grads * units);
        CHECK(m == want.master_bytes);
        CHECK(o >= want.optimizer_bytes);
        CHECK(o <= want.optimizer_bytes + kZeroRecipe.bytes_optimizer * units);
      }
      const double total = static_cast<double>(peak_of(run, 0, Category::weights) + peak_of(run, 0, Category::grads) +
                                                peak_of(run, 0, Category::optimizer));
      CHECK(total < previous_total);
      previous_total = total;
    }
  }
}

TEST_CASE("stage-3 traffic per rank is 1.5x stage 0, stages 1 and 2 equal it (traffic meter vs formula)") {
  const model::ModelConfig cfg = small_config();
  const model::Model net(cfg);
  const auto p = static_cast<double>(net.num_params());
  const int n = 4;
  ClusterConfig cc;
  cc.world_size = n;
  std::vector<double> measured;
  for (int stage = 0; stage <= 3; ++stage) {
    const Run run = train_zero(cfg, cc, stage);
    const double want = zero_traffic_bytes_per_gpu(p, kZeroRecipe, stage, n);
    // Padded units move up to N - 1 extra elements each, in up to three collectives; the ring
    // charges whole elements per chunk, so an unpadded all-reduce may come out an element short.
    const double slack = 3.0 * 4.0 * (n - 1) * net.num_units();
    const double rounding = 4.0 * 2 * n;
    std::printf("N=%d stage %d: %.0f bytes sent per rank per step, formula %.0f\n", n, stage,
                run.bytes_sent_per_step[0], want);
    CHECK(run.bytes_sent_per_step[0] >= want - rounding);
    CHECK(run.bytes_sent_per_step[0] <= want + slack);
    measured.push_back(run.bytes_sent_per_step[0]);
  }
  std::printf("stage 3 / stage 0 = %.4f\n", measured[3] / measured[0]);
  CHECK(measured[3] / measured[0] == doctest::Approx(1.5).epsilon(0.03));
  CHECK(measured[1] / measured[0] == doctest::Approx(1.0).epsilon(0.03));
  CHECK(measured[2] / measured[0] == doctest::Approx(1.0).epsilon(0.03));
}

TEST_CASE("stage 3 with prefetch: same weights, hidden gathers, step time not above without") {
  model::ModelConfig cfg = small_config();
  cfg.d_model = 32;
  cfg.d_ff = 128;
  cfg.n_layers = 4;
  ClusterConfig cc;
  cc.world_size = 4;
  cc.flops_per_second = 3e10;    // a slow "GPU" and link, so gathers take about as long as a unit
  cc.intra_node_bandwidth = 5e8;
  const Run plain = train_zero(cfg, cc, 3, false, 8);
  const Run fetched = train_zero(cfg, cc, 3, true, 8);
  std::printf("stage 3 step: %.4g s without prefetch, %.4g s with; overlap %.4g s -> %.4g s\n",
              plain.makespan / kSteps, fetched.makespan / kSteps, plain.overlap, fetched.overlap);
  CHECK(max_abs_diff(plain.weights[0], fetched.weights[0]) == 0);
  CHECK(fetched.makespan <= plain.makespan);
  CHECK(fetched.overlap > plain.overlap);
}

TEST_CASE("stage 3 holds a few gathered units at a time, never the whole model") {
  model::ModelConfig cfg = small_config();
  cfg.n_layers = 8;
  const model::Model net(cfg);
  ClusterConfig cc;
  cc.world_size = 4;
  std::size_t largest = 0;  // bytes of the largest padded unit
  const ShardLayout layout = plan_shards(net, cc.world_size);
  for (std::size_t s : layout.unit_shard) largest = std::max(largest, 4 * s * static_cast<std::size_t>(cc.world_size));
  const std::size_t model_bytes = 4 * net.num_params();
  for (bool prefetch : {false, true}) {
    const Run run = train_zero(cfg, cc, 3, prefetch);
    std::printf("stage 3%s: transient peak %zu bytes = %.2f largest units, model %zu bytes\n",
                prefetch ? " with prefetch" : "", run.comm_peak,
                static_cast<double>(run.comm_peak) / static_cast<double>(largest), model_bytes);
    // Gathered unit(s), one unit's gradient and its padded reduce-scatter copy at most.
    CHECK(run.comm_peak <= (prefetch ? 4 : 3) * largest);
    CHECK(run.comm_peak < model_bytes);
  }
}

TEST_CASE("invalid arguments throw and name the problem") {
  const model::Model net(small_config());
  Cluster cluster(2);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) { make_zero_state(r, r.world(), net, 4, kWeightSeed); }),
                  std::invalid_argument);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
                    const ShardLayout layout = plan_shards(net, 2);
                    std::vector<float> wrong(layout.unit_shard[0] + 1);
                    gather_unit(r.world(), r.memory(), net, layout, 0, wrong);
                  }),
                  std::invalid_argument);
  const model::Batch odd = net.make_batch(3, 1);
  CHECK_THROWS_AS(zero_local_batch(odd, 0, 2), std::invalid_argument);
}
