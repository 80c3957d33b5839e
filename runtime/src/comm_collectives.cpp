// Built-in collectives. Members meet in a rendezvous keyed by (group, call number); once all
// have arrived the work is cut into slices that any waiting member claims through an atomic
// counter (so completion never waits for one particular rank), each slice reduced in rank
// order and written to every member's buffer. The op completes when every slice is done.
#include "cost.hpp"
#include "isolation.hpp"
#include "kernels.hpp"
#include "state.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace mgpu {
namespace detail {

/// One member's arguments.
struct Part {
  RankState* rank = nullptr;
  bool arrived = false;
  OpKind kind = OpKind::barrier;
  DType dtype = DType::f32;
  ReduceOp rop = ReduceOp::sum;
  int root = 0;
  const unsigned char* in = nullptr;
  unsigned char* out = nullptr;
  std::size_t in_count = 0;
  std::size_t out_count = 0;
  double ready = 0.0;  // max(post time, comm stream free)
  std::vector<std::size_t> send_counts, recv_counts;
  int color = 0, key = 0;
  std::string name;
};

/// A unit of data work: a range [lo, hi) of elements within block (a, b), meaning per op kind.
struct Slice {
  int a = 0, b = 0;
  std::size_t lo = 0, hi = 0;
};

/// A collective as shared by all members of its group.
struct CollectiveOp {
  std::shared_ptr<Group> group;
  std::uint64_t seq = 0;
  OpKind kind = OpKind::barrier;
  DType dtype = DType::f32;
  ReduceOp rop = ReduceOp::sum;
  int root = 0;
  std::vector<Part> parts;
  int arrived = 0;
  bool resolved = false;
  double start = 0.0, end = 0.0;
  std::vector<Slice> slices;
  std::vector<std::vector<std::size_t>> send_off, recv_off;  // all_to_all_v prefix sums
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  int active = 0;
  bool complete = false;
  bool cancelled = false;
  std::vector<std::shared_ptr<Group>> split_group;  // by member
  std::vector<int> split_rank;

