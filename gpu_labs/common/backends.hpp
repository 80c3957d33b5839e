// Internal to common/: the two DeviceComm implementations, made by DeviceCluster::run.
#pragma once

#include "common/comm.hpp"
#include "common/rendezvous.hpp"

#include <atomic>
#include <memory>

namespace mgpu::gpu::detail {

/// State the emulated ranks of one process share (posted buffers, mailboxes, barrier).
class EmulatedHub;

/// Makes the hub for `ranks` emulated ranks.
std::shared_ptr<EmulatedHub> make_emulated_hub(int ranks);
/// Wakes every emulated rank waiting in `hub` with RankAborted.
void abort_emulated_hub(EmulatedHub& hub);
/// Rank `rank` of an emulated communicator on device 0 (call on the rank's thread).
std::unique_ptr<DeviceComm> make_emulated_comm(std::shared_ptr<EmulatedHub> hub, int rank);

/// Rank `rank` of `ranks` over NCCL on `device` (call on the rank's thread; blocks until all ranks
/// have joined, at most `init_timeout_s` seconds, then aborts). `aborted` is shared by this
/// process's ranks: set, it makes waits throw and the communicator abort.
std::unique_ptr<DeviceComm> make_nccl_comm(const ncclUniqueId& id, int ranks, int rank, int device,
                                           std::shared_ptr<std::atomic<bool>> aborted,
                                           int init_timeout_s);

}  // namespace mgpu::gpu::detail
