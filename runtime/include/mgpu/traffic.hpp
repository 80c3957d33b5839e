// Per-rank traffic meter: bytes and messages, per operation kind and per group name,
// with the nccl-tests convention for what a collective costs each rank, and the ring's chunks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mgpu {

/// Kinds of communication operation (keys of the traffic meter and of mismatch checks).
enum class OpKind {
  send,            ///< point-to-point send
  recv,            ///< point-to-point receive
  all_reduce,      ///< Comm::all_reduce
  reduce_scatter,  ///< Comm::reduce_scatter
  all_gather,      ///< Comm::all_gather
  broadcast,       ///< Comm::broadcast
  all_to_all,      ///< Comm::all_to_all (equal counts)
  all_to_all_v,    ///< Comm::all_to_all_v (per-peer counts)
  barrier,         ///< Comm::barrier
  split,           ///< Comm::split (no traffic, but a collective call)
};

/// Lower-case name, e.g. "all_reduce"; also the key used by TrafficMeter::by_op().
std::string_view to_string(OpKind kind);

/// The kind whose to_string() is `name`, or nullopt: the inverse of to_string.
std::optional<OpKind> op_kind_named(std::string_view name);

/// Bus-bandwidth factor of nccl-tests: busbw = algbw * factor, where algbw = S / time and S is
/// the buffer size nccl-tests reports (the full buffer for all_reduce, the full gathered/scattered
/// buffer for all_gather/reduce_scatter, the per-rank buffer for all_to_all and broadcast).
/// all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all (n-1)/n; broadcast, send, recv 1;
/// barrier and split 0. It is also the fraction of S each rank sends under the ring accounting.
double bus_bandwidth_factor(OpKind kind, int n);

/// A contiguous piece of a buffer: elements [offset, offset + count).
struct Chunk {
  std::size_t offset = 0;  ///< first element
  std::size_t count = 0;   ///< number of elements (may be 0)
};

/// Chunk `index` of a buffer of `length` elements split over `ranks` ranks.
///
/// Chunk sizes differ by at most one: the first length % ranks chunks get one element more
/// than the rest. Chunks are in order and cover the buffer exactly, e.g. length 10 over 4 ranks
/// gives sizes 3, 3, 2, 2. The split of every ring collective, the runtime's and 11.2's.
/// @throws std::invalid_argument when ranks < 1 or index is outside [0, ranks).
inline Chunk ring_chunk(std::size_t length, int ranks, int index) {
  if (ranks < 1)
    throw std::invalid_argument("ring_chunk: ranks = " + std::to_string(ranks) +
                                " must be at least 1");
  if (index < 0 || index >= ranks) {
    throw std::invalid_argument("ring_chunk: index " + std::to_string(index) + " is outside [0, " +
                                std::to_string(ranks) + ")");
  }
  const auto n = static_cast<std::size_t>(ranks), i = static_cast<std::size_t>(index);
  const std::size_t base = length / n, extra = length % n;
  return Chunk{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

/// Counters of one slice of traffic.
struct TrafficCounts {
  std::uint64_t bytes_sent = 0;      ///< bytes this rank put on links
  std::uint64_t bytes_received = 0;  ///< bytes this rank took off links
  std::uint64_t messages_sent = 0;   ///< messages (ring steps for collectives)
  /// Adds another set of counters.
  TrafficCounts& operator+=(const TrafficCounts& other);
  /// Field-wise equality.
  bool operator==(const TrafficCounts&) const = default;
};

/// What one rank sent and received, in total, per op kind and per group name.
///
/// Owned by one rank's thread. Collectives are charged what a ring algorithm moves per rank
/// (see runtime/README.md): all_reduce of S bytes over n ranks sends and receives 2(n-1)/n*S,
/// reduce_scatter and all_gather (n-1)/n of the full buffer, all_to_all everything except the
/// block a rank keeps, broadcast S to every rank but the root and S from every rank but the last
/// in the ring that starts at the root. Point-to-point charges the message size.
class TrafficMeter {
 public:
  /// Adds traffic of operation `kind` in the group named `group` (e.g. "world", "tp").
  void record(OpKind kind, std::string_view group, const TrafficCounts& counts);

  /// All traffic of this rank.
  const TrafficCounts& total() const { return total_; }
  /// Traffic of one op kind (all groups); zeros if none.
  TrafficCounts op(OpKind kind) const;
  /// Traffic in groups with this name (all op kinds); zeros if none.
  TrafficCounts group(std::string_view name) const;
  /// Traffic of one op kind in groups with one name; zeros if none.
  TrafficCounts of(OpKind kind, std::string_view group) const;
  /// Per op kind, keyed by to_string(kind).
  const std::map<std::string, TrafficCounts, std::less<>>& by_op() const { return by_op_; }
  /// Per group name.
  const std::map<std::string, TrafficCounts, std::less<>>& by_group() const { return by_group_; }
  /// Forgets everything recorded, so a phase can be measured on its own.
  void reset();

 private:
  TrafficCounts total_;
  std::map<std::string, TrafficCounts, std::less<>> by_op_;
  std::map<std::string, TrafficCounts, std::less<>> by_group_;
  std::map<std::string, TrafficCounts, std::less<>> by_op_group_;  // "op/group"
};

}  // namespace mgpu