  int n() const { return group->size(); }
  std::string label() const { return std::string(to_string(kind)) + " " + group->name; }
  void run_slice(const Slice& s);
};

void CollectiveOp::run_slice(const Slice& s) {
  const std::size_t es = dtype_bytes(dtype);
  const int nn = n();
  const std::size_t len = s.hi - s.lo;
  std::vector<const unsigned char*> ins(static_cast<std::size_t>(nn));
  std::vector<unsigned char*> outs(static_cast<std::size_t>(nn));
  auto P = [&](int r) -> Part& { return parts[static_cast<std::size_t>(r)]; };
  switch (kind) {
    case OpKind::all_reduce:
      for (int r = 0; r < nn; ++r) {
        ins[static_cast<std::size_t>(r)] = P(r).in + s.lo * es;
        outs[static_cast<std::size_t>(r)] = P(r).out + s.lo * es;
      }
      reduce_slice(dtype, rop, ins.data(), nn, outs.data(), nn, len);
      break;
    case OpKind::reduce_scatter: {
      const std::size_t m = P(s.a).out_count;
      for (int r = 0; r < nn; ++r)
        ins[static_cast<std::size_t>(r)] = P(r).in + (s.a * m + s.lo) * es;
      outs[0] = P(s.a).out + s.lo * es;
      reduce_slice(dtype, rop, ins.data(), nn, outs.data(), 1, len);
      break;
    }
    case OpKind::all_gather: {
      const std::size_t m = P(s.a).in_count;
      const unsigned char* src = P(s.a).in + s.lo * es;
      for (int r = 0; r < nn; ++r) {
        unsigned char* dst = P(r).out + (s.a * m + s.lo) * es;
        if (dst != src) std::memcpy(dst, src, len * es);
      }
      break;
    }
    case OpKind::broadcast: {
      const unsigned char* src = P(root).out + s.lo * es;
      for (int r = 0; r < nn; ++r)
        if (r != root) std::memcpy(P(r).out + s.lo * es, src, len * es);
      break;
    }
    case OpKind::all_to_all: {  // block b of rank b's in... : out_a[b] = in_b[a]
      const std::size_t m = P(0).in_count / static_cast<std::size_t>(nn);
      std::memcpy(P(s.a).out + (s.b * m + s.lo) * es, P(s.b).in + (s.a * m + s.lo) * es, len * es);
      break;
    }
    case OpKind::all_to_all_v: {  // out_a[from b] = in_b[to a]
      const std::size_t so = send_off[static_cast<std::size_t>(s.b)][static_cast<std::size_t>(s.a)];
      const std::size_t ro = recv_off[static_cast<std::size_t>(s.a)][static_cast<std::size_t>(s.b)];
      std::memcpy(P(s.a).out + (ro + s.lo) * es, P(s.b).in + (so + s.lo) * es, len * es);
      break;
    }
    default:
      break;
  }
}

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
  if (a.kind == OpKind::barrier || a.kind == OpKind::split) return "";
  if (a.dtype != b.dtype)
    return differ("dtype", std::string(to_string(a.dtype)), std::string(to_string(b.dtype)));
  switch (a.kind) {
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::all_to_all:
    case OpKind::broadcast:
      if (a.in_count != b.in_count)
        return differ("count", std::to_string(a.in_count), std::to_string(b.in_count));
      break;
    case OpKind::reduce_scatter:
      if (a.out_count != b.out_count)
        return differ("count", std::to_string(a.out_count), std::to_string(b.out_count));
      break;
    default:
      break;
  }
  if (a.kind == OpKind::broadcast && a.root != b.root)
    return differ("root", std::to_string(a.root), std::to_string(b.root));
  if ((a.kind == OpKind::all_reduce || a.kind == OpKind::reduce_scatter) && a.rop != b.rop)
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
    if (op->kind == OpKind::split) return;
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

[[noreturn]] void mismatch(ClusterState& cluster, const std::string& message) {
  cluster.record_error_locked(std::make_exception_ptr(CollectiveMismatch(message)));
  cluster.abort_locked(message);
  throw CollectiveMismatch(message);
}

/// Cuts [0, len) of block (a, b) into slices of at most `chunk` elements.
void add_slices(std::vector<Slice>& out, int a, int b, std::size_t len, std::size_t chunk) {
  for (std::size_t lo = 0; lo < len; lo += chunk)
    out.push_back({a, b, lo, std::min(len, lo + chunk)});
}

/// Called by the last member to arrive: checks all_to_all_v counts, fixes the virtual time,
/// makes split groups, and cuts the data work into slices. Lock held.
void start_collective(ClusterState& cluster, CollectiveOp& op) {
  const int n = op.n();
  const std::size_t es = dtype_bytes(op.dtype);
  auto P = [&](int r) -> Part& { return op.parts[static_cast<std::size_t>(r)]; };
  double bytes = 0.0;
  std::size_t total = 0;  // elements moved, to size the slices
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::broadcast:
      bytes = double(P(0).in_count * es);
      total = P(0).in_count;
      break;
    case OpKind::reduce_scatter:
      bytes = double(P(0).out_count * es) * n;
      total = P(0).out_count * static_cast<std::size_t>(n);
      break;
    case OpKind::all_gather:
      bytes = double(P(0).in_count * es) * n;
      total = P(0).in_count * static_cast<std::size_t>(n);
      break;
    case OpKind::all_to_all: {
      const std::size_t m = P(0).in_count / static_cast<std::size_t>(n);
      bytes = double((P(0).in_count - m) * es);
      total = P(0).in_count * static_cast<std::size_t>(n);
      break;
    }
    case OpKind::all_to_all_v: {
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const std::size_t s = P(i).send_counts[static_cast<std::size_t>(j)];
          const std::size_t r = P(j).recv_counts[static_cast<std::size_t>(i)];
          if (s != r) {
            mismatch(cluster, "all_to_all_v in group " + op.group->describe() + ": rank " +
                                  std::to_string(i) + " sends " + std::to_string(s) +
                                  " elements to rank " + std::to_string(j) + " but rank " +
                                  std::to_string(j) + " expects " + std::to_string(r) +
                                  " from rank " + std::to_string(i) +
                                  "; send_counts[j] on rank i must equal recv_counts[i] on rank j");
          }
        }
      op.send_off.assign(static_cast<std::size_t>(n), {});
      op.recv_off.assign(static_cast<std::size_t>(n), {});
      std::size_t busiest = 0;
      for (int i = 0; i < n; ++i) {
        std::size_t so = 0, ro = 0, sent = 0, recvd = 0;
        for (int j = 0; j < n; ++j) {
          op.send_off[static_cast<std::size_t>(i)].push_back(so);
          op.recv_off[static_cast<std::size_t>(i)].push_back(ro);
          so += P(i).send_counts[static_cast<std::size_t>(j)];
          ro += P(i).recv_counts[static_cast<std::size_t>(j)];
          if (j != i) {
            sent += P(i).send_counts[static_cast<std::size_t>(j)];
            recvd += P(i).recv_counts[static_cast<std::size_t>(j)];
          }
        }
        busiest = std::max({busiest, sent, recvd});
        total += so;
      }
      bytes = double(busiest * es);
      break;
    }
    case OpKind::split: {
      op.split_group.assign(static_cast<std::size_t>(n), nullptr);
      op.split_rank.assign(static_cast<std::size_t>(n), -1);
      std::map<int, std::vector<std::pair<int, int>>> colors;  // color -> (key, group rank)
      for (int r = 0; r < n; ++r)
        if (P(r).color >= 0) colors[P(r).color].push_back({P(r).key, r});
      for (auto& [color, ms] : colors) {
        std::sort(ms.begin(), ms.end());
        std::vector<int> globals;
        for (auto& m : ms) globals.push_back(op.group->members[static_cast<std::size_t>(m.second)]);
        auto g = cluster.make_group(P(ms.front().second).name, globals);
        for (std::size_t i = 0; i < ms.size(); ++i) {
          op.split_group[static_cast<std::size_t>(ms[i].second)] = g;
          op.split_rank[static_cast<std::size_t>(ms[i].second)] = static_cast<int>(i);
        }
      }
      break;
    }
    default:
      break;
  }
  double ready = 0.0;
  for (const auto& p : op.parts) ready = std::max(ready, p.ready);
  op.start = ready;
  op.end = ready + collective_seconds(op.kind, n, op.group->alpha, op.group->beta, bytes);
  op.resolved = true;

  // Slices big enough to amortise the claim, small enough that every waiting member gets work.
  // 32K..256K elements: many slices per member keeps the load even when a thread is descheduled.
  const std::size_t per =
      (total + 16 * static_cast<std::size_t>(n) - 1) / (16 * static_cast<std::size_t>(n));
  const std::size_t chunk =
      std::clamp<std::size_t>(per, std::size_t(1) << 15, std::size_t(1) << 18);
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::broadcast:
      add_slices(op.slices, 0, 0, P(0).in_count, chunk);
      break;
    case OpKind::reduce_scatter:
      for (int d = 0; d < n; ++d) add_slices(op.slices, d, 0, P(0).out_count, chunk);
      break;
    case OpKind::all_gather:
      for (int s = 0; s < n; ++s) add_slices(op.slices, s, 0, P(0).in_count, chunk);
      break;
    case OpKind::all_to_all: {
      const std::size_t m = P(0).in_count / static_cast<std::size_t>(n);
      for (int d = 0; d < n; ++d)
        for (int s = 0; s < n; ++s) add_slices(op.slices, d, s, m, chunk);
      break;
    }
    case OpKind::all_to_all_v:
      for (int d = 0; d < n; ++d)
        for (int s = 0; s < n; ++s)
          add_slices(op.slices, d, s, P(d).recv_counts[static_cast<std::size_t>(s)], chunk);
      break;
    default:
      break;
  }
  if (op.kind == OpKind::broadcast && n == 1) op.slices.clear();
  if (op.slices.empty()) op.complete = true;
}

