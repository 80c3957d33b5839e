// Internal state of the simulated cluster, shared by the runtime's .cpp files only.
// One global mutex guards all bookkeeping (mailboxes, rendezvous, waiting ranks); bulk data
// copies and reductions run outside it. Each rank sleeps on its own condition variable, and an
// event wakes only the ranks it concerns, so the cost of an event does not grow with the cluster.
#pragma once

#include "mgpu/cluster.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mgpu::detail {

struct ClusterState;
struct RankState;
struct CollectiveOp;
struct TimingCollective;  // comm_timing.cpp
struct RemoteLink;        // isolation.hpp: a rank process's end of the link to its proxy

using Lock = std::unique_lock<std::mutex>;

/// A non-blocking operation owned by one rank; Request holds it.
struct Operation {
  RankState* owner = nullptr;
  bool finished = false;  // finish() ran (owner thread only)
  virtual ~Operation() = default;
  /// Under the lock: the owner can finish without waiting for anyone.
  virtual bool ready_locked() const = 0;
  /// Under the lock: something can still happen without another rank acting (deadlock check).
  virtual bool progress_locked() const { return ready_locked(); }
  /// Under the lock: the owner could do useful work on it now (collective slices).
  virtual bool helpable_locked() const { return false; }
  /// Does that work; called and returns with the lock held.
  virtual void help(Lock&) {}
  /// What the owner is waiting for, for the deadlock report.
  virtual std::string describe_locked() const = 0;
  /// Owner thread, lock not held, after ready: moves data in place and advances the clock.
  virtual void finish() = 0;
  /// The owner gives up on the operation (abort or unwinding); returns with no other thread
  /// touching the owner's buffers. Called and returns with the lock held.
  virtual void cancel(Lock&) {}
  /// Whether giving up on it must stop the run (other ranks may still write its buffers).
  virtual bool abandon_stops_run() const { return false; }
};

/// A point-to-point message: a copy of the sender's data and its virtual arrival time.
struct Message {
  int src = 0;  // group rank
  int tag = 0;
  DType dtype = DType::f32;
  std::size_t count = 0;
  std::size_t nbytes = 0;
  std::unique_ptr<unsigned char[]> bytes;  // not zero-filled: the send overwrites it at once
  double ready = 0.0;                      // virtual time the last byte arrives
  double timing_bytes = 0.0;  // a timing-only message (Comm::isend_timing): bytes it stands for
};

struct RecvOp;

/// How many ranks an error message lists before it abbreviates: a deadlock report has a line
/// per rank, and full lists would make it grow with the square of the cluster.
inline constexpr std::size_t kListedRanks = 16;

/// An ordered set of ranks with its mailboxes and collective rendezvous.
///
/// Ownership runs one way, from operations to groups: a RecvOp or CollectiveOp holds its group
/// (a Request may outlive every Comm of the group and still needs its name and members), so the
/// group only indexes its posted receives and pending collectives through weak pointers. Owning
/// them too would make a cycle that a failed run (deadlock, mismatch, a rank that throws) leaves
/// behind, since its operations are never matched or completed.
struct Group {
  std::string name;
  std::vector<int> members;             // global ranks, by group rank
  double alpha = 0.0;                   // latency of the slowest link between members
  double beta = 1.0;                    // bandwidth of the slowest link between members
  std::vector<std::uint64_t> next_seq;  // per group rank
  // lock: collectives some members have joined, by sequence number. Their members' handles
  // own them; an entry expires only when every member that joined gave up (the run is failing).
  std::map<std::uint64_t, std::weak_ptr<CollectiveOp>> pending;
  std::vector<std::deque<std::shared_ptr<Message>>> unmatched;  // lock: by destination group rank
  // lock: unmatched receives by destination group rank, in posting order. Their Requests own
  // them; a receive given up on withdraws itself (RecvOp::cancel) so it cannot take a message.
  std::vector<std::deque<std::weak_ptr<RecvOp>>> posted;
  // lock: timing-only collectives (comm_timing.cpp), numbered apart from the data ones; the
  // counters are sized on first use
  std::vector<std::uint64_t> timing_next_seq;
  std::map<std::uint64_t, std::weak_ptr<TimingCollective>> timing_pending;
  /// Name and members, e.g. "tp{0,1,2,3}". A larger group than kListedRanks shows its first
  /// kListedRanks - 1 members, "...", the last one and the count: "world{0,...,14,...,1023 (1024
  /// ranks)}".
  std::string describe() const;
  int size() const { return static_cast<int>(members.size()); }
};

/// What a rank published (Rank::publish), copied out of the rank by the trusted side.
struct Published {
  DType dtype = DType::f32;
  std::vector<unsigned char> bytes;
};

