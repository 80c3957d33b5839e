// Ranks in processes (RankIsolation::processes): each rank's code runs in a forked process that
// holds only its own memory, and every call that touches the cluster becomes a request over a
// socket to that rank's proxy thread in the trusted process, which makes the real call on the
// cluster there. See the runtime README, "Ranks in processes".
//
// Inside a rank's process the runtime's entry points (Comm's raw calls, Request, the ledger,
// Rank::compute, Rank::publish) find RankState::remote set and call the remote_* functions
// below instead of touching the cluster.
#pragma once

#include "state.hpp"

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace mgpu::detail {

/// Runs `body` with one process per rank and one proxy thread per rank in this process; the
/// cluster's bookkeeping (ledgers, meters, clocks, deadlock detection) stays here. Called by
/// ClusterState::run after reset(); builds the reports and rethrows the run's error like the
/// threaded run.
void run_isolated(ClusterState& cluster, const std::function<void(Rank&)>& body);
/// Cluster::run_programs, after reset(): each rank a program of its own (RankPrograms) that calls
/// serve_rank, served by a proxy thread here as in run_isolated.
void run_isolated_programs(ClusterState& cluster, const RankPrograms& programs);

// ---- the rank process's side (RankState::remote is set)

Request remote_isend(RemoteLink& link, const Comm& comm, const void* data, std::size_t count,
                     DType dtype, int peer, int tag);
Request remote_irecv(RemoteLink& link, const Comm& comm, void* data, std::size_t count, DType dtype,
                     int peer, int tag);
Request remote_collective(RemoteLink& link, const Comm& comm, OpKind kind, const void* in,
                          void* out, std::size_t in_count, std::size_t out_count, DType dtype,
                          ReduceOp op, int root);
Request remote_collective_v(RemoteLink& link, const Comm& comm, const void* in,
                            std::size_t in_count, std::span<const std::size_t> send_counts,
                            void* out, std::size_t out_count,
                            std::span<const std::size_t> recv_counts, DType dtype);
Comm remote_split(RemoteLink& link, const Comm& comm, int color, int key, const std::string& name);
/// Request::wait of an operation posted in a rank process.
void remote_wait(Operation& op);
/// Request::test; true when finished (the data is then in place).
bool remote_test(Operation& op);
/// Request's destructor: waits, or gives up on the operation while the rank unwinds.
void remote_drop(Operation& op, bool unwinding) noexcept;
void remote_allocate(RemoteLink& link, Category category, std::size_t bytes,
                     std::string_view label);
void remote_release(RemoteLink& link, Category category, std::size_t bytes);
void remote_reset_peaks(RemoteLink& link);
void remote_compute(RemoteLink& link, double seconds, std::string_view label);
double remote_now(RemoteLink& link);
void remote_checkpoint(RemoteLink& link, const std::string& name);
void remote_publish(RemoteLink& link, const std::string& name, const void* data, std::size_t count,
                    DType dtype);

}  // namespace mgpu::detail
