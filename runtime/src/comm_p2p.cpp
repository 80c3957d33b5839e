// Communicator basics, buffered point-to-point messages, split, and Request.
// A send copies its data into a Message when posted; the receiver copies it out in its own
// thread, so no rank ever reads another rank's buffers.
#include "isolation.hpp"
#include "state.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace mgpu {
namespace detail {

void check_peer(const Group& g, int peer, std::string_view op) {
  if (peer < 0 || peer >= g.size()) {
    throw std::invalid_argument(std::string(op) + ": peer " + std::to_string(peer) +
                                " is not a rank of group " + g.describe() + " (valid: 0.." +
                                std::to_string(g.size() - 1) +
                                "); peers are group ranks, use Comm::rank() numbering");
  }
}

namespace {

void check_tag(const Group& g, int tag, std::string_view op) {
  if (tag < 0) {
    throw std::invalid_argument(std::string(op) + " in group " + g.describe() + ": tag " +
                                std::to_string(tag) + " is negative; tags must be >= 0");
  }
}

struct SendOp final : Operation {
  double end = 0.0;
  std::string label;
  bool ready_locked() const override { return true; }
  std::string describe_locked() const override { return label; }
  void finish() override { owner->clock.wait_until(end, "wait " + label); }
};

}  // namespace

struct RecvOp final : Operation {
  std::shared_ptr<Group> group;
  int self_rank = 0;  // group rank of the receiver
  int peer = 0;
  int tag = 0;
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
  double posted_at = 0.0;
  std::shared_ptr<Message> msg;  // set under the lock when matched

  bool ready_locked() const override { return msg != nullptr; }
  std::string describe_locked() const override {
    std::ostringstream s;
    s << "recv from rank " << peer << " (global " << group->members[static_cast<std::size_t>(peer)]
      << ") tag " << tag << " in group " << group->describe() << ", " << count << " "
      << to_string(dtype) << " elements; no matching send has been posted";
    return s.str();
  }
  void finish() override {
    const Message& m = *msg;
    if (m.dtype != dtype || m.count != count) {
      std::ostringstream s;
      s << "recv from rank " << peer << " tag " << tag << " in group " << group->describe()
        << ": the message holds " << m.count << " " << to_string(m.dtype) << " elements but the "
        << "receive buffer holds " << count << " " << to_string(dtype)
        << " elements; post the receive with the size and type the sender sends";
      throw std::invalid_argument(s.str());
    }
    if (m.nbytes) std::memcpy(data, m.bytes.get(), m.nbytes);
    const double done = std::max(posted_at, m.ready);
    const std::string label =
        "recv from " + std::to_string(peer) + " tag " + std::to_string(tag) + " " + group->name;
    owner->clock.record_comm(Stream::recv, SpanKind::recv, label, posted_at, done);
    owner->clock.wait_until(done, "wait " + label);
    owner->traffic.record(
        OpKind::recv, group->name,
        {0, m.nbytes + static_cast<std::uint64_t>(std::llround(m.timing_bytes)), 0});
  }
  /// Withdraws the receive if no message has matched it yet, so that a rank which gives up on it
  /// (a failed wait, or a Request dropped while an exception unwinds) and carries on does not
  /// have a later message from the same peer and tag vanish into it. A message that has already
  /// matched stays consumed, as with MPI_Cancel on a completed receive.
  void cancel(Lock&) override {
    if (msg) return;
    auto& box = group->posted[static_cast<std::size_t>(self_rank)];
    // Expired entries go too: a receive whose Request died without cancelling can match nothing.
    std::erase_if(box, [this](const std::weak_ptr<RecvOp>& w) {
      const auto r = w.lock();
      return !r || r.get() == this;
    });
  }
};

RankState* deliver_locked(Group& group, int peer, std::shared_ptr<Message> msg) {
  RankState* receiver = nullptr;
  auto& posted = group.posted[static_cast<std::size_t>(peer)];
  // The first live receive for this sender and tag takes the message. The receiver's Request
  // still owns the op, so dropping `r` here (under the lock) never destroys it.
  for (auto it = posted.begin(); it != posted.end();) {
    const auto r = it->lock();
    if (!r) {  // its Request is gone; RecvOp::cancel normally erases it first
      it = posted.erase(it);
      continue;
    }
    if (r->peer == msg->src && r->tag == msg->tag) {
      r->msg = std::move(msg);
      receiver = r->owner;
      receiver->cluster->mark_awake_locked(*receiver);
      posted.erase(it);
      break;
    }
    ++it;
  }
  if (msg) group.unmatched[static_cast<std::size_t>(peer)].push_back(std::move(msg));
  return receiver;
}

}  // namespace detail

// ------------------------------------------------------------------------------------ Comm basics

void Comm::check_valid() const {
  if (!group_) {
    throw std::logic_error(
        "mgpu::Comm: this communicator is invalid (default-constructed, or from "
        "split() with a negative color); use one returned by Rank::world() or split()");
  }
}
int Comm::size() const { return group_ ? group_->size() : 0; }
const std::string& Comm::name() const {
  check_valid();
  return group_->name;
}
int Comm::global_rank(int group_rank) const {
  check_valid();
  detail::check_peer(*group_, group_rank, "Comm::global_rank");
  return group_->members[static_cast<std::size_t>(group_rank)];
}
const std::vector<int>& Comm::members() const {
  check_valid();
  return group_->members;
}
std::string Comm::describe() const {
  return group_ ? group_->describe() : std::string("<invalid comm>");
}

