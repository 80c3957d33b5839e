// 11.2 Data parallelism: a training step on N replicas of the course model, first with one
// gradient all-reduce after backward, then with gradient buckets whose all-reduces run while
// backward is still computing, then in bf16 mixed precision. Every rank runs the same code on
// its own slice of the batch.
#pragma once

#include "mgpu/cluster.hpp"  // not mgpu.hpp: Eigen/Dense is not needed here and costs compile time
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"

#include <cstddef>
#include <cstdint>
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
double data_parallel_step_overlapped(Rank& rank, Comm& dp, const model::Model& model,
                                     model::Replica& replica, model::Adam& adam,
                                     const model::Batch& global, std::span<const Bucket> buckets);

/// A data-parallel replica in the course's bf16 mixed-precision recipe (mgpu::kBf16MixedAdam,
/// {2, 2, 4, 8} bytes per parameter), the recipe 11.3's Precision::bf16_mixed shards. Every
/// buffer is full size, P = model.num_params() elements in the model's layout, and lives in the
/// rank's ledger:
///
/// | buffer    | type | category            | bytes |
/// |-----------|------|---------------------|-------|
/// | weights16 | bf16 | Category::weights   | 2P    |
/// | grads16   | bf16 | Category::grads     | 2P    |
/// | master    | fp32 | Category::master    | 4P    |
/// | adam_m    | fp32 | Category::optimizer | 4P    |
/// | adam_v    | fp32 | Category::optimizer | 4P    |
///
/// 16P bytes in all, the same total as fp32 training with Adam ({4, 4, 0, 8}) split differently:
/// what mixed precision saves is bandwidth (the gradient all-reduce moves 2 bytes per element)
/// and the compute's memory traffic, not training-state memory. The moments live here rather
/// than in a model::Adam, whose step updates fp32 weights only.
struct MixedReplica {
  model::AdamConfig adam;  ///< optimizer hyper-parameters
  std::int64_t steps = 0;  ///< Adam steps taken (the bias correction counts from 1)
  Buffer<bf16> weights16;  ///< the working weights forward and backward read (widened to fp32)
  Buffer<bf16> grads16;    ///< the gradients; after a step, the averaged ones Adam applied
  Buffer<float> master;    ///< the fp32 master weights Adam updates
  Buffer<float> adam_m;    ///< Adam's first moment
  Buffer<float> adam_v;    ///< Adam's second moment
};

/// A freshly initialised mixed-precision replica of `model` in `ledger`, as the MixedReplica
/// table says.
///
/// TODO 11 of 11.2 (make_mixed_replica). The master holds the parameters exactly as
/// model.init_params makes them from `seed` (fp32, not their bf16 rounding), weights16 their
/// bf16 rounding (model::to_bf16); grads16 and the moments start at zero, steps at 0. Every rank
/// computes the same bits, so the replicas start identical without communication. No buffer but
/// the five of the table needs to exist (the master can be initialised in place), so the ledger
/// holds exactly 16P bytes when this returns.
MixedReplica make_mixed_replica(MemoryLedger& ledger, const model::Model& model, std::uint64_t seed,
                                const model::AdamConfig& adam = {});

/// One data-parallel step in bf16 mixed precision on this rank's replica; returns the loss of
/// this rank's slice (local_batch, as data_parallel_step).
///
/// TODO 12 of 11.2 (data_parallel_step_mixed). The model computes in fp32, so:
///  1. widen weights16 (model::to_float, exact) into a Category::comm fp32 buffer of P and run
///     model.forward_backward on it, into a zeroed Category::comm fp32 gradient buffer of P;
///  2. round the gradient to bf16 (model::to_bf16) into grads16 and all-reduce grads16 IN bf16
///     with ReduceOp::avg: 2 bytes per element on the wire, half of data_parallel_step's bytes
///     (the runtime sums bf16 in fp32 in rank order and rounds once, as NCCL does, so every rank
///     gets the same bits);
///  3. widen the averaged grads16 back to fp32 and take one model::adam_step_mixed (steps + 1)
///     on the fp32 master and moments, which writes the rounded bf16 weights into weights16.
/// Every rank rounds the same numbers the same way, so the replicas stay bitwise identical. On
/// return grads16 holds the averaged bf16 gradient Adam applied (the grader reads it there, as
/// data_parallel_step's replica.grads).
///
/// Memory: the two fp32 scratch buffers exist only inside the step, so between steps the ledger
/// holds exactly the 16P bytes of MixedReplica. The step's peak is those 16P, plus 8P under
/// Category::comm (the widened weights and the fp32 gradient, both alive during backward), plus
/// the activations. Freeing the widened weights once backward is done, and reusing the fp32
/// gradient buffer for Adam's widened input, keeps it there.
///
/// Against data_parallel_step from the same initial parameters, the weights differ by their bf16
/// rounding (at most 2^-9 of a weight) plus what the rounded gradients changed in Adam's updates
/// (at most 2 lr per step for a weight whose gradient is near zero, far less typically); the
/// losses differ by about what 2^-9 of every weight changes in the forward.
double data_parallel_step_mixed(Rank& rank, Comm& dp, const model::Model& model,
                                MixedReplica& replica, const model::Batch& global);

}  // namespace mgpu::data_parallel
