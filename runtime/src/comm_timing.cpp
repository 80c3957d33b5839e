// Timing-only communication: sends and collectives that cost virtual time and are metered, but
// carry a byte count instead of a buffer. They let a rank thread stand for a GPU of a model far
// larger than this machine (mgpu plan --simulate) while the schedule, the rendezvous and the
// lanes stay the runtime's own. A send rides the ordinary mailboxes as a message of no elements;
// a collective meets its members in a rendezvous of its own, numbered apart from the data
// collectives, and needs no slices since nothing moves.
#include "collectives.hpp"
#include "state.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace mgpu {
namespace detail {

/// One timing-only collective as all members share it.
struct TimingCollective {
  std::shared_ptr<Group> group;
  std::uint64_t seq = 0;
  OpKind kind = OpKind::barrier;
  double bytes = 0;
  Stream lane = Stream::comm;
  std::vector<char> arrived;      // by member
  std::vector<double> ready;      // by member: max(post time, lane free)
  std::vector<char> recorded;     // by member, owner thread: span recorded on its timeline
  std::vector<RankState*> ranks;  // by member
  int count = 0;                  // members arrived
  bool resolved = false;          // start and end known
  double start = 0, end = 0;
  std::string mismatch;  // set when a member's kind or bytes differ

  std::string label() const { return std::string(to_string(kind)) + " " + group->name; }
};

namespace {

void require_threads(const RankState& self, std::string_view what) {
  if (self.remote)
    throw std::logic_error(std::string(what) +
                           ": timing-only operations run on thread ranks only "
                           "(RankIsolation::threads)");
}

void check_bytes(double bytes, std::string_view what) {
  if (!std::isfinite(bytes) || bytes < 0)
    throw std::invalid_argument(std::string(what) + ": bytes " + std::to_string(bytes) +
                                " must be finite and >= 0");
}

// True when every member of the group is on one node: its traffic then stays on NVLink.
bool one_node(const ClusterState& c, const std::vector<int>& ranks) {
  for (int r : ranks)
    if (r / c.config.gpus_per_node != ranks[0] / c.config.gpus_per_node) return false;
  return true;
}

double lane_free(const VirtualClock& clock, Stream lane) {
  return lane == Stream::network ? clock.network_free() : clock.comm_free();
}

// Records this member's span of `c` once.
void record_span(TimingCollective& c, int member, RankState& self) {
  auto& done = c.recorded[static_cast<std::size_t>(member)];
  if (done) return;
  done = 1;
  self.clock.record_comm(c.lane, SpanKind::collective, c.label(), c.start, c.end);
}

// Settles the rank's own earlier work on `lane` so that its free time is exact.
void settle_lane(RankState& self, Stream lane) {
  if (lane == Stream::comm) settle_stream(self);
  settle_timing(self);
}

struct TimingSendOp final : Operation {
  double end = 0.0;
  std::string label;
  bool ready_locked() const override { return true; }
  std::string describe_locked() const override { return label; }
  void finish() override { owner->clock.wait_until(end, "wait " + label); }
};

struct TimingCollectiveOp final : Operation {
  std::shared_ptr<TimingCollective> c;
  int member = 0;
  bool advance = true;  // false: settling only, the program does not wait for the end
  bool ready_locked() const override { return c->resolved || !c->mismatch.empty(); }
  std::string describe_locked() const override {
    std::ostringstream s;
    s << "timing-only " << c->label() << " (call #" << c->seq << " on " << c->group->describe()
      << "), waiting for";
    int listed = 0;
    for (std::size_t i = 0; i < c->arrived.size(); ++i) {
      if (c->arrived[i]) continue;
      if (listed++ == static_cast<int>(kListedRanks)) {
        s << " ...";
        break;
      }
      s << " " << i << " (global " << c->group->members[i] << ")";
    }
    return s.str();
  }
  void finish() override {
    if (!c->mismatch.empty()) throw CollectiveMismatch(c->mismatch);
    record_span(*c, member, *owner);
    if (owner->timing_tail == c) owner->timing_tail.reset();
    if (advance) owner->clock.wait_until(c->end, "wait " + c->label());
  }
};

// What one member's call charges the meter: the row's traffic (collectives.cpp) for a stand-in
// call of n one-byte elements in and out (none when S is 0), which says how many messages the
// ring sends and which directions carry bytes; each of those carries what the bus-bandwidth
// factor puts on a rank's link for S bytes.
TrafficCounts timing_traffic(OpKind kind, int n, int rank, double bytes) {
  if (n <= 1) return {};
  CallArgs stand_in;
  stand_in.n = n;
  stand_in.rank = rank;
  stand_in.es = 1;
  stand_in.in_count = stand_in.out_count = bytes == 0 ? 0 : static_cast<std::size_t>(n);
  TrafficCounts t = ring_traffic(kind, stand_in);
  const auto moved = static_cast<std::uint64_t>(std::llround(bus_factor(kind, n) * bytes));
  t.bytes_sent = t.bytes_sent ? moved : 0;
  t.bytes_received = t.bytes_received ? moved : 0;
  return t;
}

// The kinds a timing-only collective can stand for: those whose cost is set by S alone.
void check_timing_kind(OpKind kind) {
  if (kind != OpKind::all_reduce && kind != OpKind::reduce_scatter && kind != OpKind::all_gather &&
      kind != OpKind::broadcast && kind != OpKind::barrier)
    throw std::invalid_argument("icollective_timing: " + std::string(to_string(kind)) +
                                " is not timed without buffers; use all_reduce, "
                                "reduce_scatter, all_gather, broadcast or barrier");
}

// The group's timing-only collective number `seq`, made by the first member to post it.
std::shared_ptr<TimingCollective> find_or_make_locked(const std::shared_ptr<Group>& group,
                                                      std::uint64_t seq, OpKind kind, double bytes,
                                                      Stream lane) {
  Group& g = *group;
  auto it = g.timing_pending.find(seq);
  if (it != g.timing_pending.end())
    if (auto c = it->second.lock()) return c;
  const auto n = static_cast<std::size_t>(g.size());
  auto c = std::make_shared<TimingCollective>();
  c->group = group;
  c->seq = seq;
  c->kind = kind;
  c->bytes = bytes;
  c->lane = lane;
  c->arrived.assign(n, 0);
  c->ready.assign(n, 0.0);
  c->recorded.assign(n, 0);
  c->ranks.assign(n, nullptr);
  g.timing_pending[seq] = c;
  return c;
}

// Records the first disagreement with the first member's kind and bytes.
void check_agreement_locked(TimingCollective& c, int rank, OpKind kind, double bytes) {
  if (!c.mismatch.empty() || (c.kind == kind && c.bytes == bytes)) return;
  std::ostringstream s;
  s << "timing-only collective call #" << c.seq << " in group " << c.group->describe() << ": rank "
    << rank << " calls " << to_string(kind) << " of " << bytes << " bytes but the first "
    << "member called " << to_string(c.kind) << " of " << c.bytes
    << " bytes; members must call the same collectives in the same order";
  c.mismatch = s.str();
}

// Member `rank` arrives, its lane free at `ready`. The last to arrive fixes the start (the
// latest ready) and the end; it, or a member that disagrees, wakes the others, who are returned
// to be notified once the lock is released.
std::vector<RankState*> arrive_locked(ClusterState& cluster, TimingCollective& c, int rank,
                                      RankState& self, double ready) {
  Group& g = *c.group;
  const int n = g.size();
  const auto me = static_cast<std::size_t>(rank);
  c.arrived[me] = 1;
  c.ready[me] = ready;
  c.ranks[me] = &self;
  std::vector<RankState*> wake;
  if (++c.count != n && c.mismatch.empty()) return wake;
  if (c.count == n) {
    c.start = *std::max_element(c.ready.begin(), c.ready.end());
    c.end = c.start + collective_seconds(c.kind, n, g.alpha, g.beta, c.bytes);
    c.resolved = true;
    g.timing_pending.erase(c.seq);
  }
  for (auto* r : c.ranks)
    if (r && r != &self) {
      cluster.mark_awake_locked(*r);
      wake.push_back(r);
    }
  return wake;
}

}  // namespace

void settle_timing(RankState& self) {
  if (!self.timing_tail) return;
  TimingCollectiveOp op;
  op.owner = &self;
  op.c = self.timing_tail;
  op.member = self.timing_tail_member;
  op.advance = false;
  self.cluster->wait(op);
}

}  // namespace detail

