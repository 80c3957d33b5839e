// The table of operation kinds (see collectives.hpp): one block of functions per collective,
// then one row each in kTable. A new collective is a new block and a new row here.
#include "collectives.hpp"

#include "collective_op.hpp"
#include "kernels.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

namespace mgpu::detail {

namespace {

using Size = std::size_t;
Size sz(int i) { return static_cast<Size>(i); }

// -------------------------------------------------------------------- shared parts of the rows

// nccl-tests bus-bandwidth factors.
double factor_one(int) { return 1.0; }
double factor_ring(int n) { return (double(n) - 1.0) / double(n); }  // (n-1)/n
double factor_all_reduce(int n) { return 2.0 * (double(n) - 1.0) / double(n); }

// Ring times; bytes is the Extent of the row.
double time_ring(int n, double alpha, double beta, double bytes) {  // n-1 steps of S/n each
  return bytes == 0 ? 0.0 : (n - 1.0) * (alpha + bytes / (n * beta));
}
double time_stream(int n, double alpha, double beta, double bytes) {  // latency fill, S once
  return bytes == 0 ? 0.0 : (n - 1.0) * alpha + bytes / beta;
}

std::string disjoint(const CallArgs& a) {
  if (overlap(a.in, a.in_count * a.es, a.out, a.out_count * a.es))
    return "input and output overlap; use separate buffers";
  return "";
}

// ------------------------------------------------------------------------------- all_reduce

double time_all_reduce(int n, double alpha, double beta, double bytes) {
  // reduce-scatter then all-gather, 2(n-1) steps of S/n each
  return bytes == 0 ? 0.0 : 2.0 * (n - 1.0) * (alpha + bytes / (n * beta));
}
TrafficCounts traffic_all_reduce(const CallArgs& a) {
  TrafficCounts t;
  if (a.in_count == 0) return t;
  t.bytes_sent = t.bytes_received =
      2 * (a.in_count - ring_chunk(a.in_count, a.n, a.rank).count) * a.es;
  t.messages_sent = 2 * static_cast<std::uint64_t>(a.n - 1);
  return t;
}
Extent extent_whole(ClusterState&, CollectiveOp& op) {  // all_reduce, broadcast: S = the buffer
  return {double(op.part(0).in_count * dtype_bytes(op.dtype)), op.part(0).in_count};
}
void cut_whole(CollectiveOp& op, Size chunk) {
  add_slices(op.slices, 0, 0, op.part(0).in_count, chunk);
}
void run_all_reduce(CollectiveOp& op, const Slice& s) {
  const Size es = dtype_bytes(op.dtype), nn = sz(op.n());
  std::vector<const unsigned char*> ins(nn);
  std::vector<unsigned char*> outs(nn);
  for (int r = 0; r < op.n(); ++r) {
    ins[sz(r)] = op.part(r).in + s.lo * es;
    outs[sz(r)] = op.part(r).out + s.lo * es;
  }
  reduce_slice(op.dtype, op.rop, ins.data(), op.n(), outs.data(), op.n(), s.hi - s.lo);
}

// --------------------------------------------------------------------------- reduce_scatter

TrafficCounts traffic_reduce_scatter(const CallArgs& a) {
  TrafficCounts t;
  if (a.out_count == 0) return t;
  const auto steps = static_cast<std::uint64_t>(a.n - 1);
  t.bytes_sent = t.bytes_received = steps * a.out_count * a.es;
  t.messages_sent = steps;
  return t;
}
std::string invalid_reduce_scatter(const CallArgs& a) {
  const Size nn = sz(a.n);
  if (a.in_count != nn * a.out_count)
    return "input has " + std::to_string(a.in_count) + " elements but must have group size " +
           std::to_string(a.n) + " x output size " + std::to_string(a.out_count) + " = " +
           std::to_string(nn * a.out_count);
  return disjoint(a);
}
Extent extent_reduce_scatter(ClusterState&, CollectiveOp& op) {  // S = the full input
  const Size m = op.part(0).out_count;
  return {double(m * dtype_bytes(op.dtype)) * op.n(), m * sz(op.n())};
}
void cut_reduce_scatter(CollectiveOp& op, Size chunk) {
  for (int d = 0; d < op.n(); ++d) add_slices(op.slices, d, 0, op.part(0).out_count, chunk);
}
void run_reduce_scatter(CollectiveOp& op, const Slice& s) {  // block a of every input -> a's out
  const Size es = dtype_bytes(op.dtype), m = op.part(s.a).out_count;
  std::vector<const unsigned char*> ins(sz(op.n()));
  for (int r = 0; r < op.n(); ++r) ins[sz(r)] = op.part(r).in + (sz(s.a) * m + s.lo) * es;
  unsigned char* out = op.part(s.a).out + s.lo * es;
  reduce_slice(op.dtype, op.rop, ins.data(), op.n(), &out, 1, s.hi - s.lo);
}

// ------------------------------------------------------------------------------- all_gather

TrafficCounts traffic_all_gather(const CallArgs& a) {
  TrafficCounts t;
  if (a.in_count == 0) return t;
  const auto steps = static_cast<std::uint64_t>(a.n - 1);
  t.bytes_sent = t.bytes_received = steps * a.in_count * a.es;
  t.messages_sent = steps;
  return t;
}
std::string invalid_all_gather(const CallArgs& a) {
  const Size nn = sz(a.n);
  if (a.out_count != nn * a.in_count)
    return "output has " + std::to_string(a.out_count) + " elements but must have group size " +
           std::to_string(a.n) + " x input size " + std::to_string(a.in_count) + " = " +
           std::to_string(nn * a.in_count);
  if (overlap(a.in, a.in_count * a.es, a.out, a.out_count * a.es) &&
      a.in != static_cast<const unsigned char*>(a.out) + sz(a.rank) * a.in_count * a.es)
    return "input overlaps the output other than exactly at this rank's slot; pass separate "
           "buffers or the slot";
  return "";
}
Extent extent_all_gather(ClusterState&, CollectiveOp& op) {  // S = the full output
  const Size m = op.part(0).in_count;
  return {double(m * dtype_bytes(op.dtype)) * op.n(), m * sz(op.n())};
}
void cut_all_gather(CollectiveOp& op, Size chunk) {
  for (int s = 0; s < op.n(); ++s) add_slices(op.slices, s, 0, op.part(0).in_count, chunk);
}
void run_all_gather(CollectiveOp& op, const Slice& s) {  // a's input -> slot a of every output
  const Size es = dtype_bytes(op.dtype), m = op.part(s.a).in_count, len = s.hi - s.lo;
  const unsigned char* src = op.part(s.a).in + s.lo * es;
  for (int r = 0; r < op.n(); ++r) {
    unsigned char* dst = op.part(r).out + (sz(s.a) * m + s.lo) * es;
    if (dst != src) std::memcpy(dst, src, len * es);
  }
}

// -------------------------------------------------------------------------------- broadcast

TrafficCounts traffic_broadcast(const CallArgs& a) {
  TrafficCounts t;
  if (a.in_count == 0) return t;
  const int pos = (a.rank - a.root + a.n) % a.n;  // place in the chain that starts at the root
  if (pos != a.n - 1) {
    t.bytes_sent = a.in_count * a.es;
    t.messages_sent = 1;
  }
  if (pos != 0) t.bytes_received = a.in_count * a.es;
  return t;
}
std::string invalid_broadcast(const CallArgs& a) {
  if (a.group) check_peer(*a.group, a.root, "broadcast root");  // throws its own message
  return "";
}
void cut_broadcast(CollectiveOp& op, Size chunk) {
  if (op.n() > 1) cut_whole(op, chunk);  // alone, the root already holds the data
}
void run_broadcast(CollectiveOp& op, const Slice& s) {
  const Size es = dtype_bytes(op.dtype), len = s.hi - s.lo;
  const unsigned char* src = op.part(op.root).out + s.lo * es;
  for (int r = 0; r < op.n(); ++r)
    if (r != op.root) std::memcpy(op.part(r).out + s.lo * es, src, len * es);
}

// ------------------------------------------------------------------------------- all_to_all

TrafficCounts traffic_all_to_all(const CallArgs& a) {
  TrafficCounts t;
  const Size m = a.in_count / sz(a.n);
  t.bytes_sent = (a.in_count - m) * a.es;
  t.bytes_received = (a.out_count - m) * a.es;
  t.messages_sent = a.in_count ? static_cast<std::uint64_t>(a.n - 1) : 0;
  return t;
}
std::string invalid_all_to_all(const CallArgs& a) {
  if (a.in_count != a.out_count)
    return "input has " + std::to_string(a.in_count) + " elements, output " +
           std::to_string(a.out_count) + "; they must be equal";
  if (a.in_count % sz(a.n) != 0)
    return "count " + std::to_string(a.in_count) + " is not divisible by group size " +
           std::to_string(a.n) + "; use all_to_all_v for uneven blocks";
  return disjoint(a);
}
Extent extent_all_to_all(ClusterState&, CollectiveOp& op) {  // S = what one member sends
  const Size in = op.part(0).in_count, m = in / sz(op.n());
  return {double((in - m) * dtype_bytes(op.dtype)), in * sz(op.n())};
}
void cut_all_to_all(CollectiveOp& op, Size chunk) {
  const Size m = op.part(0).in_count / sz(op.n());
  for (int d = 0; d < op.n(); ++d)
    for (int s = 0; s < op.n(); ++s) add_slices(op.slices, d, s, m, chunk);
}
void run_all_to_all(CollectiveOp& op, const Slice& s) {  // out_a[block b] = in_b[block a]
  const Size es = dtype_bytes(op.dtype), m = op.part(0).in_count / sz(op.n());
  std::memcpy(op.part(s.a).out + (sz(s.b) * m + s.lo) * es,
              op.part(s.b).in + (sz(s.a) * m + s.lo) * es, (s.hi - s.lo) * es);
}

// ----------------------------------------------------------------------------- all_to_all_v

TrafficCounts traffic_all_to_all_v(const CallArgs& a) {
  TrafficCounts t;
  for (int j = 0; j < a.n; ++j) {
    if (j == a.rank) continue;
    t.bytes_sent += a.send_counts[sz(j)] * a.es;
    t.bytes_received += a.recv_counts[sz(j)] * a.es;
    if (a.send_counts[sz(j)]) ++t.messages_sent;
  }
  return t;
}
/// Checks that senders and receivers agree, builds the offsets; S = the busiest member's bytes.
Extent extent_all_to_all_v(ClusterState& cluster, CollectiveOp& op) {
  const int n = op.n();
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const Size s = op.part(i).send_counts[sz(j)];
      const Size r = op.part(j).recv_counts[sz(i)];
      if (s != r) {
        mismatch(cluster, "all_to_all_v in group " + op.group->describe() + ": rank " +
                              std::to_string(i) + " sends " + std::to_string(s) +
                              " elements to rank " + std::to_string(j) + " but rank " +
                              std::to_string(j) + " expects " + std::to_string(r) + " from rank " +
                              std::to_string(i) +
                              "; send_counts[j] on rank i must equal recv_counts[i] on rank j");
      }
    }
  op.send_off.assign(sz(n), {});
  op.recv_off.assign(sz(n), {});
  Size busiest = 0, total = 0;
  for (int i = 0; i < n; ++i) {
    Size so = 0, ro = 0, sent = 0, recvd = 0;
    for (int j = 0; j < n; ++j) {
      op.send_off[sz(i)].push_back(so);
      op.recv_off[sz(i)].push_back(ro);
      so += op.part(i).send_counts[sz(j)];
      ro += op.part(i).recv_counts[sz(j)];
      if (j != i) {
        sent += op.part(i).send_counts[sz(j)];
        recvd += op.part(i).recv_counts[sz(j)];
      }
    }
    busiest = std::max({busiest, sent, recvd});
    total += so;
  }
  return {double(busiest * dtype_bytes(op.dtype)), total};
}
void cut_all_to_all_v(CollectiveOp& op, Size chunk) {
  for (int d = 0; d < op.n(); ++d)
    for (int s = 0; s < op.n(); ++s)
      add_slices(op.slices, d, s, op.part(d).recv_counts[sz(s)], chunk);
}
void run_all_to_all_v(CollectiveOp& op, const Slice& s) {  // out_a[from b] = in_b[to a]
  const Size es = dtype_bytes(op.dtype);
  const Size so = op.send_off[sz(s.b)][sz(s.a)], ro = op.recv_off[sz(s.a)][sz(s.b)];
  std::memcpy(op.part(s.a).out + (ro + s.lo) * es, op.part(s.b).in + (so + s.lo) * es,
              (s.hi - s.lo) * es);
}

// ---------------------------------------------------------------------------------- barrier

double time_barrier(int n, double alpha, double, double) {  // an all_reduce of nothing
  return 2.0 * (n - 1.0) * alpha;
}
TrafficCounts traffic_barrier(const CallArgs& a) {
  return {0, 0, 2 * static_cast<std::uint64_t>(a.n - 1)};
}

// ------------------------------------------------------------------------------------ split

/// Makes one group per colour, members ordered by (key, group rank); colour < 0 joins none.
Extent extent_split(ClusterState& cluster, CollectiveOp& op) {
  const int n = op.n();
  op.split_group.assign(sz(n), nullptr);
  op.split_rank.assign(sz(n), -1);
  std::map<int, std::vector<std::pair<int, int>>> colors;  // color -> (key, group rank)
  for (int r = 0; r < n; ++r)
    if (op.part(r).color >= 0) colors[op.part(r).color].push_back({op.part(r).key, r});
  for (auto& [color, ms] : colors) {
    std::sort(ms.begin(), ms.end());
    std::vector<int> globals;
    for (auto& m : ms) globals.push_back(op.group->members[sz(m.second)]);
    auto g = cluster.make_group(op.part(ms.front().second).name, globals);
    for (std::size_t i = 0; i < ms.size(); ++i) {
      op.split_group[sz(ms[i].second)] = g;
      op.split_rank[sz(ms[i].second)] = static_cast<int>(i);
    }
  }
  return {};
}

// ------------------------------------------------------------------------------------ table

// Rows in OpKind order (checked below). A new collective: a block of functions above and a row.
constexpr std::array kTable{
    Collective{.kind = OpKind::send, .name = "send", .bus_factor = factor_one},
    Collective{.kind = OpKind::recv, .name = "recv", .bus_factor = factor_one},
    Collective{.kind = OpKind::all_reduce,
               .name = "all_reduce",
               .entry = Entry::generic,
               .on_comm_stream = true,
               .same_dtype = true,
               .same_count = SameCount::in,
               .same_reduce_op = true,
               .bus_factor = factor_all_reduce,
               .seconds = time_all_reduce,
               .traffic = traffic_all_reduce,
               .prepare = extent_whole,
               .cut = cut_whole,
               .run = run_all_reduce},
    Collective{.kind = OpKind::reduce_scatter,
               .name = "reduce_scatter",
               .entry = Entry::generic,
               .on_comm_stream = true,
               .same_dtype = true,
               .same_count = SameCount::out,
               .same_reduce_op = true,
               .bus_factor = factor_ring,
               .seconds = time_ring,
               .traffic = traffic_reduce_scatter,
               .invalid = invalid_reduce_scatter,
               .prepare = extent_reduce_scatter,
               .cut = cut_reduce_scatter,
               .run = run_reduce_scatter},
    Collective{.kind = OpKind::all_gather,
               .name = "all_gather",
               .entry = Entry::generic,
               .on_comm_stream = true,
               .same_dtype = true,
               .same_count = SameCount::in,
               .bus_factor = factor_ring,
               .seconds = time_ring,
               .traffic = traffic_all_gather,
               .invalid = invalid_all_gather,
               .prepare = extent_all_gather,
               .cut = cut_all_gather,
               .run = run_all_gather},
    Collective{.kind = OpKind::broadcast,
               .name = "broadcast",
               .entry = Entry::generic,
               .on_comm_stream = true,
               .same_dtype = true,
               .same_count = SameCount::in,
               .same_root = true,
               .bus_factor = factor_one,
               .seconds = time_stream,
               .traffic = traffic_broadcast,
               .invalid = invalid_broadcast,
               .prepare = extent_whole,
               .cut = cut_broadcast,
               .run = run_broadcast},
    Collective{.kind = OpKind::all_to_all,
               .name = "all_to_all",
               .entry = Entry::generic,
               .on_comm_stream = true,
               .same_dtype = true,
               .same_count = SameCount::in,
               .bus_factor = factor_ring,
               .seconds = time_stream,
               .traffic = traffic_all_to_all,
               .invalid = invalid_all_to_all,
               .prepare = extent_all_to_all,
               .cut = cut_all_to_all,
               .run = run_all_to_all},
    Collective{.kind = OpKind::all_to_all_v,
               .name = "all_to_all_v",
               .entry = Entry::counts,
               .on_comm_stream = true,
               .same_dtype = true,
               .bus_factor = factor_ring,
               .seconds = time_stream,
               .traffic = traffic_all_to_all_v,
               .invalid = disjoint,
               .prepare = extent_all_to_all_v,
               .cut = cut_all_to_all_v,
               .run = run_all_to_all_v},
    Collective{.kind = OpKind::barrier,
               .name = "barrier",
               .entry = Entry::barrier,
               .on_comm_stream = true,
               .seconds = time_barrier,
               .traffic = traffic_barrier},
    Collective{
        .kind = OpKind::split, .name = "split", .entry = Entry::split, .prepare = extent_split},
};

constexpr bool in_kind_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i)
    if (kTable[i].kind != static_cast<OpKind>(i)) return false;
  return true;
}
static_assert(in_kind_order(), "kTable: row i must describe OpKind(i)");

}  // namespace

