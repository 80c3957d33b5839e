// Lab allreduce_bw: YOUR ring all-reduce. Spec in ring.hpp; run `bin/gpu_allreduce_bw` to check
// it against the expected sums and compare its bus bandwidth with NCCL's own all_reduce.
// A TODO's id is the last word in its parentheses: `./mgpu hint allreduce_bw <id>` gives hints.
#include "allreduce_bw/ring.hpp"

#include "common/kernels.hpp"
#include "common/shard.hpp"

#include <mgpu/not_implemented.hpp>

namespace mgpu::gpu {

void ring_all_reduce(DeviceComm& comm, float* data, std::size_t count, float* scratch) {
  const int n = comm.size();
  const int rank = comm.rank();
  const int right = (rank + 1) % n;
  const int left = (rank + n - 1) % n;
  // TODO(gpu allreduce_bw ring_reduce_scatter): n-1 steps after which every rank holds the
  //   complete sum of exactly one chunk (chunk_range(count, n, c), common/shard.hpp), a
  //   different one on each rank; which chunk moves in which step is yours to work out. Each
  //   step's send and receive go in one comm.group_start()/group_end() (ring.hpp says why), the
  //   receive lands in `scratch`, and add_inplace (common/kernels.hpp) on comm.stream() adds it.
  //   A chunk may be empty when count < n: both neighbours must then skip the same call.
  // TODO(gpu allreduce_bw ring_all_gather): n-1 more steps after which `data` holds the whole
  //   sum on every rank (#wrong = 0), finished chunks received straight into place, no scratch
  //   and no addition.
  (void)data, (void)count, (void)scratch, (void)right, (void)left;
  throw mgpu::NotImplemented("gpu allreduce_bw ring_reduce_scatter");
}

}  // namespace mgpu::gpu