Request Comm::isend_timing(double bytes, int peer, int tag) {
  check_valid();
  detail::require_threads(*self_, "isend_timing");
  detail::check_bytes(bytes, "isend_timing");
  detail::check_peer(*group_, peer, "isend_timing");
  if (tag < 0)
    throw std::invalid_argument("isend_timing in group " + group_->describe() + ": tag " +
                                std::to_string(tag) + " is negative; tags must be >= 0");
  auto& self = *self_;
  auto& cluster = *self.cluster;
  cluster.check_abort(self);
  const int dst = group_->members[static_cast<std::size_t>(peer)];
  const Stream lane = detail::one_node(cluster, {self.id, dst}) ? Stream::comm : Stream::network;
  detail::settle_lane(self, lane);

  auto [alpha, beta] = cluster.link(self.id, dst);
  const double start = std::max(self.clock.now(), detail::lane_free(self.clock, lane));
  const double end = start + alpha + bytes / beta;
  auto msg = std::make_shared<detail::Message>();
  msg->src = rank_;
  msg->tag = tag;
  msg->ready = end;
  msg->timing_bytes = bytes;
  auto op = std::make_shared<detail::TimingSendOp>();
  op->owner = &self;
  op->end = end;
  op->label =
      "send to " + std::to_string(peer) + " tag " + std::to_string(tag) + " " + group_->name;
  self.clock.record_comm(lane, SpanKind::send, op->label, start, end);
  self.traffic.record(OpKind::send, group_->name,
                      {static_cast<std::uint64_t>(std::llround(bytes)), 0, 1});
  detail::RankState* receiver = nullptr;
  {
    detail::Lock lk(cluster.mu);
    receiver = detail::deliver_locked(*group_, peer, std::move(msg));
  }
  if (receiver) receiver->wake.notify_one();
  return Request(std::move(op));
}

