// Group communicators of the simulated cluster: point-to-point messages and collectives
// over float, double and bf16, with deterministic results and ring-model cost accounting.
#pragma once

#include "mgpu/traffic.hpp"
#include "mgpu/types.hpp"

#include <cstddef>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace mgpu {

namespace detail {
struct Operation;
struct Group;
struct RankState;
struct ClusterState;
struct RankProxy;
struct RemoteLink;
}  // namespace detail

/// A contiguous range of float, double or bf16 that can be read: std::span<const T>,
/// std::vector<T>, mgpu::Buffer<T>, std::array<T, N>, ...
template <class R>
concept ElementRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    Element<std::remove_cv_t<std::ranges::range_value_t<R>>>;

/// An ElementRange that can also be written: std::span<T>, std::vector<T>&, Buffer<T>&, ...
template <class R>
concept MutableElementRange =
    ElementRange<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;

/// Handle to a non-blocking operation (isend, irecv, iall_reduce, ...).
///
/// Move-only. The buffers given to the operation must stay alive and untouched until wait()
/// returns. A Request destroyed without wait() is waited in its destructor, so data and clock
/// stay consistent; an error raised there is not thrown from the destructor but is reported by
/// Cluster::run (the run fails). A Request destroyed while an exception unwinds the rank does not
/// wait. For an unfinished collective it stops the run instead, so no other rank touches buffers
/// that are being freed. A receive that no message has matched yet is withdrawn, here or when
/// wait() or test() throws, so a rank that catches the error and carries on gets later messages
/// from that peer and tag in its later receives.
class Request {
 public:
  /// An empty request; wait() and test() return at once.
  Request() = default;
  /// Waits (see class comment) unless already waited or empty.
  ~Request();
  /// Takes over `other`'s operation; `other` becomes empty.
  Request(Request&& other) noexcept;
  /// Waits for this request's operation (as the destructor does), then takes over `other`'s.
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  /// Blocks until the operation is complete and its data is in place, then advances the rank's
  /// virtual clock to the completion time (recording an idle span if that is later than now).
  /// Throws DeadlockError / RankStopped (cluster.hpp) if the run cannot continue, and
  /// std::invalid_argument for a receive whose message does not fit the buffer.
  void wait();
  /// True if the operation is complete; it is then finished exactly as wait() would (data in
  /// place, virtual clock advanced). Never waits for another rank, but may do a share of a
  /// collective's data copying. A loop on test() that can never succeed is not detected as a
  /// deadlock (the rank is running, not blocked), so prefer wait().
  bool test();
  /// True for an empty request or one already waited.
  bool done() const { return op_ == nullptr; }

 private:
  friend class Comm;
  friend struct detail::RankProxy;
  friend struct detail::RemoteLink;
  explicit Request(std::shared_ptr<detail::Operation> op) : op_(std::move(op)) {}
  std::shared_ptr<detail::Operation> op_;
};

/// Waits for every request in order.
void wait_all(std::span<Request> requests);

/// A communicator: an ordered group of ranks as seen from one member (like an MPI or NCCL
/// communicator). Rank::world() gives the group of all ranks; split() makes sub-groups.
///
/// A Comm is a cheap handle, used only from the thread of the rank it belongs to.
///
/// Point-to-point: sends are buffered (the data is copied when posted, and the sender never
/// waits for the receiver), so "everyone sends, then everyone receives" rings do not deadlock;
/// two ranks that both receive first do, and the run ends with a DeadlockError. Messages between
/// a pair of ranks with the same tag arrive in the order sent.
///
/// Collectives: every member must call the same collectives in the same order with matching
/// arguments (op, element count, dtype, root, reduce op); a mismatch fails every member with
/// a CollectiveMismatch naming the ranks and the difference. Reductions combine contributions in
/// group-rank order 0, 1, ..., n-1, so results are bitwise identical on every rank and every run;
/// bf16 accumulates in float and rounds once.
///
/// Cost: see the runtime README for the virtual-time model and the traffic charged per rank.
class Comm {
 public:
  /// An invalid communicator (size 0); every call but valid() throws std::logic_error.
  Comm() = default;

  /// True if this handle refers to a group.
  bool valid() const { return group_ != nullptr; }
  /// This rank's index in the group, 0..size()-1.
  int rank() const { return rank_; }
  /// Number of ranks in the group.
  int size() const;
  /// Group name given at split() ("world" for Rank::world()); the key for per-group traffic.
  const std::string& name() const;
  /// Global rank (Rank::id) of group rank `group_rank`.
  int global_rank(int group_rank) const;
  /// Global ranks of all members, in group-rank order.
  const std::vector<int>& members() const;
  /// Name with members, e.g. "tp{0,1,2,3}", as used in error messages.
  std::string describe() const;

