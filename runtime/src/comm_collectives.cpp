// Built-in collectives. Members meet in a rendezvous keyed by (group, call number); once all
// have arrived the work is cut into slices that any waiting member claims through an atomic
// counter (so completion never waits for one particular rank), each slice reduced in rank
// order and written to every member's buffer. The op completes when every slice is done.
// What differs between collectives is a row of the table in collectives.cpp.
#include "collective_op.hpp"
#include "collectives.hpp"
#include "isolation.hpp"
#include "state.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace mgpu {
namespace detail {

namespace {

std::string list_ranks(const Group& g, const std::vector<int>& group_ranks) {
  // At most kListedRanks, as in Group::describe: a deadlock report has a line per rank.
  std::ostringstream s;
  s << "{";
  const std::size_t n = group_ranks.size();
  for (std::size_t i = 0; i < std::min(n, kListedRanks); ++i) {
    s << (i ? "," : "") << group_ranks[i] << " (global "
      << g.members[static_cast<std::size_t>(group_ranks[i])] << ")";
  }
  if (n > kListedRanks) s << ", and " << n - kListedRanks << " more";
  s << "}";
  return s.str();
}

/// The members of `op` that have not arrived.
std::vector<int> missing(const CollectiveOp& op) {
  std::vector<int> m;
  for (int r = 0; r < op.n(); ++r)
    if (!op.parts[static_cast<std::size_t>(r)].arrived) m.push_back(r);
  return m;
}

/// How member `r`'s arguments differ from member `ref`'s, or "" if they agree.
std::string find_mismatch(const CollectiveOp& op, int r, int ref) {
  const Part& a = op.parts[static_cast<std::size_t>(r)];
  const Part& b = op.parts[static_cast<std::size_t>(ref)];
  const std::string seq = " (collective call #" + std::to_string(op.seq) + " on this group)";
  if (a.kind != b.kind) {
    return "collective call #" + std::to_string(op.seq) + " in group " + op.group->describe() +
           ": rank " + std::to_string(r) + " calls " + std::string(to_string(a.kind)) +
           " but rank " + std::to_string(ref) + " calls " + std::string(to_string(b.kind)) +
           "; members must call the same collectives in the same order";
  }
  auto differ = [&](const std::string& what, const std::string& mine, const std::string& theirs) {
    return std::string(to_string(a.kind)) + " in group " + op.group->describe() + ": rank " +
           std::to_string(r) + " " + what + " " + mine + " differs from rank " +
           std::to_string(ref) + "'s " + theirs + seq + "; every member must pass the same " + what;
  };
  const Collective& c = collective(a.kind);  // both members call a.kind
  if (!c.same_dtype) return "";
  if (a.dtype != b.dtype)
    return differ("dtype", std::string(to_string(a.dtype)), std::string(to_string(b.dtype)));
  if (c.same_count == SameCount::in && a.in_count != b.in_count)
    return differ("count", std::to_string(a.in_count), std::to_string(b.in_count));
  if (c.same_count == SameCount::out && a.out_count != b.out_count)
    return differ("count", std::to_string(a.out_count), std::to_string(b.out_count));
  if (c.same_root && a.root != b.root)
    return differ("root", std::to_string(a.root), std::to_string(b.root));
  if (c.same_reduce_op && a.rop != b.rop)
    return differ("reduce op", std::string(to_string(a.rop)), std::string(to_string(b.rop)));
  return "";
}

/// Among the members that have arrived, the first disagreement with the lowest arrived member.
std::string arrived_mismatch(const CollectiveOp& op) {
  int ref = -1;
  for (int r = 0; r < op.n(); ++r) {
    if (!op.parts[static_cast<std::size_t>(r)].arrived) continue;
    if (ref < 0) {
      ref = r;
      continue;
    }
    std::string m = find_mismatch(op, r, ref);
    if (!m.empty()) return m;
  }
  return "";
}

std::string waiting_for(const CollectiveOp& op) {
  std::ostringstream s;
  s << to_string(op.kind) << " in group " << op.group->describe() << " (collective call #" << op.seq
    << " on that group); group ranks " << list_ranks(*op.group, missing(op))
    << " have not called it";
  const std::string m = arrived_mismatch(op);
  if (!m.empty()) s << "; those that have disagree: " << m;
  return s.str();
}

/// Wakes every member of `op` (only they can wait for it to start or complete): marks them
/// awake under the lock, then notifies them after releasing it. Returns with the lock held.
void wake_members(Lock& lk, ClusterState& cluster, const CollectiveOp& op) {
  for (const Part& p : op.parts)
    if (p.rank) cluster.mark_awake_locked(*p.rank);
  lk.unlock();
  for (const Part& p : op.parts)
    if (p.rank) p.rank->wake.notify_one();
  lk.lock();
}

/// One member's handle on a shared collective.
struct MemberOp final : Operation {
  std::shared_ptr<CollectiveOp> op;
  int member = 0;

