// Per-rank virtual clock: a compute stream and a comm stream, and the timeline of spans.
// Virtual time depends only on the program and the cost model, never on the host, so it can
// be graded; bubble fraction and overlap are computed exactly from the recorded spans.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mgpu {

/// A lane of a rank's timeline. Its value is the Chrome-trace thread id (tid).
enum class Stream {
  compute = 0,  ///< the rank's program: compute spans and idle (waiting) spans, never overlapping
  comm = 1,     ///< sends and collectives, run one after another in posting order
  recv = 2,     ///< incoming messages; a display lane only (receiving does not occupy `comm`)
  /// Cross-server traffic of the timing-only calls (Comm::isend_timing, icollective_timing),
  /// run one after another in posting order beside `comm`, which then carries only their
  /// in-server traffic: a NIC and the NVLink ports of a GPU work at the same time.
  network = 3,
};

/// What a span of the timeline was spent on.
enum class SpanKind {
  compute,     ///< Rank::compute (FLOPs at the configured rate)
  send,        ///< a point-to-point send on the comm stream
  recv,        ///< a point-to-point receive, from its post to its completion
  collective,  ///< a collective on the comm stream
  idle,        ///< the program waited for a request that had not completed yet
};

/// Lower-case name of a stream: "compute", "comm", "recv", "network".
std::string_view to_string(Stream stream);
/// Lower-case name of a span kind: "compute", "send", "recv", "collective", "idle".
std::string_view to_string(SpanKind kind);

/// One interval of a rank's timeline, in virtual seconds.
struct Span {
  Stream stream;      ///< lane it belongs to
  SpanKind kind;      ///< what it was spent on
  std::string label;  ///< e.g. "fwd layer 3", "all_reduce tp", "wait all_reduce dp"
  double start;       ///< seconds
  double end;         ///< seconds, >= start
  /// end - start.
  double duration() const { return end - start; }
};

/// A rank's virtual time. Owned and used by one rank's thread; the Rank and Comm calls drive it.
///
/// `now()` is where the rank's program is. Compute spans and idle spans advance it. Comm
/// operations are posted at `now()`, start at max(now, comm_free) and keep the comm stream busy
/// until they end; waiting for one that ends later than `now()` records an idle span.
class VirtualClock {
 public:
  /// Seconds the program has reached.
  double now() const { return now_; }
  /// Time at which the comm stream finishes what has been posted so far (as far as known).
  double comm_free() const { return comm_free_; }
  /// Time at which the network lane finishes what has been posted on it so far.
  double network_free() const { return network_free_; }

  /// Runs `seconds` of work on the compute stream from now() (records a compute span).
  void advance_compute(double seconds, std::string_view label);
  /// Waits until time `t`: when t > now(), records an idle span [now, t] and sets now = t.
  void wait_until(double t, std::string_view label);
  /// Records a span on the comm, network or recv lane. A comm span moves comm_free to its end,
  /// a network span network_free.
  /// Called by the runtime; chapters do not need it.
  void record_comm(Stream stream, SpanKind kind, std::string_view label, double start, double end);

  /// Every span recorded, in the order recorded.
  const std::vector<Span>& timeline() const { return spans_; }
  /// Total seconds of compute spans.
  double compute_time() const { return compute_; }
  /// Total seconds of idle spans.
  double idle_time() const { return idle_; }
  /// Total seconds the comm stream was busy (sends and collectives).
  double comm_time() const { return comm_; }
  /// Total seconds the network lane was busy.
  double network_time() const { return network_; }
  /// Last time anything on this rank ended: max(now, comm_free, network_free).
  double end_time() const;
  /// Seconds in [from, to) during which the comm stream was busy while the compute stream was
  /// computing: the communication hidden behind compute (what gradient buckets and prefetch buy).
  double overlap_time(double from, double to) const;

 private:
  double now_ = 0.0;
  double comm_free_ = 0.0;
  double network_free_ = 0.0;
  double compute_ = 0.0;
  double idle_ = 0.0;
  double comm_ = 0.0;
  double network_ = 0.0;
  std::vector<Span> spans_;
};

}  // namespace mgpu
