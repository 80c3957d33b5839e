// 11.2 Data parallelism: a training step on N replicas of the course model, first with one
// gradient all-reduce after backward, then with gradient buckets whose all-reduces run while
// backward is still computing, then in bf16 mixed precision. Every rank runs the same code on
// its own slice of the batch.
#pragma once

#include "mgpu/bf16.hpp"
#include "mgpu/cluster.hpp"  // not mgpu.hpp: no tensor views here
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
  ring,     ///< your ring_all_reduce (TODOs ring_reduce_scatter and ring_all_gather), which sums
};

/// The slice of `global` that data-parallel rank `rank` of `ranks` trains on.
///
/// TODO(11.2 local_batch). The N slices of the B sequences are contiguous, disjoint, equal and in
/// rank order (rank 0's first), so together they are the whole batch.
/// @throws std::invalid_argument when ranks < 1, rank is outside [0, ranks), or B is not a
///         multiple of N (equal slices make the average of the slice losses the batch loss);
///         the message names B and N and says to pick a batch size divisible by the rank count.
model::Batch local_batch(const model::Batch& global, int rank, int ranks);

/// One data-parallel training step on this rank's replica; returns the loss of this rank's slice.
///
/// TODO(11.2 data_parallel_step). After it returns, on every rank of `dp`:
///  - the weights are bitwise equal to every other rank's, and equal (up to fp32 rounding) to
///    what one rank reaches taking the same Adam step on the gradient of the whole batch's loss;
///  - replica.grads holds that whole-batch gradient, the one adam.step applied. The grader reads
///    it there: Adam's update hardly changes when every gradient is scaled by one factor, so the
///    weights alone would not show a wrong scale;
///  - the rank trained on local_batch(global, dp.rank(), dp.size()) only, and the gradient
///    crossed the ranks through `averager`'s route (the runtime's collective or your ring).
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
/// TODO(11.2 plan_buckets). Contract:
///  - the buckets are in the order backward completes them (highest offsets first) and together
///    cover [0, model.num_params()) exactly once, each one a contiguous range of whole tensors
///    (a tensor is never split);
///  - every bucket but the last (in that order) holds at least `bucket_bytes` bytes (4 per fp32
///    element), and holds no more tensors than that takes: removing its last-added tensor would
///    leave it under `bucket_bytes`. So bucket_bytes = 0 gives one bucket per tensor, and a
///    tensor larger than `bucket_bytes` gets a bucket of its own;
///  - ready_unit is the unit whose backward completes the bucket.
std::vector<Bucket> plan_buckets(const model::Model& model, std::size_t bucket_bytes);

/// data_parallel_step with the gradient all-reduce overlapped with backward.
///
/// TODO(11.2 data_parallel_step_overlapped). Contract:
///  - the weights, replica.grads and the loss are bitwise those of data_parallel_step with
///    GradAverager::runtime, and the bytes sent are the same;
///  - each bucket's reduction is in flight on the comm stream while backward still computes the
///    units below its ready_unit, so the virtual step time falls from compute + communication
///    towards max(compute, communication);
///  - one reduction per bucket, through the runtime's collectives.
/// @throws std::invalid_argument when some bucket's ready_unit is not a unit of `model`.
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
/// what this recipe saves is bandwidth (its gradient all-reduce moves 2 bytes per element) and
/// the compute's memory traffic, not training-state memory. The moments live here rather
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
/// TODO(11.2 make_mixed_replica). Contract: the master holds the parameters exactly as
/// model.init_params makes them from `seed` (fp32, not their bf16 rounding), weights16 their
/// bf16 rounding; grads16 and the moments start at zero, steps at 0. Every rank computes the
/// same bits, so the replicas start identical without communication. The ledger's peak, like
/// its content when this returns, is exactly the table's 16P bytes: no other buffer ever exists.
MixedReplica make_mixed_replica(MemoryLedger& ledger, const model::Model& model, std::uint64_t seed,
                                const model::AdamConfig& adam = {});

/// One data-parallel step in bf16 mixed precision on this rank's replica; returns the loss of
/// this rank's slice (local_batch, as data_parallel_step).
///
/// TODO(11.2 data_parallel_step_mixed). Contract:
///  - the model computes in fp32 only (forward_backward reads and writes float);
///  - the gradient crosses the ranks as bf16, averaged: 2 bytes per element on the wire, half of
///    data_parallel_step's bytes. (The runtime's bf16 all-reduce sums in fp32 in rank order and
///    rounds once, so every rank gets the same bits; NCCL's ring instead rounds a bf16 partial
///    sum at every hop.);
///  - one Adam step (replica.steps advances by 1) updates the fp32 master and moments, and
///    weights16 is the master's bf16 rounding afterwards;
///  - the replicas (weights16 and master) stay bitwise identical on every rank, and on return
///    grads16 holds the averaged bf16 gradient Adam applied (the grader reads it there, as
///    data_parallel_step's replica.grads).
///
/// Memory: any fp32 scratch lives under Category::comm and only inside the step, so between
/// steps the ledger holds exactly the 16P bytes of MixedReplica. The step's Category::comm peak
/// is at most 8P bytes (two fp32 copies of P elements), plus the activations.
///
/// Against data_parallel_step from the same initial parameters, the weights differ by their bf16
/// rounding (at most 2^-8 of a weight: bf16 keeps 8 significant bits) plus what the rounded
/// gradients changed in Adam's updates (at most 2 lr per step for a weight whose gradient is
/// near zero, far less typically); the losses differ by about what 2^-8 of every weight changes
/// in the forward.
double data_parallel_step_mixed(Rank& rank, Comm& dp, const model::Model& model,
                                MixedReplica& replica, const model::Batch& global);

}  // namespace mgpu::data_parallel
