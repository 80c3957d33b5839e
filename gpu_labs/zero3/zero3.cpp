// Lab zero3: YOUR ZeRO-3 training step. Spec in zero3.hpp; run `bin/gpu_zero3` to check it
// against the one-GPU reference over several steps, see bytes per GPU by category, and time it.
// A TODO's id is the last word in its parentheses: `./mgpu hint zero3 <id>` gives hints for it.
#include "zero3/zero3.hpp"

#include <mgpu/not_implemented.hpp>

namespace mgpu::gpu {

void zero3_forward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  // TODO(gpu zero3 forward): without prefetch first. acts[l+1] = acts[l] W_l for every layer,
  //   where W_l's full (d, d) weights exist only in a gather slot (p.gathered, Zero3Rank's
  //   comment) assembled from every rank's bf16 shard just before its GEMM. Calls: DeviceComm
  //   collectives (they take an optional stream), gemm() (common/gemm.hpp).
  // TODO(gpu zero3 prefetch): with `prefetch`, each next layer's gather runs on p.side while the
  //   current layer's GEMM runs on comm.stream(), in the forward and (for l-1) in the backward.
  //   Three orders must hold, each enforced with the events of Zero3Rank (cudaEventRecord,
  //   cudaStreamWaitEvent): a GEMM never reads a slot before its gather has finished, a gather
  //   never overwrites a slot a GEMM still reads, and no gather reads a shard before the main
  //   stream's earlier work (the optimizer) has written it. A wait on an event never recorded
  //   returns at once.
  (void)comm, (void)cublas, (void)prefetch, (void)L, (void)d, (void)b;
  throw mgpu::NotImplemented("gpu zero3 forward");
}

void zero3_backward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  // TODO(gpu zero3 backward): from the last layer down, each layer's weights gathered again
  //   (forward discarded them), and on return layers[l].grad holds, on each rank, the gradient
  //   of its own shard summed over all ranks; no rank ever keeps a full layer gradient beyond
  //   that layer (p.full_grad is the one buffer for it). The harness put dL/dx_L in p.dy, and
  //   p.dx is where the next gradient down goes (swap them per layer). Calls: gemm() with its
  //   transpose flags, DeviceComm collectives.
  (void)comm, (void)cublas, (void)prefetch, (void)L, (void)d, (void)b;
  throw mgpu::NotImplemented("gpu zero3 backward");
}

void zero3_optimizer_step(DeviceComm& comm, Zero3Rank& p, const AdamConfig& adam, int step) {
  // TODO(gpu zero3 optimizer): every layer's shard updated by Adam (adam_step in
  // common/kernels.hpp) on comm.stream(): master, moments and the bf16 param shard. Before
  // writing any communication, ask whether this step needs any.
  (void)comm, (void)p, (void)adam, (void)step;
  throw mgpu::NotImplemented("gpu zero3 optimizer");
}

}  // namespace mgpu::gpu