  /// Collective over this group (like MPI_Comm_split / ncclCommSplit): ranks with the same
  /// `color` form a new group named `name`, ordered by (`key`, rank in this group). A negative
  /// color joins no group and returns an invalid Comm. Several groups may share a name (all
  /// tensor-parallel groups are usually "tp"); traffic is then summed under that name.
  Comm split(int color, int key, std::string name);

  // ---------------------------------------------------------------- point-to-point

  /// Posts a send of `data` to group rank `peer` with `tag` >= 0 and returns at once. The data
  /// is copied now; the send occupies the comm stream for latency + bytes / link bandwidth.
  template <ElementRange R>
  Request isend(const R& data, int peer, int tag = 0) {
    return isend_raw(std::ranges::data(data), std::ranges::size(data), dtype_of_range<R>(), peer,
                     tag);
  }
  /// Posts a receive into `data` from group rank `peer` with `tag`. The message must hold
  /// exactly data.size() elements of the same dtype. Completes at max(post time, message arrival).
  template <MutableElementRange R>
  Request irecv(R&& data, int peer, int tag = 0) {
    return irecv_raw(std::ranges::data(data), std::ranges::size(data), dtype_of_range<R>(), peer,
                     tag);
  }
  /// Blocking send: isend(...).wait(). Returns when the message has left (virtual time).
  template <ElementRange R>
  void send(const R& data, int peer, int tag = 0) {
    isend(data, peer, tag).wait();
  }
  /// Blocking receive: irecv(...).wait().
  template <MutableElementRange R>
  void recv(R&& data, int peer, int tag = 0) {
    irecv(std::forward<R>(data), peer, tag).wait();
  }

  // ---------------------------------------------------------------- collectives

  /// In place: every rank's `data` becomes the element-wise reduction over ranks. Any length,
  /// 0 included. Charged 2(n-1)/n of the buffer per rank, sent and received.
  template <MutableElementRange R>
  Request iall_reduce(R&& data, ReduceOp op = ReduceOp::sum) {
    auto* p = std::ranges::data(data);
    return icollective(OpKind::all_reduce, p, p, std::ranges::size(data), std::ranges::size(data),
                       dtype_of_range<R>(), op, 0);
  }
  /// Rank r's `out` (m elements) becomes the reduction over ranks of their `in[r*m, (r+1)*m)`;
  /// requires in.size() == n * out.size(). `in` and `out` must not overlap.
  template <ElementRange In, MutableElementRange Out>
  Request ireduce_scatter(const In& in, Out&& out, ReduceOp op = ReduceOp::sum) {
    same_dtype<In, Out>();
    return icollective(OpKind::reduce_scatter, std::ranges::data(in), std::ranges::data(out),
                       std::ranges::size(in), std::ranges::size(out), dtype_of_range<In>(), op, 0);
  }
  /// Every rank's `out` becomes the concatenation of all ranks' `in` in rank order; requires
  /// out.size() == n * in.size(). `in` may be exactly this rank's slot of `out` (in place).
  template <ElementRange In, MutableElementRange Out>
  Request iall_gather(const In& in, Out&& out) {
    same_dtype<In, Out>();
    return icollective(OpKind::all_gather, std::ranges::data(in), std::ranges::data(out),
                       std::ranges::size(in), std::ranges::size(out), dtype_of_range<In>(),
                       ReduceOp::sum, 0);
  }
  /// Every rank's `data` becomes group rank `root`'s `data`.
  template <MutableElementRange R>
  Request ibroadcast(R&& data, int root) {
    auto* p = std::ranges::data(data);
    return icollective(OpKind::broadcast, p, p, std::ranges::size(data), std::ranges::size(data),
                       dtype_of_range<R>(), ReduceOp::sum, root);
  }
  /// Block j of rank i's `in` becomes block i of rank j's `out`; blocks are in.size()/n elements.
  /// Requires in.size() == out.size(), divisible by n, and no overlap between `in` and `out`.
  template <ElementRange In, MutableElementRange Out>
  Request iall_to_all(const In& in, Out&& out) {
    same_dtype<In, Out>();
    return icollective(OpKind::all_to_all, std::ranges::data(in), std::ranges::data(out),
                       std::ranges::size(in), std::ranges::size(out), dtype_of_range<In>(),
                       ReduceOp::sum, 0);
  }
  /// Like all_to_all with per-peer counts: `in` holds send_counts[0] elements for rank 0, then
  /// send_counts[1] for rank 1, ...; `out` receives recv_counts[j] elements from rank j, in rank
  /// order. Rank i's send_counts[j] must equal rank j's recv_counts[i]; both count arrays have
  /// n entries and their sums must equal in.size() and out.size(). No overlap of in and out.
  template <ElementRange In, MutableElementRange Out>
  Request iall_to_all_v(const In& in, std::span<const std::size_t> send_counts, Out&& out,
                        std::span<const std::size_t> recv_counts) {
    same_dtype<In, Out>();
    return icollective_v(std::ranges::data(in), std::ranges::size(in), send_counts,
                         std::ranges::data(out), std::ranges::size(out), recv_counts,
                         dtype_of_range<In>());
  }
  /// Completes once every member has posted it.
  Request ibarrier();

