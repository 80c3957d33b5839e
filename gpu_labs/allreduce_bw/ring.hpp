// Lab allreduce_bw, the exercise: a ring all-reduce built from point-to-point sends and receives.
// The contract for gpu_labs/allreduce_bw/ring.cpp (skeleton) and its reference solution.
#pragma once

#include "common/comm.hpp"

#include <cstddef>

namespace mgpu::gpu {

/// In-place sum all-reduce of `count` floats over every rank of `comm`, as a ring:
/// a reduce-scatter of n-1 steps (send one chunk right, receive one from the left, add it),
/// then an all-gather of n-1 steps (pass the finished chunks around). Chunks are
/// chunk_range(count, n, c) (common/shard.hpp), so any count works, even count < n.
///
/// Each step's send and recv must be posted together in comm.group_start()/group_end() (on the
/// NCCL backend: ncclGroupStart, ncclSend, ncclRecv, ncclGroupEnd), else every rank would wait in
/// its send for a peer that is itself waiting in a send. The additions use add_inplace
/// (common/kernels.hpp) on comm.stream(); everything is stream-ordered, nothing synchronises.
///
/// @param data    (count) this rank's input; holds the sum over ranks on return (once the
///                stream has run).
/// @param scratch at least chunk_range(count, n, 0).count floats, the largest chunk.
/// Each rank sends 2(n-1)/n of the buffer in all, the bandwidth-optimal amount.
void ring_all_reduce(DeviceComm& comm, float* data, std::size_t count, float* scratch);

}  // namespace mgpu::gpu