  bool ready_locked() const override { return op->complete; }
  bool progress_locked() const override { return op->arrived == op->n(); }
  bool helpable_locked() const override {
    return op->arrived == op->n() && !op->cancelled && op->next.load() < op->slices.size();
  }
  void help(Lock& lk) override {
    ClusterState& cluster = *owner->cluster;
    ++op->active;
    lk.unlock();
    const std::size_t total = op->slices.size();
    bool last = false;
    while (!cluster.aborting.load(std::memory_order_relaxed)) {
      const std::size_t i = op->next.fetch_add(1);
      if (i >= total) break;
      op->run_slice(op->slices[i]);
      if (op->done.fetch_add(1) + 1 == total) last = true;
    }
    lk.lock();
    --op->active;
    if (last) op->complete = true;
    // Members wait for completion, and a cancelling member for the last helper to leave.
    if (last || (op->active == 0 && op->cancelled)) wake_members(lk, cluster, *op);
  }
  std::string describe_locked() const override { return waiting_for(*op); }
  void finish() override {
    RankState& self = *owner;
    if (!op->row->on_comm_stream) return;
    if (self.stream_tail == op) {
      self.clock.record_comm(Stream::comm, SpanKind::collective, op->label(), op->start, op->end);
      self.stream_tail.reset();
    }
    self.clock.wait_until(op->end, "wait " + op->label());
  }
  void cancel(Lock& lk) override {
    op->cancelled = true;
    // Slices already claimed touch this rank's buffers: let them finish before unwinding.
    owner->wake.wait(lk, [&] { return op->active == 0; });
  }
  bool abandon_stops_run() const override { return !op->complete; }
};

/// Called by the last member to arrive: the row's cross-member checks and bookkeeping (offsets,
/// split groups), the virtual time, and the data work cut into slices. Lock held.
void start_collective(ClusterState& cluster, CollectiveOp& op) {
  const int n = op.n();
  const Collective& c = *op.row;
  const Extent extent = c.prepare ? c.prepare(cluster, op) : Extent{};
  double ready = 0.0;
  for (const auto& p : op.parts) ready = std::max(ready, p.ready);
  op.start = ready;
  op.end = ready + collective_seconds(op.kind, n, op.group->alpha, op.group->beta, extent.bytes);
  op.resolved = true;

  // Slices big enough to amortise the claim, small enough that every waiting member gets work.
  // 32K..256K elements: many slices per member keeps the load even when a thread is descheduled.
  const std::size_t per =
      (extent.elements + 16 * static_cast<std::size_t>(n) - 1) / (16 * static_cast<std::size_t>(n));
  const std::size_t chunk =
      std::clamp<std::size_t>(per, std::size_t(1) << 15, std::size_t(1) << 18);
  if (c.cut) c.cut(op, chunk);
  if (op.slices.empty()) op.complete = true;
}

}  // namespace

void mismatch(ClusterState& cluster, const std::string& message) {
  cluster.record_error_locked(std::make_exception_ptr(CollectiveMismatch(message)));
  cluster.abort_locked(message);
  throw CollectiveMismatch(message);
}

void settle_stream(RankState& self) {
  if (!self.stream_tail) return;
  auto op = self.stream_tail;
  ClusterState& cluster = *self.cluster;
  {
    Lock lk(cluster.mu);
    while (!op->resolved) {
      cluster.check_abort(self);
      cluster.block(
          lk, self, [op] { return op->resolved; },
          [op] { return "its comm stream to drain before posting: earlier " + waiting_for(*op); });
    }
  }
  self.clock.record_comm(Stream::comm, SpanKind::collective, op->label(), op->start, op->end);
  self.stream_tail.reset();
}

void settle_stream_if_known(RankState& self) {
  if (!self.stream_tail) return;
  {
    Lock lk(self.cluster->mu);
    if (!self.stream_tail->resolved) return;
  }
  settle_stream(self);
}

/// Everything a member brings to a collective; the validated, public entry points fill it.
struct Arrival {
  OpKind kind = OpKind::barrier;
  DType dtype = DType::f32;
  ReduceOp rop = ReduceOp::sum;
  int root = 0;
  Part part;
};

/// Joins this rank to the group's next collective; returns its member handle. Lock not held.
std::shared_ptr<MemberOp> arrive(const std::shared_ptr<Group>& group, RankState& self, int rank,
                                 Arrival a) {
  ClusterState& cluster = *self.cluster;
  cluster.check_abort(self);
  const bool on_stream = collective(a.kind).on_comm_stream;
  if (on_stream) settle_stream(self);
  a.part.rank = &self;
  a.part.ready = std::max(self.clock.now(), self.clock.comm_free());
  a.part.arrived = true;

  Lock lk(cluster.mu);
  const std::uint64_t seq = group->next_seq[static_cast<std::size_t>(rank)]++;
  // The entry expires only if every member that joined has given up, which happens only while
  // the run is stopping; a fresh op then lets this rank wait and see the stop like the others.
  auto& slot = group->pending[seq];
  std::shared_ptr<CollectiveOp> op = slot.lock();
  if (!op) {
    op = std::make_shared<CollectiveOp>();
    op->group = group;
    op->seq = seq;
    op->kind = a.kind;
    op->row = &collective(a.kind);
    op->dtype = a.dtype;
    op->rop = a.rop;
    op->root = a.root;
    op->parts.resize(static_cast<std::size_t>(group->size()));
    slot = op;
  }
  a.part.kind = a.kind;
  a.part.dtype = a.dtype;
  a.part.rop = a.rop;
  a.part.root = a.root;
  op->parts[static_cast<std::size_t>(rank)] = std::move(a.part);
  ++op->arrived;
  if (op->arrived == group->size()) {
    group->pending.erase(seq);
    // Checked once everyone is here, against group rank 0, so the message does not depend on
    // the order in which the threads arrived.
    for (int r = 1; r < group->size(); ++r) {
      std::string m = find_mismatch(*op, r, 0);
      if (!m.empty()) mismatch(cluster, m);
    }
    start_collective(cluster, *op);
    wake_members(lk, cluster, *op);
  }
  auto m = std::make_shared<MemberOp>();
  m->owner = &self;
  m->op = op;
  m->member = rank;
  if (on_stream) {
    self.stream_tail = op;
    self.stream_tail_member = rank;
  }
  return m;
}

}  // namespace detail

