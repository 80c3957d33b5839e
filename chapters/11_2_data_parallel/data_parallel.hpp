// 11.2 Data parallelism: a training step on N replicas of the course model, first with one
// gradient all-reduce after backward, then with gradient buckets whose all-reduces run while
// backward is still computing. Every rank runs the same code on its own slice of the batch.
#pragma once

#include "mgpu/cluster.hpp"  // not mgpu.hpp: Eigen/Dense is not needed here and costs compile time
#include "mgpu/not_implemented.hpp"
#include "mgpu/model/model.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace mgpu::data_parallel {

/// How data_parallel_step averages the gradients across ranks.
enum class GradAverager {
  runtime,  ///< the runtime's Comm::all_reduce with ReduceOp::avg
  ring,     ///< your ring_all_reduce (TODO 6), then a division by the number of ranks
};

/// The slice of `global` that data-parallel rank `rank` of `ranks` trains on.
///
/// TODO 7 of 11.2. Rank r gets the contiguous sequences [r*B/N, (r+1)*B/N) of the B sequences,
/// so the slices are disjoint, equal, and together are the whole batch.
/// @throws std::invalid_argument when ranks < 1, rank is outside [0, ranks), or B is not a
///         multiple of N (equal slices make the average of the slice losses the batch loss);
///         the message names B and N and says to pick a batch size divisible by the rank count.
model::Batch local_batch(const model::Batch& global, int rank, int ranks);

/// One data-parallel training step on this rank's replica; returns the loss of this rank's slice.
///
/// TODO 8 of 11.2. The three steps of the text:
///  1. zero the gradients (the model accumulates into them), then run model.forward_backward on
///     local_batch(global, dp.rank(), dp.size());
///  2. average the gradients over `dp` (with `averager`): since each slice's loss is a mean over
///     its tokens and the slices are equal, the average is the gradient of the whole batch;
///  3. adam.step on the replica. Every rank applies the same update to the same weights, so the
///     replicas stay bitwise identical.
/// On return, replica.grads holds the averaged gradients that adam.step applied (the same on every
/// rank): the grader reads them there, because Adam's update hardly changes when every gradient
/// is scaled by the same factor, so the weights alone would not show a sum taken for an average.
/// `rank` is this rank (for its clock and ledger); `dp` is the data-parallel group (the world,
/// or a sub-group in 3D parallelism).
double data_parallel_step(Rank& rank, Comm& dp, const model::Model& model, model::Replica& replica,
                          model::Adam& adam, const model::Batch& global,
                          GradAverager averager = GradAverager::runtime);

/// A gradient bucket: a contiguous range of the flat gradient buffer, all-reduced as one message.
struct Bucket {
  std::size_t offset = 0;  ///< first gradient element
  std::size_t count = 0;   ///< number of gradient elements
  int ready_unit = 0;      ///< the unit whose backward completes this bucket (its lowest unit)
};

/// Groups the model's gradients into buckets of about `bucket_bytes` bytes, in the order backward
/// produces them (as PyTorch DDP does).
///
/// TODO 9 of 11.2. Walk model.tensors() from the last to the first, adding each whole tensor
/// (4 bytes per fp32 element) to the open bucket, and close the bucket as soon as it holds at least
/// `bucket_bytes`; the last bucket holds whatever is left. A tensor is never split, so a tensor
/// larger than `bucket_bytes` gets a bucket of its own, and bucket_bytes = 0 gives one bucket per
/// tensor. Because units are stored in forward order, each bucket is one contiguous range.
/// Returns the buckets in the order they become ready (highest offsets first); together they
/// cover [0, model.num_params()) exactly once. ready_unit is the unit of the bucket's first
/// (lowest-offset) tensor: backward finishes units from the last to the first.
std::vector<Bucket> plan_buckets(const model::Model& model, std::size_t bucket_bytes);

/// data_parallel_step with the gradient all-reduce overlapped with backward.
///
/// TODO 10 of 11.2. Same maths as data_parallel_step with GradAverager::runtime, but pass
/// model.forward_backward a hook: when unit u's gradients are ready, start (dp.iall_reduce,
/// ReduceOp::avg) every bucket whose ready_unit is u, keep the Requests, and return at once so
/// backward continues while the comm stream sends. Wait for all of them before adam.step.
/// The result is bitwise the same as the unbucketed step (averaging is element-wise); the
/// virtual step time falls from compute + communication towards max(compute, communication).
/// As there, replica.grads holds the averaged gradients on return.
double data_parallel_step_overlapped(Rank& rank, Comm& dp, const model::Model& model, model::Replica& replica,
                                     model::Adam& adam, const model::Batch& global,
                                     std::span<const Bucket> buckets);

}  // namespace mgpu::data_parallel
