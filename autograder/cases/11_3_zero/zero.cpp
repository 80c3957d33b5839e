// Graded cases of 11.3's running ZeRO code that run whole in the student's program (the shard
// plan and the batch slices), and the rank bodies of the cases in zero.host.cpp: a few ZeRO steps
// at a stage, publishing what the rank holds, and the bad calls zero_rejects expects rejected.
#include <stdexcept>
#include <string>
#include <vector>

#include "11_3_zero/zero.hpp"
#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "zero.inputs.hpp"

using namespace mgpu::grade;
namespace z = mgpu::zero;
namespace model = mgpu::model;

// `in.steps` steps at in.stage. The books of each phase come from checkpoints the cluster's side
// records; what the rank holds at the end is published.
MGPU_RANK_BODY("11_3.train", ZeroTrainInput) {
  const model::Model net(in.config);
  z::ZeroState state = z::make_zero_state(rank, rank.world(), net, in.stage, in.seed,
                                          model::AdamConfig{.lr = 1e-3f}, in.precision);
  rank.checkpoint("state");
  rank.memory().reset_peaks();  // from here on the peaks are the state plus what a step adds
  rank.checkpoint("steps_start");
  std::vector<double> losses;
  for (int s = 0; s < in.steps; ++s) {
    const model::Batch batch =
        net.make_batch(in.sequences, in.seed + 100 + static_cast<std::uint64_t>(s));
    losses.push_back(z::zero_step(rank, rank.world(), net, state, batch, in.prefetch, in.overlap));
  }
  rank.checkpoint("steps_end");
  rank.publish("losses", losses);
  if (in.precision == z::Precision::bf16_mixed) {
    std::vector<float> grads;
    for (mgpu::bf16 g : state.grads16.span()) grads.push_back(static_cast<float>(g));
    rank.publish("grads", grads);
    rank.publish("master", state.master);
  } else {
    rank.publish("grads", state.grads);
  }
  rank.publish("adam_m", state.adam_m);
  rank.publish("weights", z::full_weights(rank, rank.world(), net, state));
}

// make_zero_state at a stage zero_rejects expects rejected.
MGPU_RANK_BODY("11_3.make_zero_state", ZeroRejectInput) {
  const model::Model net(in.config);
  z::make_zero_state(rank, rank.world(), net, in.stage, 1);
}

// gather_unit with an owned buffer one element longer than unit 0's shard.
MGPU_RANK_BODY("11_3.gather_wrong_length", ZeroRejectInput) {
  const model::Model net(in.config);
  const z::ShardLayout layout = z::plan_shards(net, rank.world_size());
  std::vector<float> wrong(layout.unit_shard[0] + 1);
  z::gather_unit(rank.world(), rank.memory(), net, layout, 0, wrong);
}

// gather_unit with an owned buffer one element short of this rank's owned range of unit 0.
MGPU_RANK_BODY("11_3.gather_short_owned", ZeroRejectInput) {
  const model::Model net(in.config);
  const z::ShardLayout layout = z::plan_shards(net, rank.world_size());
  const mgpu::Chunk own = z::owned_range(layout, 0, rank.world().rank(), net.unit(0).count);
  std::vector<float> short_by_one(own.count - 1);
  z::gather_unit(rank.world(), rank.memory(), net, layout, 0, short_by_one);
}

MGPU_CASE("11_3.plan_shards") {
  // Edges: one rank, ranks dividing no unit, more ranks than the tiny head has parameters.
  const model::Model drawn(configs::drawn(ctx)), tiny(configs::tiny());
  struct Plan {
    const model::Model& net;
    int ranks;
  };
  const std::vector<Plan> plans{
      {drawn, 1}, {drawn, 3}, {tiny, 4}, {tiny, 8}, {drawn, ctx.uniform_int(2, 9)}};
  std::vector<double> shard, offset, size;
  for (const Plan& p : plans) {
    const z::ShardLayout layout = z::plan_shards(p.net, p.ranks);
    shard.insert(shard.end(), layout.unit_shard.begin(), layout.unit_shard.end());
    offset.insert(offset.end(), layout.unit_offset.begin(), layout.unit_offset.end());
    size.push_back(static_cast<double>(layout.shard_size));
  }
  ctx.emit("unit_shard", shard);
  ctx.emit("unit_offset", offset);
  ctx.emit("shard_size", size);
  ctx.emit_rejects("rejects_zero_ranks", [&] { z::plan_shards(drawn, 0); });
}

MGPU_CASE("11_3.zero_local_batch") {
  // Every rank's slice of a drawn split (rank 0 and rank N - 1, the inside ends, included), then
  // each bound just outside: rank -1 and rank N, 0 ranks, a batch that does not split.
  const model::Model net(configs::drawn(ctx));
  const int ranks = ctx.uniform_int(1, 6);
  const model::Batch global = net.make_batch(ranks * ctx.uniform_int(1, 3), 23);
  std::vector<double> sequences;
  std::vector<float> inputs;
  for (int r = 0; r < ranks; ++r) {
    const model::Batch part = z::zero_local_batch(global, r, ranks);
    sequences.push_back(static_cast<double>(part.sequences));
    inputs.insert(inputs.end(), part.inputs.begin(), part.inputs.end());
  }
  ctx.emit("sequences", sequences);
  ctx.emit("inputs", inputs, DType::f32);
  // A rank past a one-sided check fails inside Batch::slice with std::out_of_range, not the
  // std::invalid_argument the header asks for: that counts as not rejected (as in
  // 11_2.local_batch).
  auto rejects_rank = [&](const char* name, int r) {
    ctx.emit_rejects(name, [&] {
      try {
        z::zero_local_batch(global, r, ranks);
      } catch (const std::out_of_range&) {
      }
    });
  };
  rejects_rank("rejects_rank_ranks", ranks);
  rejects_rank("rejects_negative_rank", -1);
  ctx.emit_rejects("rejects_zero_ranks", [&] { z::zero_local_batch(global, 0, 0); });
  ctx.emit_rejects("rejects_uneven_batch",
                   [&] { z::zero_local_batch(net.make_batch(2 * ranks + 1, 24), 0, ranks + 1); });
}
