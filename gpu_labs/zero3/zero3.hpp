// Lab zero3, the exercise: ZeRO stage 3 (as FSDP does it) on a stack of linear layers. Each rank
// keeps 1/N of every layer's bf16 weights, bf16 gradients, fp32 master weights and Adam moments;
// a layer's full weights exist only while it runs: gather, use, discard.
// The contract for gpu_labs/zero3/zero3.cpp (skeleton) and its reference solution.
#pragma once

#include "common/comm.hpp"
#include "common/device_buffer.hpp"
#include "common/gemm.hpp"
#include "common/kernels.hpp"

#include <vector>

namespace mgpu::gpu {

/// The model: `layers` bias-free linear layers of width d, x_{l+1} = x_l W_l, trained on
/// `tokens` rows per rank with loss 0.5 / (N tokens) * sum over all ranks' rows of |x_L -
/// target|^2.
struct Zero3Shape {
  int layers = 0;  ///< L
  int d = 0;       ///< width; each W_l is (d, d)
  int tokens = 0;  ///< rows of x per rank (the rank's micro-batch)
};

/// One layer's share on one rank: elements [rank * shard, (rank + 1) * shard) of the row-major
/// W_l flattened and zero-padded to N * shard (shard = padded_shard(d * d, N), common/shard.hpp).
struct Zero3Layer {
  DeviceBuffer<bf16> param;    ///< (shard) bf16 working weights           (weights)
  DeviceBuffer<bf16> grad;     ///< (shard) bf16 gradient, summed over ranks (grads)
  DeviceBuffer<float> master;  ///< (shard) fp32 master weights            (master)
  DeviceBuffer<float> adam_m;  ///< (shard) Adam first moment              (optimizer)
  DeviceBuffer<float> adam_v;  ///< (shard) Adam second moment             (optimizer)
};

/// Everything one rank holds. The harness allocates and fills it; the exercise only uses it.
struct Zero3Rank {
  Zero3Shape shape;                ///< sizes
  std::size_t shard = 0;           ///< elements of each layer per rank (padded)
  std::vector<Zero3Layer> layers;  ///< L shards
  std::vector<DeviceBuffer<bf16>>
      acts;                   ///< L + 1 of (tokens, d): acts[0] = x, acts[l+1] = acts[l] W_l
  DeviceBuffer<bf16> target;  ///< (tokens, d) the harness's regression target
  DeviceBuffer<bf16> dy;      ///< (tokens, d) gradient arriving at the current layer's output
  DeviceBuffer<bf16> dx;      ///< (tokens, d) gradient leaving it; swap with dy per layer
  /// Two (N * shard) buffers for gathered full layers: layer l uses gathered[l % 2], so the next
  /// layer can be gathered while this one computes. "Discard" = the slot is reused.  (comm)
  DeviceBuffer<bf16> gathered[2];
  DeviceBuffer<bf16> full_grad;  ///< (N * shard) one layer's local gradient, padding zero (comm)
  cudaStream_t side = nullptr;   ///< second stream, for prefetching gathers
  cudaEvent_t gathered_ready[2] = {};  ///< recorded after a gather into gathered[i]
  cudaEvent_t gathered_free[2] = {};   ///< recorded after the last use of gathered[i]
  cudaEvent_t main_ready = nullptr;  ///< for ordering p.side after work already on the main stream
};

/// Forward: for l = 0..L-1, all-gather W_l's bf16 shards into gathered[l % 2], then
/// acts[l+1] = acts[l] W_l (gemm, bf16 in, fp32 accumulate).
/// With `prefetch`, the gather of W_{l+1} runs on `p.side` while layer l computes on
/// comm.stream(), ordered by the gathered_ready / gathered_free events; first, p.side must wait
/// for the main stream (main_ready), since the optimizer wrote the shards the gathers read.
void zero3_forward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch);

/// Backward, after forward and after the harness has put dL/dx_L in p.dy: for l = L-1..0,
/// gather W_l again, full_grad = acts[l]^T dy (this rank's local dW_l), dx = dy W_l^T,
/// reduce-scatter full_grad into layers[l].grad (the sum over ranks of this rank's shard), then
/// swap dy and dx. `prefetch` as in forward, for W_{l-1}.
void zero3_backward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch);

/// Adam (adam_step, common/kernels.hpp) on every layer's shard: master, moments and the bf16
/// param shard updated in place from the grad shard. `step` counts from 1. No communication:
/// each rank updates only what it owns.
void zero3_optimizer_step(DeviceComm& comm, Zero3Rank& p, const AdamConfig& adam, int step);

}  // namespace mgpu::gpu
