// 11.2 Data-parallel training steps (reference solution): slice the batch, average gradients,
// apply the same Adam update everywhere; then the same with buckets sent during backward, and
// in bf16 mixed precision.
#include "11_2_data_parallel/data_parallel.hpp"

#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

model::Batch local_batch(const model::Batch& global, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw std::invalid_argument("local_batch: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks) + " is not a valid data-parallel rank");
  }
  if (global.sequences % ranks != 0) {
    throw std::invalid_argument("local_batch: a batch of " + std::to_string(global.sequences) +
                                " sequences does not split evenly over " + std::to_string(ranks) +
                                " ranks; pick a batch size divisible by the rank count");
  }
  const std::int64_t per_rank = global.sequences / ranks;
  return global.slice(rank * per_rank, per_rank);
}

double data_parallel_step(Rank& rank, Comm& dp, const model::Model& model, model::Replica& replica,
                          model::Adam& adam, const model::Batch& global, GradAverager averager) {
  const model::Batch local = local_batch(global, dp.rank(), dp.size());
  model::zero(replica.grads.span());
  const double loss =
      model.forward_backward(rank, replica.params.span(), replica.grads.span(), local);
  if (averager == GradAverager::runtime) {
    dp.all_reduce(replica.grads.span(), ReduceOp::avg);
  } else {
    ring_all_reduce(dp, replica.grads.span(), rank.memory());
    const auto n = static_cast<float>(dp.size());
    for (float& g : replica.grads) g /= n;
  }
  adam.step(replica.params.span(), replica.grads.span());
  return loss;
}

std::vector<Bucket> plan_buckets(const model::Model& model, std::size_t bucket_bytes) {
  std::vector<Bucket> buckets;
  bool open = false;
  Bucket current;
  const auto& tensors = model.tensors();
  for (auto t = tensors.rbegin(); t != tensors.rend(); ++t) {
    // Walking backwards through the flat buffer, each tensor extends the open bucket downwards.
    if (!open) current = Bucket{t->offset + t->size(), 0, t->unit};
    open = true;
    current.offset = t->offset;
    current.count += t->size();
    current.ready_unit = t->unit;
    if (current.count * sizeof(float) >= bucket_bytes) {
      buckets.push_back(current);
      open = false;
    }
  }
  if (open) buckets.push_back(current);
  return buckets;
}

double data_parallel_step_overlapped(Rank& rank, Comm& dp, const model::Model& model,
                                     model::Replica& replica, model::Adam& adam,
                                     const model::Batch& global, std::span<const Bucket> buckets) {
  const model::Batch local = local_batch(global, dp.rank(), dp.size());
  std::span<float> grads = replica.grads.span();
  model::zero(grads);
  std::vector<Request> pending;
  pending.reserve(buckets.size());
  // Runs between two units' backward passes: each post returns at once and the comm stream
  // works through the buckets while the compute stream goes on with the next unit.
  auto start_ready_buckets = [&](int unit) {
    for (const Bucket& b : buckets) {
      if (b.ready_unit == unit)
        pending.push_back(dp.iall_reduce(grads.subspan(b.offset, b.count), ReduceOp::avg));
    }
  };
  const double loss =
      model.forward_backward(rank, replica.params.span(), grads, local, start_ready_buckets);
  if (pending.size() != buckets.size()) {
    throw std::invalid_argument(
        "data_parallel_step_overlapped: only " + std::to_string(pending.size()) + " of " +
        std::to_string(buckets.size()) +
        " buckets name a unit of the model as ready_unit; build them with plan_buckets");
  }
  wait_all(pending);
  adam.step(replica.params.span(), grads);
  return loss;
}

MixedReplica make_mixed_replica(MemoryLedger& ledger, const model::Model& model, std::uint64_t seed,
                                const model::AdamConfig& adam) {
  const std::size_t p = model.num_params();
  MixedReplica replica;
  replica.adam = adam;
  // The master is initialised in place, so nothing but the recipe's 16 bytes per parameter is
  // ever held; the bf16 weights are its rounding, never the other way round.
  replica.master = Buffer<float>(ledger, Category::master, p, "dp.master");
  model.init_params(replica.master.span(), seed);
  replica.weights16 = Buffer<bf16>(ledger, Category::weights, p, "dp.weights16");
  model::to_bf16(replica.master.span(), replica.weights16.span());
  replica.grads16 = Buffer<bf16>(ledger, Category::grads, p, "dp.grads16");
  replica.adam_m = Buffer<float>(ledger, Category::optimizer, p, "dp.adam_m");
  replica.adam_v = Buffer<float>(ledger, Category::optimizer, p, "dp.adam_v");
  return replica;
}

double data_parallel_step_mixed(Rank& rank, Comm& dp, const model::Model& model,
                                MixedReplica& replica, const model::Batch& global) {
  const model::Batch local = local_batch(global, dp.rank(), dp.size());
  MemoryLedger& ledger = rank.memory();
  const std::size_t p = model.num_params();
  // The model computes in fp32: a widened copy of the weights, and an fp32 gradient to
  // accumulate into (both zero-initialised scratch, under comm so the state stays 16 bytes).
  Buffer<float> widened(ledger, Category::comm, p, "dp.widened");
  model::to_float(replica.weights16.span(), widened.span());
  Buffer<float> grads(ledger, Category::comm, p, "dp.grads_fp32");
  const double loss = model.forward_backward(rank, widened.span(), grads.span(), local);
  widened.reset();
  model::to_bf16(grads.span(), replica.grads16.span());
  dp.all_reduce(replica.grads16.span(), ReduceOp::avg);
  // Adam reads fp32: widen the averaged bf16 gradient into the scratch that is still held.
  model::to_float(replica.grads16.span(), grads.span());
  model::adam_step_mixed(replica.master.span(), grads.span(), replica.adam_m.span(),
                         replica.adam_v.span(), ++replica.steps, replica.adam,
                         replica.weights16.span());
  return loss;
}

}  // namespace mgpu::data_parallel