Request Comm::irecv_timing(int peer, int tag) {
  check_valid();
  detail::require_threads(*self_, "irecv_timing");
  return irecv_raw(nullptr, 0, DType::f32, peer, tag);
}

Request Comm::icollective_timing(OpKind kind, double bytes) {
  check_valid();
  detail::require_threads(*self_, "icollective_timing");
  detail::check_bytes(bytes, "icollective_timing");
  detail::check_timing_kind(kind);
  auto& self = *self_;
  auto& cluster = *self.cluster;
  cluster.check_abort(self);
  const Stream lane = detail::one_node(cluster, group_->members) ? Stream::comm : Stream::network;
  detail::settle_lane(self, lane);
  const double ready = std::max(self.clock.now(), detail::lane_free(self.clock, lane));
  const int n = group_->size();
  self.traffic.record(kind, group_->name, detail::timing_traffic(kind, n, rank_, bytes));

  std::shared_ptr<detail::TimingCollective> c;
  std::vector<detail::RankState*> wake;
  {
    detail::Lock lk(cluster.mu);
    auto& next_seq = group_->timing_next_seq;
    if (next_seq.empty()) next_seq.assign(static_cast<std::size_t>(n), 0);
    const std::uint64_t seq = next_seq[static_cast<std::size_t>(rank_)]++;
    c = detail::find_or_make_locked(group_, seq, kind, bytes, lane);
    detail::check_agreement_locked(*c, rank_, kind, bytes);
    wake = detail::arrive_locked(cluster, *c, rank_, self, ready);
  }
  for (auto* r : wake) r->wake.notify_one();
  self.timing_tail = c;
  self.timing_tail_member = rank_;
  auto op = std::make_shared<detail::TimingCollectiveOp>();
  op->owner = &self;
  op->c = c;
  op->member = rank_;
  return Request(std::move(op));
}

}  // namespace mgpu
