// Graded cases of 11.2's data parallelism that run whole in the student's program (batch slices
// and the bucket plan), and the rank bodies of the training cases in data_parallel.host.cpp.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "11_2_data_parallel/data_parallel.hpp"
#include "case.hpp"
#include "data_parallel.inputs.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
namespace dp = mgpu::data_parallel;
namespace model = mgpu::model;

// `steps` steps of plain (in.averager) or overlapped (in.buckets) data parallelism. The gradients
// are published after each step: the header promises that replica.grads then holds the averaged
// gradients Adam applied.
MGPU_RANK_BODY("11_2.train", TrainInput) {
  const model::Model net(in.config);
  model::Replica replica = net.make_replica(rank.memory(), in.seed);
  model::Adam adam(rank.memory(), net.num_params(), model::AdamConfig{.lr = 1e-3f});
  for (int s = 0; s < in.steps; ++s) {
    const auto step = static_cast<std::size_t>(s);
    const model::Batch batch = net.make_batch(in.sequences, in.seed + 100 + step);
    const double loss =
        in.overlapped
            ? dp::data_parallel_step_overlapped(rank, rank.world(), net, replica, adam, batch,
                                                in.buckets)
            : dp::data_parallel_step(rank, rank.world(), net, replica, adam, batch, in.averager);
    rank.publish("loss" + std::to_string(s), std::vector<double>{loss});
    rank.publish("grads" + std::to_string(s),
                 every_kth(std::vector<float>(replica.grads.begin(), replica.grads.end()), 600));
  }
  rank.publish("params", replica.params);
}

// One overlapped step with the case's buckets: whether the step accepts them.
MGPU_RANK_BODY("11_2.overlapped_step_once", TrainInput) {
  const model::Model net(in.config);
  model::Replica replica = net.make_replica(rank.memory(), in.seed);
  model::Adam adam(rank.memory(), net.num_params(), model::AdamConfig{.lr = 1e-3f});
  dp::data_parallel_step_overlapped(rank, rank.world(), net, replica, adam,
                                    net.make_batch(4, in.seed + 1), in.buckets);
}

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
