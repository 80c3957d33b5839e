// Lab zero3, harness: the model's data, the ZeRO-3 rank setup, the full training step around the
// exercise, the plain data-parallel step (timing baseline and, on one GPU with N micro-batches,
// the reference), and the check that compares weights after several steps.
#pragma once

#include "zero3/zero3.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace mgpu::gpu {

/// Initial weights and the global batch, on the host, identical for every rank and the reference.
struct HostModel {
  Zero3Shape shape;                   ///< tokens = rows per rank
  int ranks = 1;                      ///< N: the global batch is N * tokens rows
  std::vector<float> weights;         ///< (L, d, d) row-major, every value exact in bf16
  std::vector<std::uint16_t> x;       ///< (N tokens, d) bf16 bits
  std::vector<std::uint16_t> target;  ///< (N tokens, d) bf16 bits
};

/// Seeded random model: W_l ~ N(0, 1/d) (keeps activations of order one through the stack),
/// x and target ~ N(0, 1); everything rounded to bf16.
HostModel make_host_model(const Zero3Shape& shape, int ranks, std::uint32_t seed);

/// Parameters of the model: L d^2.
double zero3_params(const Zero3Shape& shape);

/// GEMM FLOPs of one training step on one rank: 3 GEMMs of 2 tokens d^2 per layer.
double zero3_step_flops(const Zero3Shape& shape);

/// A Zero3Rank with its side stream and events, released on destruction.
class Zero3Setup {
 public:
  /// Allocates this rank's shards and buffers in `ledger`; fills them from `model` (its shard of
  /// each layer, its rows of the batch), or with random values when `model` is null.
  Zero3Setup(DeviceComm& comm, MemoryLedger& ledger, const Zero3Shape& shape,
             const HostModel* model);
  Zero3Setup(const Zero3Setup&) = delete;
  Zero3Setup& operator=(const Zero3Setup&) = delete;
  ~Zero3Setup();
  Zero3Rank p;  ///< what the exercise works on
};

/// One ZeRO-3 step: zero3_forward, the loss gradient (scale 1 / (N tokens)), zero3_backward,
/// zero3_optimizer_step. `step` counts from 1.
void zero3_train_step(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch,
                      const AdamConfig& adam, int step);

/// All layers' fp32 master weights, (L, d, d), gathered from the shards (every rank calls; all
/// get the result).
std::vector<float> gather_master(DeviceComm& comm, Zero3Rank& p);

/// Plain data parallelism, the baseline: full replicas of everything on every rank.
struct DpRank {
  Zero3Shape shape;              ///< tokens = rows per micro-batch
  int micro = 1;                 ///< micro-batches per step (gradient accumulation)
  DeviceBuffer<bf16> params;     ///< (L d d) bf16 weights        (weights)
  DeviceBuffer<bf16> grads;      ///< (L d d) bf16 gradients      (grads)
  DeviceBuffer<float> grad_acc;  ///< (L d d) fp32 sum over micro-batches, when micro > 1 (grads)
  DeviceBuffer<float> master;    ///< (L d d) fp32 master         (master)
  DeviceBuffer<float> adam_m;    ///< (L d d) Adam first moment   (optimizer)
  DeviceBuffer<float> adam_v;    ///< (L d d) Adam second moment  (optimizer)
  DeviceBuffer<bf16> x;          ///< (micro tokens, d) this rank's input rows
  DeviceBuffer<bf16> target;     ///< (micro tokens, d) their targets
  std::vector<DeviceBuffer<bf16>> acts;  ///< L of (tokens, d): outputs of each layer
  DeviceBuffer<bf16> dy;                 ///< (tokens, d) gradient arriving at a layer's output
  DeviceBuffer<bf16> dx;                 ///< (tokens, d) gradient leaving it
};

/// Allocates a DpRank in `ledger`. From `model`: rows [first_row, first_row + micro tokens) of
/// the batch and all weights; with `model` null, random values.
DpRank make_dp_rank(DeviceComm& comm, MemoryLedger& ledger, const Zero3Shape& shape, int micro,
                    const HostModel* model, int first_row);

/// One data-parallel step: forward and backward per micro-batch (bf16 gradients summed in fp32
/// over micro-batches, in order), all-reduce of the bf16 gradients, Adam on the full master.
/// The loss gradient is scaled by 1 / `global_rows`. If `loss` is given, adds the step's loss
/// (0.5 / global_rows * sum of squares) to it, synchronising to read the outputs.
void dp_train_step(DeviceComm& comm, cublasHandle_t cublas, DpRank& p, const AdamConfig& adam,
                   int step, int global_rows, double* loss);

}  // namespace mgpu::gpu