  /// Blocking iall_reduce.
  template <MutableElementRange R>
  void all_reduce(R&& data, ReduceOp op = ReduceOp::sum) {
    iall_reduce(std::forward<R>(data), op).wait();
  }
  /// Blocking ireduce_scatter.
  template <ElementRange In, MutableElementRange Out>
  void reduce_scatter(const In& in, Out&& out, ReduceOp op = ReduceOp::sum) {
    ireduce_scatter(in, std::forward<Out>(out), op).wait();
  }
  /// Blocking iall_gather.
  template <ElementRange In, MutableElementRange Out>
  void all_gather(const In& in, Out&& out) {
    iall_gather(in, std::forward<Out>(out)).wait();
  }
  /// Blocking ibroadcast.
  template <MutableElementRange R>
  void broadcast(R&& data, int root) {
    ibroadcast(std::forward<R>(data), root).wait();
  }
  /// Blocking iall_to_all.
  template <ElementRange In, MutableElementRange Out>
  void all_to_all(const In& in, Out&& out) {
    iall_to_all(in, std::forward<Out>(out)).wait();
  }
  /// Blocking iall_to_all_v.
  template <ElementRange In, MutableElementRange Out>
  void all_to_all_v(const In& in, std::span<const std::size_t> send_counts, Out&& out,
                    std::span<const std::size_t> recv_counts) {
    iall_to_all_v(in, send_counts, std::forward<Out>(out), recv_counts).wait();
  }
  /// Blocking ibarrier.
  void barrier() { ibarrier().wait(); }

  // ---------------------------------------------------------------- timing only
  // Operations that cost virtual time and are metered like their data versions but carry no
  // buffers: a byte count and a group, nothing allocated or copied. For simulating the
  // schedule of a model far larger than this machine's memory (mgpu plan --simulate). Their
  // lane is the comm stream when every rank involved shares a node, else the network lane
  // (Stream::network), so in-server and cross-server traffic do not queue behind each other.
  // Thread ranks only: with RankIsolation::processes they throw std::logic_error.

  /// Posts a message of `bytes` bytes (finite, >= 0) to group rank `peer` with `tag` >= 0 and
  /// returns at once. It occupies its lane for latency + bytes / bandwidth of the link, from
  /// max(now, lane free); the meter charges `bytes` (rounded) sent. Matched by irecv_timing
  /// with the same peer and tag (or a receive of zero f32 elements).
  Request isend_timing(double bytes, int peer, int tag = 0);
  /// Posts the receive of an isend_timing from group rank `peer` with `tag`; completes at
  /// max(post time, arrival) and charges the message's bytes received.
  Request irecv_timing(int peer, int tag = 0);
  /// A collective of `kind` (all_reduce, reduce_scatter, all_gather, broadcast or barrier)
  /// over S = `bytes` (as in the README's cost table) that moves nothing. Every member must
  /// call the same timing-only collectives in the same order with the same kind and bytes
  /// (else CollectiveMismatch); they are matched among themselves, apart from the data
  /// collectives. It starts when the last member has posted it and its lane is free, lasts
  /// what the data collective of S bytes would, and charges the same traffic. A later
  /// timing-only post on the rank waits until the start is known. Do not post a data
  /// collective while a timing-only one is unfinished.
  Request icollective_timing(OpKind kind, double bytes);

 private:
  friend class Rank;
  friend struct detail::RankState;
  friend struct detail::ClusterState;
  friend struct detail::RankProxy;
  friend struct detail::RemoteLink;
  Comm(std::shared_ptr<detail::Group> group, detail::RankState* self, int rank)
      : group_(std::move(group)), self_(self), rank_(rank) {}

  template <class R>
  static constexpr DType dtype_of_range() {
    return dtype_of<std::remove_cv_t<std::ranges::range_value_t<R>>>;
  }
  template <class A, class B>
  static constexpr void same_dtype() {
    static_assert(dtype_of_range<A>() == dtype_of_range<B>(),
                  "mgpu::Comm: input and output ranges must have the same element type");
  }

  Request isend_raw(const void* data, std::size_t count, DType dtype, int peer, int tag);
  Request irecv_raw(void* data, std::size_t count, DType dtype, int peer, int tag);
  Request icollective(OpKind kind, const void* in, void* out, std::size_t in_count,
                      std::size_t out_count, DType dtype, ReduceOp op, int root);
  Request icollective_v(const void* in, std::size_t in_count,
                        std::span<const std::size_t> send_counts, void* out, std::size_t out_count,
                        std::span<const std::size_t> recv_counts, DType dtype);
  void check_valid() const;

  std::shared_ptr<detail::Group> group_;
  detail::RankState* self_ = nullptr;
  int rank_ = -1;
  int remote_id_ = 0;  // in a rank's own process: the proxy's number for this group (world: 0)
};

}  // namespace mgpu