// ------------------------------------------------------------------------------------ send / recv

Request Comm::isend_raw(const void* data, std::size_t count, DType dtype, int peer, int tag) {
  check_valid();
  if (self_->remote)
    return detail::remote_isend(*self_->remote, *this, data, count, dtype, peer, tag);
  detail::check_peer(*group_, peer, "send");
  detail::check_tag(*group_, tag, "send");
  auto& self = *self_;
  auto& cluster = *self.cluster;
  cluster.check_abort(self);
  detail::settle_stream(self);  // sends queue behind earlier collectives on the comm stream

  auto msg = std::make_shared<detail::Message>();
  msg->src = rank_;
  msg->tag = tag;
  msg->dtype = dtype;
  msg->count = count;
  const std::size_t bytes = count * dtype_bytes(dtype);
  msg->nbytes = bytes;
  msg->bytes = std::make_unique_for_overwrite<unsigned char[]>(bytes);
  if (bytes) std::memcpy(msg->bytes.get(), data, bytes);

  auto [alpha, beta] = cluster.link(self.id, group_->members[static_cast<std::size_t>(peer)]);
  const double start = std::max(self.clock.now(), self.clock.comm_free());
  const double end = start + alpha + double(bytes) / beta;
  msg->ready = end;
  auto op = std::make_shared<detail::SendOp>();
  op->owner = &self;
  op->end = end;
  op->label =
      "send to " + std::to_string(peer) + " tag " + std::to_string(tag) + " " + group_->name;
  self.clock.record_comm(Stream::comm, SpanKind::send, op->label, start, end);
  self.traffic.record(OpKind::send, group_->name, {bytes, 0, 1});

  detail::RankState* receiver = nullptr;  // woken once the lock is released
  {
    detail::Lock lk(cluster.mu);
    receiver = detail::deliver_locked(*group_, peer, std::move(msg));
  }
  if (receiver) receiver->wake.notify_one();
  return Request(std::move(op));
}

Request Comm::irecv_raw(void* data, std::size_t count, DType dtype, int peer, int tag) {
  check_valid();
  if (self_->remote)
    return detail::remote_irecv(*self_->remote, *this, data, count, dtype, peer, tag);
  detail::check_peer(*group_, peer, "recv");
  detail::check_tag(*group_, tag, "recv");
  auto& self = *self_;
  auto& cluster = *self.cluster;
  cluster.check_abort(self);
  auto op = std::make_shared<detail::RecvOp>();
  op->owner = &self;
  op->group = group_;
  op->self_rank = rank_;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->count = count;
  op->dtype = dtype;
  op->posted_at = self.clock.now();
  detail::Lock lk(cluster.mu);
  auto& box = group_->unmatched[static_cast<std::size_t>(rank_)];
  auto it = std::find_if(box.begin(), box.end(),
                         [&](const auto& m) { return m->src == peer && m->tag == tag; });
  if (it != box.end()) {
    op->msg = std::move(*it);
    box.erase(it);
  } else {
    group_->posted[static_cast<std::size_t>(rank_)].push_back(op);
  }
  return Request(std::move(op));
}

// ------------------------------------------------------------------------------------ Request

Request::~Request() {
  if (!op_) return;
  if (op_->owner->remote) {
    detail::remote_drop(*op_, std::uncaught_exceptions() > 0);
    return;
  }
  auto& cluster = *op_->owner->cluster;
  if (std::uncaught_exceptions() > 0) {
    // The rank is unwinding: do not wait (that could block on ranks waiting for this one).
    detail::Lock lk(cluster.mu);
    if (op_->abandon_stops_run()) {
      cluster.abort_locked("rank " + std::to_string(op_->owner->id) +
                           " left a collective unfinished while handling an exception");
    }
    op_->cancel(lk);
    return;
  }
  const int id = op_->owner->id;
  try {
    wait();
  } catch (...) {
    detail::Lock lk(cluster.mu);
    cluster.record_error_locked(std::current_exception());
    cluster.abort_locked("rank " + std::to_string(id) +
                         " failed waiting for a request in its destructor");
  }
}

Request::Request(Request&& other) noexcept : op_(std::move(other.op_)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    Request old(std::move(*this));  // waited by its destructor
    op_ = std::move(other.op_);
  }
  return *this;
}

void Request::wait() {
  if (!op_) return;
  // Move the operation out first: if waiting throws, the destructor must not wait again.
  auto op = std::move(op_);
  if (op->owner->remote) {
    detail::remote_wait(*op);
    return;
  }
  op->owner->cluster->wait(*op);
}

bool Request::test() {
  if (!op_) return true;
  if (op_->owner->remote) {
    if (!detail::remote_test(*op_)) return false;
    op_.reset();
    return true;
  }
  auto& cluster = *op_->owner->cluster;
  {
    detail::Lock lk(cluster.mu);
    if (!cluster.test_locked(lk, *op_)) return false;
  }
  op_->finish();
  op_.reset();
  return true;
}

void wait_all(std::span<Request> requests) {
  for (auto& r : requests) r.wait();
}

}  // namespace mgpu
