// The table of operation kinds: one row describes a collective completely (name, how members
// post it, what they must agree on, its bus-bandwidth factor, ring time, ring traffic, the bytes
// the clock charges, how its work is cut into slices and how a slice runs). The rendezvous
// (comm_collectives.cpp), the traffic meter, the clock, the process boundary (isolation.cpp)
// and mgpu-bench read these rows; nothing else in the runtime switches on OpKind.
//
// Adding a collective: an OpKind value (mgpu/traffic.hpp), its typed entry point in
// mgpu/comm.hpp (which calls Comm::icollective), and one row in collectives.cpp. The test
// "every row of the collective table..." in runtime/tests/test_collective_table.cpp then checks
// the row's traffic and time against the ring model on a cluster (it asks for a way to call it).
#pragma once

#include "mgpu/traffic.hpp"
#include "mgpu/types.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace mgpu::detail {

struct ClusterState;
struct CollectiveOp;
struct Group;
struct Slice;

/// One member's arguments as it posts a call (before it knows the others').
struct CallArgs {
  const Group* group = nullptr;  ///< null in the table test: no peer check there
  int n = 1;                     ///< group size
  int rank = 0;                  ///< this member's group rank
  int root = 0;
  const void* in = nullptr;
  const void* out = nullptr;
  std::size_t in_count = 0, out_count = 0;                ///< elements
  std::size_t es = 4;                                     ///< bytes per element
  std::span<const std::size_t> send_counts, recv_counts;  ///< all_to_all_v only
};

/// What the clock charges and how much work there is, once every member has arrived.
struct Extent {
  double bytes = 0.0;        ///< S of Collective::seconds
  std::size_t elements = 0;  ///< elements moved in all, to size the slices
};

/// Which Comm entry point posts an operation (and so which frame carries it between processes).
enum class Entry {
  point_to_point,  ///< isend / irecv: not a rendezvous
  generic,         ///< Comm::icollective (in, out, counts, dtype, reduce op, root)
  counts,          ///< Comm::icollective_v (per-peer counts)
  barrier,         ///< Comm::ibarrier
  split,           ///< Comm::split
};

/// Which count every member must pass alike.
enum class SameCount { none, in, out };

/// One row of the table, written with designated initializers: what a kind lacks stays at its
/// default (no agreement asked, zero factor and time, no traffic, no data work).
struct Collective {
  OpKind kind = OpKind::barrier;
  std::string_view name;  ///< to_string(kind): the meter's key, mgpu-bench's --ops name
  Entry entry = Entry::point_to_point;
  /// A rendezvous that queues on the comm stream and takes virtual time (all but split).
  bool on_comm_stream = false;
  // What members must agree on, beyond the kind (the mismatch check).
  bool same_dtype = false;
  SameCount same_count = SameCount::none;
  bool same_root = false;
  bool same_reduce_op = false;
  /// nccl-tests bus-bandwidth factor for n >= 1 ranks (bus_bandwidth_factor).
  double (*bus_factor)(int n) = nullptr;
  /// Virtual seconds on n >= 2 ranks whose slowest link has latency alpha and bandwidth beta,
  /// for Extent::bytes = `bytes`.
  double (*seconds)(int n, double alpha, double beta, double bytes) = nullptr;
  /// What a ring algorithm moves for one member, n >= 2.
  TrafficCounts (*traffic)(const CallArgs& a) = nullptr;
  /// Why one member's arguments are invalid, or "" (a bad root throws its own message).
  std::string (*invalid)(const CallArgs& a) = nullptr;
  /// Once all have arrived, under the lock: cross-member checks (may call mismatch()), shared
  /// bookkeeping, and the extent.
  Extent (*prepare)(ClusterState& cluster, CollectiveOp& op) = nullptr;
  /// Cuts the data work into op.slices of at most `chunk` elements.
  void (*cut)(CollectiveOp& op, std::size_t chunk) = nullptr;
  /// Moves and reduces the data of one slice (any member's thread, lock not held).
  void (*run)(CollectiveOp& op, const Slice& s) = nullptr;
};

/// The row of `kind`. @throws std::logic_error for a kind without a row.
const Collective& collective(OpKind kind);
/// The row of `kind`, or null.
const Collective* find_collective(OpKind kind);
/// Number of OpKind values, all with rows: OpKind(0) .. OpKind(op_kind_count() - 1).
std::size_t op_kind_count();

/// Virtual seconds of `kind` on n ranks (0 for n <= 1), from its row.
double collective_seconds(OpKind kind, int n, double alpha, double beta, double bytes);
/// Traffic of one member's call of `kind` (zeros for n <= 1), from its row.
TrafficCounts ring_traffic(OpKind kind, const CallArgs& a);
/// Why one member's arguments to `kind` are invalid, or "", from its row.
std::string invalid_arguments(OpKind kind, const CallArgs& a);
/// The bus-bandwidth factor of `kind` on n ranks (0 for n <= 0 or a kind without a row).
double bus_factor(OpKind kind, int n);

/// Whether [a, a + abytes) and [b, b + bbytes) share a byte.
bool overlap(const void* a, std::size_t abytes, const void* b, std::size_t bbytes);

}  // namespace mgpu::detail