// ------------------------------------------------------------------------------------ Comm entry
// points

Request Comm::icollective(OpKind kind, const void* in, void* out, std::size_t in_count,
                          std::size_t out_count, DType dtype, ReduceOp op, int root) {
  check_valid();
  if (self_->remote) {
    return detail::remote_collective(*self_->remote, *this, kind, in, out, in_count, out_count,
                                     dtype, op, root);
  }
  const int n = size();
  const std::size_t es = dtype_bytes(dtype);
  // The message (with the group's members) is built only on error, not on every call.
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument(std::string(to_string(kind)) + " in group " + describe() +
                                " (rank " + std::to_string(rank_) + "): " + what);
  };
  detail::CallArgs args;
  args.group = group_.get();
  args.n = n;
  args.rank = rank_;
  args.root = root;
  args.in = in;
  args.out = out;
  args.in_count = in_count;
  args.out_count = out_count;
  args.es = es;
  if (std::string why = detail::invalid_arguments(kind, args); !why.empty()) bad(why);
  detail::Arrival a;
  a.kind = kind;
  a.dtype = dtype;
  a.rop = op;
  a.root = root;
  a.part.in = static_cast<const unsigned char*>(in);
  a.part.out = static_cast<unsigned char*>(out);
  a.part.in_count = in_count;
  a.part.out_count = out_count;
  self_->traffic.record(kind, group_->name, detail::ring_traffic(kind, args));
  return Request(detail::arrive(group_, *self_, rank_, std::move(a)));
}

