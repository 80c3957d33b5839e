// Lab allreduce_bw, reference: ring all-reduce = reduce-scatter + all-gather over send/recv.
// Spec in gpu_labs/allreduce_bw/ring.hpp.
#include "allreduce_bw/ring.hpp"

#include "common/kernels.hpp"
#include "common/shard.hpp"

namespace mgpu::gpu {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void ring_all_reduce(DeviceComm& comm, float* data, std::size_t count, float* scratch) {
  const int n = comm.size();
  const int rank = comm.rank();
  if (n == 1) return;  // one rank: the sum is the input
  const int right = (rank + 1) % n;
  const int left = (rank + n - 1) % n;

  // Reduce-scatter. At step s this rank forwards the partial sum of chunk (rank - s), which it
  // finished adding at step s - 1, and receives the left neighbour's partial of the next chunk.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk_range(count, n, mod(rank - s, n));
    const Chunk in = chunk_range(count, n, mod(rank - s - 1, n));
    // With count < n some chunks are empty; the neighbour computes the same chunk index for the
    // matching call, so both sides skip it together.
    comm.group_start();
    if (out.count > 0) comm.send(data + out.offset, out.count, DType::f32, right);
    if (in.count > 0) comm.recv(scratch, in.count, DType::f32, left);
    comm.group_end();
    if (in.count > 0) add_inplace(data + in.offset, scratch, in.count, DType::f32, comm.stream());
  }
  // Now chunk (rank + 1) is complete here. All-gather passes complete chunks around the ring;
  // they land in place, so no addition and no scratch.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk_range(count, n, mod(rank + 1 - s, n));
    const Chunk in = chunk_range(count, n, mod(rank - s, n));
    comm.group_start();
    if (out.count > 0) comm.send(data + out.offset, out.count, DType::f32, right);
    if (in.count > 0) comm.recv(data + in.offset, in.count, DType::f32, left);
    comm.group_end();
  }
}

}  // namespace mgpu::gpu
