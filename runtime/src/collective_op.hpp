// A collective as its members share it once they meet: their arguments, the slices of data
// work, and the virtual times. comm_collectives.cpp runs the rendezvous; the per-kind parts
// (sizes, slices, data movement) are rows of the table in collectives.cpp.
#pragma once

#include "collectives.hpp"
#include "state.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace mgpu::detail {

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
  const Collective* row = nullptr;  // collective(kind)
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
  Part& part(int r) { return parts[static_cast<std::size_t>(r)]; }
  std::string label() const { return std::string(row->name) + " " + group->name; }
  void run_slice(const Slice& s) { row->run(*this, s); }
};

/// Cuts [0, len) of block (a, b) into slices of at most `chunk` elements.
inline void add_slices(std::vector<Slice>& out, int a, int b, std::size_t len, std::size_t chunk) {
  for (std::size_t lo = 0; lo < len; lo += chunk)
    out.push_back({a, b, lo, std::min(len, lo + chunk)});
}

/// Records a CollectiveMismatch, stops the run and throws it. Lock held.
[[noreturn]] void mismatch(ClusterState& cluster, const std::string& message);

}  // namespace mgpu::detail
