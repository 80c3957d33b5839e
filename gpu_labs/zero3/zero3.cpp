// Lab zero3: YOUR ZeRO-3 training step. Spec in zero3.hpp; run `bin/gpu_zero3` to check it
// against the one-GPU reference over several steps, see bytes per GPU by category, and time it.
#include "zero3/zero3.hpp"

#include <mgpu/not_implemented.hpp>

namespace mgpu::gpu {

void zero3_forward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  // TODO(gpu zero3 forward), without prefetch first:
  //   for each layer l:
  //     comm.all_gather(p.layers[l].param.data(), p.gathered[l % 2].data(), p.shard, DType::bf16);
  //     gemm(cublas, Trans::no, Trans::no, b, d, d, acts[l], gathered (as a (d, d) matrix), acts[l+1], DType::bf16);
  // Then prefetch: issue the gather of layer l+1 on p.side (pass p.side as the stream) before
  // layer l's GEMM. Orders to enforce with cudaEventRecord / cudaStreamWaitEvent:
  //   the GEMM of layer l waits for gathered_ready[l % 2] (its gather on the side stream);
  //   a gather into slot i waits for gathered_free[i] (the GEMM two layers back that read it).
  // And before the first gather on p.side: record p.main_ready on the main stream and make
  // p.side wait for it, since the last optimizer step (main stream) wrote the shards.
  // Event waits on a never-recorded event return at once, so the first uses need no special case.
  (void)comm, (void)cublas, (void)prefetch, (void)L, (void)d, (void)b;
  throw mgpu::NotImplemented("gpu zero3 forward");
}

void zero3_backward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  // TODO(gpu zero3 backward), for l = L-1 down to 0:
  //   gather W_l again (it was discarded after forward);
  //   full_grad (d, d) = acts[l]^T dy      -> gemm with Trans::yes on A, M = d, N = d, K = b;
  //   dx (b, d) = dy W_l^T                 -> gemm with Trans::yes on B;
  //   comm.reduce_scatter(full_grad, layers[l].grad, p.shard, DType::bf16): each rank keeps only
  //   the summed gradient of the shard it owns;
  //   std::swap(p.dy, p.dx) so the next layer down reads its incoming gradient from p.dy.
  // Prefetch as in forward, for layer l-1.
  (void)comm, (void)cublas, (void)prefetch, (void)L, (void)d, (void)b;
  throw mgpu::NotImplemented("gpu zero3 backward");
}

void zero3_optimizer_step(DeviceComm& comm, Zero3Rank& p, const AdamConfig& adam, int step) {
  // TODO(gpu zero3 optimizer): one adam_step per layer on this rank's shard (p.shard elements),
  // on comm.stream(). Why does ZeRO-3 need no communication here?
  (void)comm, (void)p, (void)adam, (void)step;
  throw mgpu::NotImplemented("gpu zero3 optimizer_step");
}

}  // namespace mgpu::gpu
