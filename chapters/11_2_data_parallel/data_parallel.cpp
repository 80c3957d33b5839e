// 11.2 Data-parallel training steps: your implementation. Slice the batch, average gradients,
// apply the same Adam update everywhere; then the same with buckets sent during backward, and
// in bf16 mixed precision.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_2 <id>` gives hints for it.
#include "11_2_data_parallel/data_parallel.hpp"

#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

model::Batch local_batch(const model::Batch& global, int rank, int ranks) {
  // TODO(11.2 local_batch): the N slices are equal, disjoint, contiguous and in rank order, so
  //   together they are the batch; an uneven batch or a bad rank throws std::invalid_argument
  //   with the header's message. Batch::slice (mgpu/model/model.hpp) makes the view.
  throw NotImplemented("11.2 local_batch");
}

double data_parallel_step(Rank& rank, Comm& dp, const model::Model& model, model::Replica& replica,
                          model::Adam& adam, const model::Batch& global, GradAverager averager) {
  // TODO(11.2 data_parallel_step): after the step every replica holds the same weights, those
  //   one rank would reach training on the whole batch, and replica.grads holds the gradient of
  //   the whole batch's loss (the same on every rank) that Adam applied. `averager` picks how the
  //   ranks agree: the runtime's collective (dp.all_reduce and a ReduceOp) or your
  //   ring_all_reduce. Calls: model::zero, model.forward_backward, adam.step.
  throw NotImplemented("11.2 data_parallel_step");
}

std::vector<Bucket> plan_buckets(const model::Model& model, std::size_t bucket_bytes) {
  // TODO(11.2 plan_buckets): buckets in the order backward finishes them, together covering
  //   every parameter once, each a contiguous range of whole tensors (model.tensors(): offset,
  //   size(), unit) of at least bucket_bytes unless it is the last, with ready_unit the unit
  //   whose backward completes it.
  throw NotImplemented("11.2 plan_buckets");
}

double data_parallel_step_overlapped(Rank& rank, Comm& dp, const model::Model& model,
                                     model::Replica& replica, model::Adam& adam,
                                     const model::Batch& global, std::span<const Bucket> buckets) {
  // TODO(11.2 data_parallel_step_overlapped): bitwise the result of data_parallel_step with the
  //   runtime averager, but each bucket's reduction is in flight while backward still computes
  //   the units below it. Calls: model.forward_backward's optional hook (called with a unit's
  //   index once its gradients are final), dp.iall_reduce (returns a Request at once), wait_all.
  throw NotImplemented("11.2 data_parallel_step_overlapped");
}

MixedReplica make_mixed_replica(MemoryLedger& ledger, const model::Model& model, std::uint64_t seed,
                                const model::AdamConfig& adam) {
  // TODO(11.2 make_mixed_replica): the five buffers of MixedReplica, each in its category, and
  //   nothing else left in the ledger: 2 + 2 + 4 + 8 bytes per parameter. The master starts from
  //   the fp32 initial parameters and the bf16 weights are its rounding, so a master rebuilt from
  //   the bf16 weights is already off by up to half a bf16 step. Calls: Buffer<T>(ledger,
  //   category, count, label), model.init_params, model::to_bf16.
  throw NotImplemented("11.2 make_mixed_replica");
}

double data_parallel_step_mixed(Rank& rank, Comm& dp, const model::Model& model,
                                MixedReplica& replica, const model::Batch& global) {
  // TODO(11.2 data_parallel_step_mixed): data_parallel_step in the mixed recipe. The model reads
  //   and writes fp32, the replica keeps bf16, and the ranks must agree on a gradient that went
  //   over the wire as bf16 (half the bytes of fp32), averaged, not summed. Adam updates the fp32
  //   master and hands back the rounded bf16 weights. Short-lived fp32 copies go under
  //   Category::comm and are gone when the step returns. Calls: model::to_float,
  //   model.forward_backward, model::to_bf16, dp.all_reduce, model::adam_step_mixed.
  throw NotImplemented("11.2 data_parallel_step_mixed");
}

}  // namespace mgpu::data_parallel
