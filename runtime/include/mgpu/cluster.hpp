// The simulated cluster: one thread (or process) per rank, each with its own memory ledger, traffic
// meter and virtual clock, plus the errors a run can end with and the per-rank report after it.
#pragma once

#include "mgpu/clock.hpp"
#include "mgpu/comm.hpp"
#include "mgpu/memory.hpp"
#include "mgpu/traffic.hpp"

#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mgpu {

/// Where each rank's code runs. `threads`: one thread per rank in the calling process (fast;
/// ranks share an address space). `processes`: each rank's code runs in a process of its own,
/// forked for the run, which can address only its own memory; the calling process keeps the
/// ledgers, meters, clocks and deadlock detection and moves every message itself (see the
/// runtime README, "Ranks in processes"). Results and errors are the same in both.
enum class RankIsolation { threads, processes };

/// The isolation a Cluster uses when its config names none (threads unless changed).
RankIsolation default_rank_isolation();
/// Sets the default isolation for Clusters made afterwards (a case program's --ranks option).
void set_default_rank_isolation(RankIsolation isolation);

/// Size of the cluster and the cost model's numbers. The defaults describe an H100-class node:
/// 8 GPUs on NVLink, nodes joined by 400 Gb/s InfiniBand, 400 TFLOP/s sustained compute.
struct ClusterConfig {
  int world_size = 1;     ///< number of ranks (GPUs), >= 1
  int gpus_per_node = 8;  ///< ranks r and s share a node iff r/gpus_per_node == s/gpus_per_node
  double flops_per_second = 4e14;  ///< compute rate charged by Rank::compute
  // A message of n bytes on a link takes alpha + n / beta seconds (11.2's LinkModel).
  double intra_node_bytes_per_second = 450e9;  ///< beta inside a node: one NVLink-class link
  double inter_node_bytes_per_second = 50e9;   ///< beta between nodes: one 400 Gb/s NIC per GPU
  double intra_node_latency_seconds = 3e-6;    ///< alpha inside a node: seconds per message
  double inter_node_latency_seconds = 10e-6;   ///< alpha between nodes: seconds per message
  /// How a collective of a group spanning nodes is priced. false: as one ring, every member's
  /// bytes through its own NIC (beta = inter_node). true: as NCCL runs it when k members share
  /// each node, k rings side by side, each on 1/k of the buffer and leaving the node through a
  /// different member's NIC, so beta = min(k inter_node, intra_node k/(k-1)). Sends are priced
  /// per link either way.
  bool ring_per_nic = false;
  std::optional<std::size_t> memory_capacity_bytes;  ///< per rank; nullopt = unlimited
  /// Threads or processes; nullopt = default_rank_isolation() when the Cluster is made.
  std::optional<RankIsolation> isolation;
  /// With processes: bytes of shared memory per rank through which its messages move. Every
  /// operation in flight at once on a rank needs its buffers' bytes here (sparse: untouched
  /// pages cost nothing, but the calling process maps world_size of them: a run lowers it so
  /// that they take at most half of the process's address-space limit, when it has one).
  std::size_t rank_arena_bytes = std::size_t(64) << 20;
};

/// The run stopped because every live rank was blocked with nothing that could wake it.
/// The message lists every rank and what it waits for (op, peer, tag, group), or that it finished.
class DeadlockError : public std::runtime_error {
 public:
  /// @param message the full report.
  explicit DeadlockError(const std::string& message) : std::runtime_error(message) {}
};

/// Members of a group called mismatched collectives (different op, count, dtype, root or
/// reduce op at the same position in their sequence of collectives on that group).
class CollectiveMismatch : public std::runtime_error {
 public:
  /// @param message names the group, the ranks and the difference.
  explicit CollectiveMismatch(const std::string& message) : std::runtime_error(message) {}
};

/// Thrown inside a rank that was stopped because another rank failed. Cluster::run rethrows the
/// original error, never this one, unless nothing else went wrong.
class RankStopped : public std::runtime_error {
 public:
  /// @param message says which rank was stopped and why.
  explicit RankStopped(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
struct ClusterState;
}

/// One rank as seen from its own thread: identity, communicators, ledger, meter and clock.
class Rank {
 public:
  /// Global rank, 0..world_size()-1.
  int id() const;
  /// Number of ranks in the cluster.
  int world_size() const;
  /// Node index, id() / gpus_per_node.
  int node() const;
  /// The communicator of all ranks, named "world".
  Comm& world();
  /// This rank's memory ledger (allocate through Buffer<T>).
  MemoryLedger& memory();
  /// This rank's traffic meter.
  TrafficMeter& traffic();
  /// This rank's virtual clock.
  VirtualClock& clock();
  /// The cluster's configuration.
  const ClusterConfig& config() const;
  /// Charges `flops` floating-point operations to the compute stream at config().flops_per_second.
  void compute(double flops, std::string_view label);
  /// Charges `seconds` of work to the compute stream directly.
  void compute_seconds(double seconds, std::string_view label);
  /// The rank's virtual time in seconds (clock().now()).
  double now() const;
  /// Records, on the side that keeps the cluster's books, this rank's virtual time, meter and
  /// ledger as they are now, under `name` (a later checkpoint of the name replaces it); read it
  /// after run as RankReport::checkpoints. How a phase of a run is measured when ranks are
  /// processes, where the rank cannot read or reset its meter and clock itself.
  void checkpoint(const std::string& name);
  /// Hands a copy of `data` to the program that runs the cluster, under `name` (one per rank
  /// and name; a second publish of a name replaces it). Read it after run with
  /// Cluster::published. This is how a rank's results leave it when ranks are processes.
  template <ElementRange R>
  void publish(const std::string& name, const R& data) {
    using T = std::remove_cv_t<std::ranges::range_value_t<R>>;
    publish_raw(name, std::ranges::data(data), std::ranges::size(data), dtype_of<T>);
  }