/// Per-rank state, touched by its own thread except the fields marked "lock".
struct RankState {
  ClusterState* cluster = nullptr;
  int id = 0;
  MemoryLedger memory;
  TrafficMeter traffic;
  VirtualClock clock;
  Comm world;
  // lock: blocking and deadlock bookkeeping
  bool live = true;
  bool asleep = false;                  // in block() and not woken yet
  std::condition_variable wake;         // only this rank's thread waits on it
  std::function<bool()> wait_progress;  // set while blocked
  std::function<std::string()> wait_what;
  // owner: the last collective posted on the comm stream whose span is not yet recorded
  std::shared_ptr<CollectiveOp> stream_tail;
  int stream_tail_member = 0;  // this rank's index in stream_tail's group
  // owner: the last timing-only collective posted whose span is not yet recorded
  std::shared_ptr<TimingCollective> timing_tail;
  int timing_tail_member = 0;
  // owner: results the rank published, and its checkpoints, by name
  std::map<std::string, Published> published;
  std::map<std::string, Checkpoint> checkpoints;
  // Set only inside a rank's own process (RankIsolation::processes): every call that touches
  // the cluster goes to the rank's proxy thread in the trusted process through this link.
  RemoteLink* remote = nullptr;
};

/// The whole cluster during and after a run.
struct ClusterState {
  ClusterConfig config;
  RankIsolation isolation = RankIsolation::threads;
  std::mutex mu;
  int live_ranks = 0;    // lock: ranks whose body has not returned
  int asleep_ranks = 0;  // lock: ranks asleep in block(); all live ones asleep may be a deadlock
  std::atomic<bool> aborting{false};
  std::exception_ptr error;  // first primary error, else first RankStopped
  bool error_is_primary = false;
  std::string abort_reason;
  std::vector<std::unique_ptr<RankState>> ranks;
  std::vector<Rank> handles;
  std::vector<RankReport> reports;
  bool ran = false;

  explicit ClusterState(ClusterConfig c);
  void reset();
  void run(const std::function<void(Rank&)>& body);
  /// Starts one thread per rank running `rank_body(r)`, joins them, and builds the reports.
  void run_threads(const std::function<void(Rank&)>& body);

  /// Latency and bandwidth of the link between two global ranks.
  std::pair<double, double> link(int a, int b) const;
  std::shared_ptr<Group> make_group(std::string name, std::vector<int> members) const;

  /// Records an error; primary errors win over RankStopped. Lock held.
  void record_error_locked(std::exception_ptr e);
  /// Stops the run: every blocked rank wakes and throws RankStopped. Lock held.
  void abort_locked(const std::string& reason);
  /// Wakes `rank` because something it may wait for happened (a message for it arrived, a
  /// collective it is in started or completed). A rank woken for nothing blocks again. Lock held.
  void wake_locked(RankState& rank);
  /// The first half of wake_locked: marks `rank` awake. The caller then calls
  /// `rank.wake.notify_one()` after unlocking, so that the rank does not wake only to wait for
  /// the lock its waker still holds. Lock held.
  void mark_awake_locked(RankState& rank);
  /// Throws RankStopped if the run is stopping. Lock held or not.
  void check_abort(const RankState& self) const;
  /// Blocks `self` until an event wakes it (wake_locked); throws RankStopped on abort and
  /// DeadlockError if every live rank is blocked with no progress possible. `progress()` says
  /// whether the rank could still move on, for the deadlock check. Lock held.
  void block(Lock& lk, RankState& self, std::function<bool()> progress,
             std::function<std::string()> what);
  /// Waits for `op` to be ready (helping collectives), then finishes it. Lock not held.
  void wait(Operation& op);
  /// Under the lock: if `op` is ready, true (caller then finishes it); helps collectives.
  bool test_locked(Lock& lk, Operation& op);
  bool deadlocked_locked() const;
  std::string deadlock_report_locked() const;
  /// Called when a rank falls asleep or finishes: if every live rank is asleep with nothing to
  /// wake it, records a DeadlockError, stops the run and returns true. Lock held.
  bool stop_if_deadlocked_locked();
  void rank_finished(int id);
  /// The thread of rank `r`: runs `body`, records its error if it throws, then finishes.
  void run_rank(int r, const std::function<void(Rank&)>& body);
};

/// Waits until the rank's last collective on the comm stream has a known time, then records its
/// span (so comm_free is exact). Lock not held.
void settle_stream(RankState& self);
/// Records the span of the rank's last collective if its time is already known; never blocks.
void settle_stream_if_known(RankState& self);
/// Waits until the rank's last timing-only collective has a known time, then records its span.
/// Lock not held.
void settle_timing(RankState& self);
/// Under the lock: hands `msg` to the first live receive posted by group rank `peer` for its
/// sender and tag, or queues it; returns the receiver to notify once the lock is released.
RankState* deliver_locked(Group& group, int peer, std::shared_ptr<Message> msg);
/// Throws std::invalid_argument naming the op and group when `peer` is not a group rank.
void check_peer(const Group& g, int peer, std::string_view op);

}  // namespace mgpu::detail
