// Graded cases of 11.3's running ZeRO stages on the course model: the shard plan, a few training
// steps at each stage, the ledger's state per rank, the traffic per step, and stage 3 with
// prefetch, whose virtual step time is budgeted against the reference's.
#include <algorithm>
#include <array>
#include <vector>

#include "11_3_zero/zero.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

using namespace mgpu::grade;
namespace z = mgpu::zero;
namespace model = mgpu::model;

namespace {

// What a run of a few ZeRO steps left behind.
struct Trained {
  std::vector<std::vector<float>> weights;  // full weights per rank
  std::vector<double> losses;               // per step, rank 0's slice
  std::vector<double> peaks;                // per rank: weights, grads, master, optimizer peak bytes
  std::vector<double> bytes_sent;           // per rank, during the steps
  double makespan = 0;                      // virtual seconds of the whole run
};

Trained train(const model::Model& net, const mgpu::ClusterConfig& cc, int stage, bool prefetch, int steps,
              std::int64_t sequences, std::uint64_t seed) {
  Trained t;
  const auto n = static_cast<std::size_t>(cc.world_size);
  t.weights.resize(n);
  t.bytes_sent.resize(n);
  t.losses.resize(static_cast<std::size_t>(steps));
  mgpu::Cluster cluster(cc);
  cluster.run([&](mgpu::Rank& r) {
    z::ZeroState state = z::make_zero_state(r, r.world(), net, stage, seed, model::AdamConfig{.lr = 1e-3f});
    const auto before = static_cast<double>(r.traffic().total().bytes_sent);
    for (int s = 0; s < steps; ++s) {
      const model::Batch batch = net.make_batch(sequences, seed + 100 + static_cast<std::uint64_t>(s));
      const double loss = z::zero_step(r, r.world(), net, state, batch, prefetch);
      if (r.id() == 0) t.losses[static_cast<std::size_t>(s)] = loss;
    }
    const auto id = static_cast<std::size_t>(r.id());
    t.bytes_sent[id] = static_cast<double>(r.traffic().total().bytes_sent) - before;
    t.weights[id] = z::full_weights(r, r.world(), net, state);
  });
  for (const mgpu::RankReport& rep : cluster.reports())
    for (mgpu::Category c : {mgpu::Category::weights, mgpu::Category::grads, mgpu::Category::master,
                             mgpu::Category::optimizer})
      t.peaks.push_back(static_cast<double>(rep.memory.peak(c)));
  t.makespan = cluster.makespan();
  return t;
}


void stage_case(Ctx& ctx, int stage) {
  const model::Model net(drawn_model_config(ctx));
  mgpu::ClusterConfig cc;
  cc.world_size = ctx.pick({2, 3, 4, 6, 8});
  const std::int64_t sequences = cc.world_size * ctx.uniform_int(1, 3);
  const int steps = ctx.uniform_int(2, 4);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const Trained t = train(net, cc, stage, false, steps, sequences, seed);
  ctx.emit("ranks", cc.world_size);
  ctx.emit("weights", every_kth(t.weights[0]), Dtype::fp32);
  ctx.emit("losses", t.losses, Dtype::fp32);
  ctx.emit("replicas_identical", bitwise_identical(t.weights));
}

}  // namespace

MGPU_CASE("11_3.plan_shards") {
  const model::Model net(drawn_model_config(ctx));
  const int ranks = ctx.uniform_int(1, 9);
  const z::ShardLayout layout = z::plan_shards(net, ranks);
  ctx.emit("unit_shard", layout.unit_shard);
  ctx.emit("unit_offset", layout.unit_offset);
  ctx.emit("shard_size", static_cast<double>(layout.shard_size));
  ctx.emit_rejects("rejects_zero_ranks", [&] { z::plan_shards(net, 0); });
}

MGPU_CASE("11_3.stage1_step") { stage_case(ctx, 1); }

MGPU_CASE("11_3.stage2_step") { stage_case(ctx, 2); }

MGPU_CASE("11_3.stage3_step") { stage_case(ctx, 3); }

MGPU_CASE("11_3.state_and_traffic") {
  // The ledger's peak state per rank and category and the bytes each rank sent, at every stage:
  // exact, since the shard layout is specified to the element.
  const model::Model net(drawn_model_config(ctx));
  mgpu::ClusterConfig cc;
  cc.world_size = ctx.pick({2, 3, 4, 8});
  const std::int64_t sequences = cc.world_size;
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  std::vector<double> peaks, sent;
  for (int stage = 0; stage <= 3; ++stage) {
    const Trained t = train(net, cc, stage, false, 1, sequences, seed);
    peaks.insert(peaks.end(), t.peaks.begin(), t.peaks.end());
    sent.insert(sent.end(), t.bytes_sent.begin(), t.bytes_sent.end());
  }
  ctx.emit("ranks", cc.world_size);
  ctx.emit("peak_state_bytes", peaks);
  ctx.emit("bytes_sent_per_step", sent);
}

MGPU_CASE("11_3.fsdp_prefetch") {
  // A slow "GPU" and link, so a unit's gather takes about as long as its compute and posting the
  // next gather before computing the current unit shortens the step markedly.
  const model::Model net(overlap_model_config(ctx.uniform_int(3, 6)));
  const mgpu::ClusterConfig cc = slow_cluster(ctx.pick({2, 4, 8}));
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const Trained t = train(net, cc, 3, true, 2, 8 * cc.world_size, seed);
  ctx.emit("ranks", cc.world_size);
  ctx.emit("weights", every_kth(t.weights[0]), Dtype::fp32);
  ctx.emit("losses", t.losses, Dtype::fp32);
  ctx.measure("step_seconds", t.makespan / 2);
}

MGPU_CASE("11_3.zero_rejects") {
  const model::Model net(drawn_model_config(ctx));
  mgpu::Cluster cluster(2);
  ctx.emit_rejects("rejects_stage_4", [&] {
    cluster.run([&](mgpu::Rank& r) { z::make_zero_state(r, r.world(), net, 4, 1); });
  });
  ctx.emit_rejects("rejects_wrong_owned_length", [&] {
    cluster.run([&](mgpu::Rank& r) {
      const z::ShardLayout layout = z::plan_shards(net, 2);
      std::vector<float> wrong(layout.unit_shard[0] + 1);
      z::gather_unit(r.world(), r.memory(), net, layout, 0, wrong);
    });
  });
}
