// Graded cases of 11.2's data-parallel training on the course model: batch slices, training
// steps (runtime all-reduce and the student's ring) judged by the averaged gradients each step
// applied on every rank, the bucket plan, and the bucketed step overlapped with backward.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "11_2_data_parallel/data_parallel.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

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
  cluster.run([&](mgpu::Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), seed);
    model::Adam adam(r.memory(), net.num_params(), model::AdamConfig{.lr = 1e-3f});
    for (int s = 0; s < steps; ++s) {
      const auto step = static_cast<std::size_t>(s);
      const model::Batch batch = net.make_batch(sequences, seed + 100 + step);
      const double loss =
          buckets
              ? dp::data_parallel_step_overlapped(r, r.world(), net, replica, adam, batch, *buckets)
              : dp::data_parallel_step(r, r.world(), net, replica, adam, batch, averager);
      // Published, not stored here: a rank may be a process of its own.
      r.publish("loss" + std::to_string(s), std::vector<double>{loss});
      r.publish("grads" + std::to_string(s),
                every_kth(std::vector<float>(replica.grads.begin(), replica.grads.end()), 600));
    }
    r.publish("params", replica.params);
  });
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

MGPU_CASE("11_2.local_batch") {
  const model::Model net(configs::drawn(ctx));
  const int ranks = ctx.uniform_int(1, 8);
  const model::Batch global = net.make_batch(ranks * ctx.uniform_int(1, 4), 17);
  const int rank = ctx.uniform_int(0, ranks - 1);
  const model::Batch part = dp::local_batch(global, rank, ranks);
  ctx.emit("sequences", static_cast<double>(part.sequences));
  ctx.emit("inputs", part.inputs, DType::f32);
  ctx.emit("targets", part.targets, DType::f32);
  // The last rank of a fixed 3-way split of 6 sequences: an off-by-one slice shows here.
  const model::Batch last = dp::local_batch(net.make_batch(6, 19), 2, 3);
  ctx.emit("last_of_three_inputs", last.inputs, DType::f32);
  const model::Batch odd =
      net.make_batch(2 * ranks + 1, 18);  // 2N + 1 sequences never split over N >= 2
  ctx.emit_rejects("rejects_uneven_batch", [&] { dp::local_batch(odd, 0, std::max(ranks, 2)); });
  // A rank outside [0, N) that gets past the checks fails inside Batch::slice with
  // std::out_of_range; the header asks for std::invalid_argument, so that counts as not rejected
  // (a wrong value here, rather than a crash that hides every other value).
  auto rejects_rank = [&](const char* name, int r) {
    ctx.emit_rejects(name, [&] {
      try {
        dp::local_batch(global, r, ranks);
      } catch (const std::out_of_range&) {
      }
    });
  };
  rejects_rank("rejects_rank_out_of_range", ranks);
  rejects_rank("rejects_negative_rank", -1);
}

MGPU_CASE_ISOLATED("11_2.dp_step_runtime") { dp_step_case(ctx, dp::GradAverager::runtime); }

MGPU_CASE_ISOLATED("11_2.dp_step_ring") { dp_step_case(ctx, dp::GradAverager::ring); }

MGPU_CASE("11_2.plan_buckets") {
  const model::Model net(configs::drawn(ctx));
  // From one tensor per bucket to one bucket for everything.
  const auto cap = static_cast<std::size_t>(
      ctx.pick({0.0, ctx.log_uniform(16, 4.0 * static_cast<double>(net.num_params()) * 2)}));
  std::vector<double> offsets, counts, units;
  for (const dp::Bucket& b : dp::plan_buckets(net, cap)) {
    offsets.push_back(static_cast<double>(b.offset));
    counts.push_back(static_cast<double>(b.count));
    units.push_back(b.ready_unit);
  }
  ctx.emit("bucket_bytes", static_cast<double>(cap));
  ctx.emit("offsets", offsets);
  ctx.emit("counts", counts);
  ctx.emit("ready_units", units);
  // Fixed caps on the same model, whatever was drawn above: 0 (one bucket per tensor); exactly the
  // bytes of the last two tensors, so the first bucket reaches the cap exactly and must close
  // there ("at least bucket_bytes"); and 4 bytes more than the whole model, so one bucket is left
  // open at the end, spans every unit and becomes ready with the embedding (unit 0).
  const auto& tensors = net.tensors();
  const std::size_t last_two =
      tensors[tensors.size() - 1].size() + tensors[tensors.size() - 2].size();
  const std::pair<const char*, std::size_t> fixed[] = {
      {"per_tensor_", 0},
      {"exact_cap_", last_two * sizeof(float)},
      {"over_model_cap_", net.num_params() * sizeof(float) + sizeof(float)}};
  for (const auto& [prefix, bytes] : fixed) {
    std::vector<double> o, c, u;
    for (const dp::Bucket& b : dp::plan_buckets(net, bytes)) {
      o.push_back(static_cast<double>(b.offset));
      c.push_back(static_cast<double>(b.count));
      u.push_back(b.ready_unit);
    }
    ctx.emit(std::string(prefix) + "offsets", o);
    ctx.emit(std::string(prefix) + "counts", c);
    ctx.emit(std::string(prefix) + "ready_units", u);
  }
}

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
      mgpu::Cluster(2).run([&](mgpu::Rank& r) {
        model::Replica replica = net.make_replica(r.memory(), seed);
        model::Adam adam(r.memory(), net.num_params(), model::AdamConfig{.lr = 1e-3f});
        dp::data_parallel_step_overlapped(r, r.world(), net, replica, adam,
                                          net.make_batch(4, seed + 1), two);
      });
    });
  };
  rejects_ready_unit("rejects_ready_unit_negative", -1);
  rejects_ready_unit("rejects_ready_unit_past_the_last", units);
  rejects_ready_unit("rejects_ready_unit_last", units - 1);
}