/// What a ring algorithm moves for this member (see traffic.hpp and the README).
TrafficCounts ring_traffic(OpKind kind, int n, int r, int root, std::size_t in_count,
                           std::size_t out_count, std::span<const std::size_t> sc,
                           std::span<const std::size_t> rc, std::size_t es) {
  TrafficCounts t;
  if (n <= 1) return t;
  const auto steps = static_cast<std::uint64_t>(n - 1);
  switch (kind) {
    case OpKind::all_reduce:
      if (in_count == 0) break;
      t.bytes_sent = t.bytes_received = 2 * (in_count - ring_chunk(in_count, n, r).count) * es;
      t.messages_sent = 2 * steps;
      break;
    case OpKind::reduce_scatter:
      if (out_count == 0) break;
      t.bytes_sent = t.bytes_received = steps * out_count * es;
      t.messages_sent = steps;
      break;
    case OpKind::all_gather:
      if (in_count == 0) break;
      t.bytes_sent = t.bytes_received = steps * in_count * es;
      t.messages_sent = steps;
      break;
    case OpKind::broadcast: {
      if (in_count == 0) break;
      const int pos = (r - root + n) % n;  // place in the chain that starts at the root
      if (pos != n - 1) {
        t.bytes_sent = in_count * es;
        t.messages_sent = 1;
      }
      if (pos != 0) t.bytes_received = in_count * es;
      break;
    }
    case OpKind::all_to_all: {
      const std::size_t m = in_count / static_cast<std::size_t>(n);
      t.bytes_sent = (in_count - m) * es;
      t.bytes_received = (out_count - m) * es;
      t.messages_sent = in_count ? steps : 0;
      break;
    }
    case OpKind::all_to_all_v:
      for (int j = 0; j < n; ++j) {
        if (j == r) continue;
        t.bytes_sent += sc[static_cast<std::size_t>(j)] * es;
        t.bytes_received += rc[static_cast<std::size_t>(j)] * es;
        if (sc[static_cast<std::size_t>(j)]) ++t.messages_sent;
      }
      break;
    case OpKind::barrier:
      t.messages_sent = 2 * steps;
      break;
    default:
      break;
  }
  return t;
}