const Collective* find_collective(OpKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kTable.size() ? &kTable[i] : nullptr;
}

const Collective& collective(OpKind kind) {
  if (const Collective* c = find_collective(kind)) return *c;
  throw std::logic_error("operation kind " + std::to_string(static_cast<int>(kind)) +
                         " has no row in the collective table (runtime/src/collectives.cpp)");
}

std::size_t op_kind_count() { return kTable.size(); }

double collective_seconds(OpKind kind, int n, double alpha, double beta, double bytes) {
  const Collective& c = collective(kind);
  return n <= 1 || !c.seconds ? 0.0 : c.seconds(n, alpha, beta, bytes);
}

TrafficCounts ring_traffic(OpKind kind, const CallArgs& a) {
  const Collective& c = collective(kind);
  return a.n <= 1 || !c.traffic ? TrafficCounts{} : c.traffic(a);
}

std::string invalid_arguments(OpKind kind, const CallArgs& a) {
  const Collective& c = collective(kind);
  return c.invalid ? c.invalid(a) : "";
}

double bus_factor(OpKind kind, int n) {
  const Collective* c = find_collective(kind);
  return n <= 0 || !c || !c->bus_factor ? 0.0 : c->bus_factor(n);
}

bool overlap(const void* a, std::size_t abytes, const void* b, std::size_t bbytes) {
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return abytes && bbytes && x < y + bbytes && y < x + abytes;
}

}  // namespace mgpu::detail
