// Lab zero3, reference: ZeRO-3 forward, backward and Adam (Rajbhandari et al. 2020), with the
// FSDP pattern of gathering each layer just before use and prefetching the next gather.
#include "zero3/zero3.hpp"

#include <utility>

namespace mgpu::gpu {

namespace {

// Gathers layer l into its slot, on `stream`, after the slot's previous reader is done.
void gather(DeviceComm& comm, Zero3Rank& p, int l, cudaStream_t stream) {
  const int slot = l % 2;
  MGPU_CUDA_CHECK(cudaStreamWaitEvent(stream, p.gathered_free[slot], 0));
  comm.all_gather(p.layers[static_cast<std::size_t>(l)].param.data(), p.gathered[slot].data(),
                  p.shard, DType::bf16, stream);
  MGPU_CUDA_CHECK(cudaEventRecord(p.gathered_ready[slot], stream));
}

// Makes the main stream wait for layer l's gather (a no-op cost when it ran on the main stream).
void wait_gathered(Zero3Rank& p, int l, cudaStream_t main) {
  MGPU_CUDA_CHECK(cudaStreamWaitEvent(main, p.gathered_ready[l % 2], 0));
}

void release(Zero3Rank& p, int l, cudaStream_t main) {
  MGPU_CUDA_CHECK(cudaEventRecord(p.gathered_free[l % 2], main));
}

// The side stream must not read a shard before the main stream's optimizer has written it.
void side_after_main(Zero3Rank& p, cudaStream_t main, cudaStream_t fetch) {
  if (fetch == main) return;
  MGPU_CUDA_CHECK(cudaEventRecord(p.main_ready, main));
  MGPU_CUDA_CHECK(cudaStreamWaitEvent(fetch, p.main_ready, 0));
}

}  // namespace

void zero3_forward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  const cudaStream_t main = comm.stream();
  const cudaStream_t fetch = prefetch ? p.side : main;
  side_after_main(p, main, fetch);
  gather(comm, p, 0, fetch);
  for (int l = 0; l < L; ++l) {
    // Issue the next gather before this layer's GEMM, so the two overlap when prefetching.
    if (l + 1 < L) gather(comm, p, l + 1, fetch);
    wait_gathered(p, l, main);
    const auto li = static_cast<std::size_t>(l);
    gemm(cublas, Trans::no, Trans::no, b, d, d, p.acts[li].data(), p.gathered[l % 2].data(),
         p.acts[li + 1].data(), DType::bf16);  // (b, d)
    release(p, l, main);
  }
}

void zero3_backward(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  const cudaStream_t main = comm.stream();
  const cudaStream_t fetch = prefetch ? p.side : main;
  side_after_main(p, main, fetch);
  gather(comm, p, L - 1, fetch);
  for (int l = L - 1; l >= 0; --l) {
    if (l - 1 >= 0) gather(comm, p, l - 1, fetch);
    wait_gathered(p, l, main);
    const auto li = static_cast<std::size_t>(l);
    const bf16* w = p.gathered[l % 2].data();
    gemm(cublas, Trans::yes, Trans::no, d, d, b, p.acts[li].data(), p.dy.data(), p.full_grad.data(),
         DType::bf16);  // (d, d)
    gemm(cublas, Trans::no, Trans::yes, b, d, d, p.dy.data(), w, p.dx.data(),
         DType::bf16);  // (b, d)
    release(p, l, main);
    // Each rank keeps only the summed gradient of its own shard: the full gradient never lives
    // anywhere for longer than this layer.
    comm.reduce_scatter(p.full_grad.data(), p.layers[li].grad.data(), p.shard, DType::bf16, main);
    std::swap(p.dy, p.dx);
  }
}

void zero3_optimizer_step(DeviceComm& comm, Zero3Rank& p, const AdamConfig& adam, int step) {
  // Adam is element-wise, so the owner of a shard needs nothing from anyone to update it.
  for (Zero3Layer& layer : p.layers) {
    adam_step(layer.master.data(), layer.adam_m.data(), layer.adam_v.data(), layer.grad.data(),
              layer.param.data(), p.shard, adam, step, comm.stream());
  }
}

}  // namespace mgpu::gpu
