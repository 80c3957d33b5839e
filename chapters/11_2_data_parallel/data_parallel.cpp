// 11.2 Data-parallel training steps: your implementation. Slice the batch, average gradients,
// apply the same Adam update everywhere; then the same with buckets sent during backward.
#include "11_2_data_parallel/data_parallel.hpp"

#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

model::Batch local_batch(const model::Batch& global, int rank, int ranks) {
  // TODO(11.2 local_batch): check the arguments (see the header for the message), then return
  //   global.slice(first_sequence, sequences_per_rank).
  throw NotImplemented("11.2 local_batch");
}

double data_parallel_step(Rank& rank, Comm& dp, const model::Model& model, model::Replica& replica,
                          model::Adam& adam, const model::Batch& global, GradAverager averager) {
  // TODO(11.2 data_parallel_step):
  //   1. model::zero(replica.grads.span()); then model.forward_backward(rank, params, grads, your slice)
  //   2. runtime: dp.all_reduce(grads, ReduceOp::avg);
  //      ring:    ring_all_reduce(dp, grads, rank.memory()), then divide every gradient by dp.size()
  //   3. adam.step(params, grads); return the loss forward_backward gave you.
  throw NotImplemented("11.2 data_parallel_step");
}

std::vector<Bucket> plan_buckets(const model::Model& model, std::size_t bucket_bytes) {
  // TODO(11.2 plan_buckets): walk model.tensors() backwards (rbegin/rend). Each TensorInfo has
  //   offset, size() and unit. Grow the open bucket downwards (offset = the tensor's offset,
  //   count += its size, ready_unit = its unit) and close it once count * sizeof(float) >= bucket_bytes.
  throw NotImplemented("11.2 plan_buckets");
}

double data_parallel_step_overlapped(Rank& rank, Comm& dp, const model::Model& model, model::Replica& replica,
                                     model::Adam& adam, const model::Batch& global,
                                     std::span<const Bucket> buckets) {
  // TODO(11.2 data_parallel_step_overlapped): as data_parallel_step, but give forward_backward
  //   a hook, a lambda [&](int unit) { ... }, that posts dp.iall_reduce(grads.subspan(b.offset, b.count),
  //   ReduceOp::avg) for each bucket b with b.ready_unit == unit and keeps the Request in a
  //   std::vector<Request>. After backward: wait_all(requests), then adam.step.
  throw NotImplemented("11.2 data_parallel_step_overlapped");
}

}  // namespace mgpu::data_parallel