 private:
  friend struct detail::ClusterState;
  explicit Rank(detail::ClusterState* cluster, int id);
  void publish_raw(const std::string& name, const void* data, std::size_t count, DType dtype);
  detail::ClusterState* cluster_;
  int id_;
};

/// A rank's books at one moment of a run (Rank::checkpoint).
struct Checkpoint {
  double now = 0;        ///< virtual time
  double compute = 0;    ///< seconds of compute charged so far (VirtualClock::compute_time)
  TrafficMeter traffic;  ///< everything sent and received so far
  MemoryLedger memory;   ///< current bytes and the peaks since the last reset_peaks
};

/// What one rank left behind after Cluster::run: copies of its ledger, meter and clock.
struct RankReport {
  int rank = 0;          ///< global rank
  MemoryLedger memory;   ///< peaks per category and total (current is what was not freed)
  TrafficMeter traffic;  ///< bytes and messages per op kind and group
  VirtualClock clock;    ///< timeline, compute/idle/comm totals, end time
  std::map<std::string, Checkpoint> checkpoints;  ///< by name (Rank::checkpoint)
  /// Idle time / end time of the program (0 when the rank did nothing): the bubble fraction.
  double idle_fraction() const;
};

/// How Cluster::run_programs starts its ranks: each one a program of its own, started fresh (exec)
/// in a process of its own, that calls serve_rank. Nothing of the calling process reaches it but
/// its socket, its arena and `inputs[rank]`: not the other ranks' inputs, not what code of the
/// calling process left in memory.
struct RankPrograms {
  std::string program;                 ///< the program every rank runs (a path)
  std::vector<std::string> arguments;  ///< its arguments (after its own name)
  std::vector<std::string> inputs;     ///< inputs[r]: the bytes rank r is given, one per rank
  /// Runs in rank r's process just before the program starts (its own folder, its limits).
  /// Throwing stops that rank with the message.
  std::function<void(int rank)> before_start;
};

/// A simulated multi-GPU cluster. Create one, run a function on every rank, then read reports.
///
/// ```
/// mgpu::Cluster cluster(4);
/// cluster.run([](mgpu::Rank& r) { /* same code on every rank, like an SPMD program */ });
/// double peak = cluster.report(0).memory.peak_total();
/// ```
class Cluster {
 public:
  /// A cluster of `world_size` ranks with the default cost model.
  explicit Cluster(int world_size);
  /// A cluster described by `config`. Throws std::invalid_argument for world_size < 1,
  /// gpus_per_node < 1, or a non-positive rate or bandwidth.
  explicit Cluster(ClusterConfig config);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  /// Runs `body` on every rank, one thread each, and returns when all are done. If any rank
  /// throws, the others are stopped (blocked ranks wake and unwind with RankStopped) and the
  /// first error is rethrown here with its type preserved (e.g. mgpu::NotImplemented,
  /// DeadlockError, CollectiveMismatch, OutOfMemory). Each run starts from fresh ranks.
  void run(const std::function<void(Rank&)>& body);
  /// Runs every rank as a program of its own (RankPrograms), whatever the isolation: the books
  /// (ledgers, meters, clocks, deadlock detection, what ranks publish) stay in this process, which
  /// serves each rank's calls; errors and reports as run's.
  void run_programs(const RankPrograms& programs);

  /// The configuration.
  const ClusterConfig& config() const;
  /// Number of ranks.
  int world_size() const;
  /// Report of `rank` from the last run. Throws std::out_of_range for a bad rank, and
  /// std::logic_error before the first run.
  const RankReport& report(int rank) const;
  /// Reports of all ranks from the last run, by rank.
  const std::vector<RankReport>& reports() const;
  /// What `rank` published under `name` in the last run, as T (which must be the published
  /// element type). Throws std::out_of_range when nothing was published under that name, and
  /// std::invalid_argument for another element type.
  template <Element T>
  std::vector<T> published(int rank, const std::string& name) const {
    std::vector<T> out;
    const auto bytes = published_raw(rank, name, dtype_of<T>);
    out.resize(bytes.size() / sizeof(T));
    if (!bytes.empty()) std::memcpy(static_cast<void*>(out.data()), bytes.data(), bytes.size());
    return out;
  }
  /// Latest end time over all ranks in the last run (seconds of virtual time).
  double makespan() const;
  /// The last run's timelines as Chrome trace JSON (pid = rank, tid = stream, ts in us).
  std::string chrome_trace() const;
  /// Writes chrome_trace() to `path` (open it in https://ui.perfetto.dev or chrome://tracing).
  /// Throws std::runtime_error if the file cannot be written.
  void write_chrome_trace(const std::string& path) const;

 private:
  std::vector<unsigned char> published_raw(int rank, const std::string& name, DType dtype) const;
  std::unique_ptr<detail::ClusterState> state_;
};

/// The body of a rank program: this process's rank and the input the cluster's process gave it.
using RankProgramBody = std::function<void(Rank&, std::string_view input)>;

/// In a program started by Cluster::run_programs: runs `body` as the rank this process is, with
/// every call on the cluster served by the process that started it, then reports how the body
/// ended (its exception crosses with its type, as in a run). Returns the exit status for main:
/// 0 once the report is out, 2 when this process was not started by run_programs.
int serve_rank(const RankProgramBody& body);

}  // namespace mgpu