bool overlap(const void* a, std::size_t abytes, const void* b, std::size_t bbytes) {
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return abytes && bbytes && x < y + bbytes && y < x + abytes;
}

}  // namespace

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
  const bool on_stream = a.kind != OpKind::split;
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
  const auto nn = static_cast<std::size_t>(n);
  switch (kind) {
    case OpKind::reduce_scatter:
      if (in_count != nn * out_count)
        bad("input has " + std::to_string(in_count) + " elements but must have group size " +
            std::to_string(n) + " x output size " + std::to_string(out_count) + " = " +
            std::to_string(nn * out_count));
      if (detail::overlap(in, in_count * es, out, out_count * es))
        bad("input and output overlap; use separate buffers");
      break;
    case OpKind::all_gather:
      if (out_count != nn * in_count)
        bad("output has " + std::to_string(out_count) + " elements but must have group size " +
            std::to_string(n) + " x input size " + std::to_string(in_count) + " = " +
            std::to_string(nn * in_count));
      if (detail::overlap(in, in_count * es, out, out_count * es) &&
          in != static_cast<unsigned char*>(out) + static_cast<std::size_t>(rank_) * in_count * es)
        bad("input overlaps the output other than exactly at this rank's slot; pass separate "
            "buffers or the slot");
      break;
    case OpKind::broadcast:
      detail::check_peer(*group_, root, "broadcast root");
      break;
    case OpKind::all_to_all:
      if (in_count != out_count)
        bad("input has " + std::to_string(in_count) + " elements, output " +
            std::to_string(out_count) + "; they must be equal");
      if (in_count % nn != 0)
        bad("count " + std::to_string(in_count) + " is not divisible by group size " +
            std::to_string(n) + "; use all_to_all_v for uneven blocks");
      if (detail::overlap(in, in_count * es, out, out_count * es))
        bad("input and output overlap; use separate buffers");
      break;
    default:
      break;
  }
  detail::Arrival a;
  a.kind = kind;
  a.dtype = dtype;
  a.rop = op;
  a.root = root;
  a.part.in = static_cast<const unsigned char*>(in);
  a.part.out = static_cast<unsigned char*>(out);
  a.part.in_count = in_count;
  a.part.out_count = out_count;
  self_->traffic.record(
      kind, group_->name,
      detail::ring_traffic(kind, n, rank_, root, in_count, out_count, {}, {}, es));
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
  if (detail::overlap(in, in_count * es, out, out_count * es))
    bad("input and output overlap; use separate buffers");
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
                        detail::ring_traffic(OpKind::all_to_all_v, n, rank_, 0, in_count, out_count,
                                             send_counts, recv_counts, es));
  return Request(detail::arrive(group_, *self_, rank_, std::move(a)));
}

Request Comm::ibarrier() {
  check_valid();
  if (self_->remote) {
    return detail::remote_collective(*self_->remote, *this, OpKind::barrier, nullptr, nullptr, 0, 0,
                                     DType::f32, ReduceOp::sum, 0);
  }
  self_->traffic.record(OpKind::barrier, group_->name,
                        detail::ring_traffic(OpKind::barrier, size(), rank_, 0, 0, 0, {}, {}, 4));
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