Request Comm::icollective_v(const void* in, std::size_t in_count,
                            std::span<const std::size_t> send_counts, void* out,
                            std::size_t out_count, std::span<const std::size_t> recv_counts,
                            DType dtype) {
  check_valid();
  if (self_->remote) {
    return detail::remote_collective_v(*self_->remote, *this, in, in_count, send_counts, out,
                                       out_count, recv_counts, dtype);
  }
  const int n = size();
  const std::size_t es = dtype_bytes(dtype);
  auto bad = [&](const std::string& what) {  // built only on error, as in icollective
    throw std::invalid_argument("all_to_all_v in group " + describe() + " (rank " +
                                std::to_string(rank_) + "): " + what);
  };
  if (send_counts.size() != static_cast<std::size_t>(n) ||
      recv_counts.size() != static_cast<std::size_t>(n))
    bad("send_counts has " + std::to_string(send_counts.size()) + " entries and recv_counts " +
        std::to_string(recv_counts.size()) + "; both need one per group rank (" +
        std::to_string(n) + ")");
  std::size_t ssum = 0, rsum = 0;
  for (auto c : send_counts) ssum += c;
  for (auto c : recv_counts) rsum += c;
  if (ssum != in_count)
    bad("send_counts sum to " + std::to_string(ssum) + " but the input has " +
        std::to_string(in_count));
  if (rsum != out_count)
    bad("recv_counts sum to " + std::to_string(rsum) + " but the output has " +
        std::to_string(out_count));
  detail::CallArgs args;
  args.group = group_.get();
  args.n = n;
  args.rank = rank_;
  args.in = in;
  args.out = out;
  args.in_count = in_count;
  args.out_count = out_count;
  args.es = es;
  args.send_counts = send_counts;
  args.recv_counts = recv_counts;
  if (std::string why = detail::invalid_arguments(OpKind::all_to_all_v, args); !why.empty())
    bad(why);
  detail::Arrival a;
  a.kind = OpKind::all_to_all_v;
  a.dtype = dtype;
  a.part.in = static_cast<const unsigned char*>(in);
  a.part.out = static_cast<unsigned char*>(out);
  a.part.in_count = in_count;
  a.part.out_count = out_count;
  a.part.send_counts.assign(send_counts.begin(), send_counts.end());
  a.part.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  self_->traffic.record(OpKind::all_to_all_v, group_->name,
                        detail::ring_traffic(OpKind::all_to_all_v, args));
  return Request(detail::arrive(group_, *self_, rank_, std::move(a)));
}

Request Comm::ibarrier() {
  check_valid();
  if (self_->remote) {
    return detail::remote_collective(*self_->remote, *this, OpKind::barrier, nullptr, nullptr, 0, 0,
                                     DType::f32, ReduceOp::sum, 0);
  }
  detail::CallArgs args;
  args.n = size();
  args.rank = rank_;
  self_->traffic.record(OpKind::barrier, group_->name, detail::ring_traffic(OpKind::barrier, args));
  detail::Arrival a;
  a.kind = OpKind::barrier;
  return Request(detail::arrive(group_, *self_, rank_, std::move(a)));
}

Comm Comm::split(int color, int key, std::string name) {
  check_valid();
  if (self_->remote) return detail::remote_split(*self_->remote, *this, color, key, name);
  detail::Arrival a;
  a.kind = OpKind::split;
  a.part.color = color;
  a.part.key = key;
  a.part.name = std::move(name);
  auto m = detail::arrive(group_, *self_, rank_, std::move(a));
  self_->cluster->wait(*m);
  auto g = m->op->split_group[static_cast<std::size_t>(rank_)];
  if (!g) return Comm();
  return Comm(std::move(g), self_, m->op->split_rank[static_cast<std::size_t>(rank_)]);
}

}  // namespace mgpu
