// Graded cases of 11.2's data-parallel training steps on the course model: the runtime
// all-reduce and the student's ring, judged by the averaged gradients each step applied on every
// rank, and the bucketed step overlapped with backward. Each rank runs data_parallel.cpp's rank
// bodies on the inputs made here.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "case.hpp"
#include "data_parallel.inputs.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
namespace dp = mgpu::data_parallel;
namespace model = mgpu::model;

namespace {

// What a run of a few data-parallel steps left behind.
struct Trained {
  std::vector<std::vector<float>> params;              // per rank, after the last step
  std::vector<std::vector<std::vector<float>>> grads;  // [step][rank]: the gradients Adam applied
  std::vector<std::vector<double>> losses;             // [step][rank]: each rank's slice loss
  double makespan = 0;                                 // virtual seconds of the whole run
};

// `steps` steps on `cc.world_size` ranks; plain (with `averager`) or overlapped with `buckets`.
// The gradients are read after each step: the header promises that replica.grads then holds the
// averaged gradients Adam applied. Weights after Adam alone would hide a gradient N times too
// large (Adam divides it out), so the gradients themselves are what the case compares.
Trained train(const model::Model& net, const mgpu::ClusterConfig& cc, int steps,
              std::int64_t sequences, std::uint64_t seed, dp::GradAverager averager,
              const std::vector<dp::Bucket>* buckets) {
  const auto ranks = static_cast<std::size_t>(cc.world_size);
  Trained t;
  t.params.resize(ranks);
  t.grads.assign(static_cast<std::size_t>(steps), std::vector<std::vector<float>>(ranks));
  t.losses.assign(static_cast<std::size_t>(steps), std::vector<double>(ranks));
  mgpu::Cluster cluster(cc);
  const TrainInput input{net.config(),
                         steps,
                         sequences,
                         seed,
                         averager,
                         buckets != nullptr,
                         buckets ? *buckets : std::vector<dp::Bucket>{}};
  run_ranks(cluster, "11_2.train", [&](int) { return input; });
  for (std::size_t me = 0; me < ranks; ++me) {
    const int id = static_cast<int>(me);
    for (int s = 0; s < steps; ++s) {
      const auto step = static_cast<std::size_t>(s);
      t.losses[step][me] = cluster.published<double>(id, "loss" + std::to_string(s))[0];
      t.grads[step][me] = cluster.published<float>(id, "grads" + std::to_string(s));
    }
    t.params[me] = cluster.published<float>(id, "params");
  }
  t.makespan = cluster.makespan();
  return t;
}

// Emits one run under names starting with `prefix`: the averaged gradients of every step on every
// rank ("grads_step1_rank2", so feedback names both), each rank's slice loss per step, rank 0's
// weights after the last step, and whether the replicas stayed bitwise identical.
void emit_run(Ctx& ctx, const std::string& prefix, const Trained& t) {
  for (std::size_t s = 0; s < t.grads.size(); ++s) {
    const std::string step = "step" + std::to_string(s);
    for (std::size_t r = 0; r < t.grads[s].size(); ++r)
      ctx.emit(prefix + "grads_" + step + "_rank" + std::to_string(r), t.grads[s][r], DType::f32);
    ctx.emit_per_rank(prefix + "loss_" + step, t.losses[s], DType::f32);
  }
  ctx.emit(prefix + "weights", every_kth(t.params[0]), DType::f32);
  ctx.emit(prefix + "replicas_identical", bitwise_identical(t.params));
}

// Plain data-parallel runs: the drawn one first (a drawn model on 2 to 8 ranks, whose rank count
// is the "ranks" the feedback's sum-vs-average hint uses, and whose names sort first, so the
// case's reason comes from it), then two fixed points: one rank (nothing to average, no message
// may be needed) and three ranks on a gradient whose length 3 does not divide.
void dp_step_case(Ctx& ctx, dp::GradAverager averager) {
  const model::Model drawn(configs::drawn(ctx));
  mgpu::ClusterConfig cc;
  cc.world_size = ctx.pick({2, 3, 4, 5, 6, 8});
  const std::int64_t sequences = cc.world_size * ctx.uniform_int(1, 3);
  const int steps = ctx.uniform_int(2, 3);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  ctx.emit("ranks", cc.world_size);
  emit_run(ctx, "", train(drawn, cc, steps, sequences, seed, averager, nullptr));

  const model::Model uneven(configs::uneven());
  if (uneven.num_params() % 3 == 0)
    throw std::logic_error("configs::uneven() must not split evenly over 3 ranks");
  for (auto [prefix, ranks] : {std::pair{"one_rank_", 1}, std::pair{"three_ranks_", 3}}) {
    cc.world_size = ranks;
    emit_run(ctx, prefix, train(uneven, cc, 2, 2 * ranks, seed + 7, averager, nullptr));
  }
}

}  // namespace

MGPU_CASE_ISOLATED("11_2.dp_step_runtime") { dp_step_case(ctx, dp::GradAverager::runtime); }

MGPU_CASE_ISOLATED("11_2.dp_step_ring") { dp_step_case(ctx, dp::GradAverager::ring); }

MGPU_CASE_ISOLATED("11_2.overlapped_step") {
  // The balance of the chapter's demo: a slow "GPU" and link, so the gradient all-reduce takes
  // about as long as backward and overlapping them shortens the step markedly.
  const model::Model net(configs::overlap(ctx.uniform_int(4, 6)));
  const mgpu::ClusterConfig cc = slow_cluster(ctx.pick({2, 4, 8}));
  const std::int64_t sequences = 64;
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  // The buckets come from the case, not from the submission's plan_buckets (graded on its own):
  // one bucket per group of whole units, about `groups` of them, closed at unit boundaries.
  const int groups = ctx.uniform_int(3, 6);
  std::vector<dp::Bucket> buckets;
  const std::size_t target = net.num_params() / static_cast<std::size_t>(groups);
  std::size_t end = net.num_params();
  for (int u = net.num_units() - 1; u >= 0; --u) {
    const model::UnitInfo& info = net.unit(u);
    if (end - info.offset >= target || u == 0) {
      buckets.push_back({info.offset, end - info.offset, u});
      end = info.offset;
    }
  }
  const Trained t = train(net, cc, 2, sequences, seed, dp::GradAverager::runtime, &buckets);
  ctx.emit("ranks", cc.world_size);
  ctx.emit("buckets", static_cast<double>(buckets.size()));
  emit_run(ctx, "", t);
  ctx.measure("step_seconds", t.makespan / 2);
  // The ready_unit bounds, units 0 to num_units() - 1, from both sides: the head's parameters in
  // a bucket of their own, ready at unit -1 or num_units() (no unit: rejected) or at the head
  // itself (the last unit: fine), the rest ready at unit 0 (the first: fine).
  const int units = net.num_units();
  const model::UnitInfo& head = net.unit(units - 1);
  auto rejects_ready_unit = [&](const char* name, int unit) {
    const std::vector<dp::Bucket> two{{head.offset, head.count, unit}, {0, head.offset, 0}};
    ctx.emit_rejects(name, [&] {
      mgpu::Cluster cluster(2);
      const TrainInput input{net.config(), 1, 4, seed, dp::GradAverager::runtime, true, two};
      run_ranks(cluster, "11_2.overlapped_step_once", [&](int) { return input; });
    });
  };
  rejects_ready_unit("rejects_ready_unit_negative", -1);
  rejects_ready_unit("rejects_ready_unit_past_the_last", units);
  rejects_ready_unit("rejects_ready_unit_last", units - 1);
}
