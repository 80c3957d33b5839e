// Ranks in processes. The trusted process (the one that called Cluster::run) keeps the whole
// cluster: it runs today's threaded run, but each rank's thread is a proxy that serves requests
// from the rank's own process. The rank process is forked for the run and keeps only its own
// arena (shared memory both sides map) and its end of a socketpair (no descriptor its parent
// marked close-on-exec, such as a grader's result pipe); the payload of every operation
// is staged in the arena, and the proxy makes the real runtime call on its own mapping of it. So
// the meter counts what the trusted side moved, the ledger and clock are the trusted side's,
// deadlock detection sees the proxies block in the real runtime, and what a rank publishes is
// read out of its arena by the trusted side.
#include "isolation.hpp"

#include "collectives.hpp"

#include "mgpu/not_implemented.hpp"
#include "mgpu/type_name.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cxxabi.h>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <new>
#include <system_error>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace mgpu::detail {

std::string type_name(const std::type_info& t) {
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : t.name();
  std::free(d);
  return s;
}

namespace {

// ------------------------------------------------------------------------------------ wire

/// What a rank process asks of its proxy. The calls marked "reply" wait for an answer.
enum class Call : std::uint8_t {
  allocate,      // category, bytes, label
  release,       // category, bytes
  reset_peaks,   //
  compute,       // seconds, label
  now,           // reply: now
  publish,       // name, offset, count, dtype; reply
  isend,         // comm, offset, count, dtype, peer, tag; reply: request id
  irecv,         // comm, offset, count, dtype, peer, tag; reply: request id
  collective,    // comm, kind, dtype, op, root, in offset, in count, out offset, out count; reply
  collective_v,  // comm, dtype, in offset, in count, out offset, out count, n, counts; reply
  split,         // comm, color, key, name; reply: comm id, group rank, name, members
  wait,          // request; reply
  test,          // request; reply: done
  drop,          // request, unwinding; reply unless unwinding
  checkpoint,    // name
  finished,      // the body returned
  failed,        // fault, type, message: the body threw
  count_
};

/// The exception types that cross the link with their type intact.
enum class Fault : std::uint8_t {
  none,
  not_implemented,
  deadlock,
  mismatch,
  stopped,
  out_of_memory,
  invalid_argument,
  out_of_range,
  logic_error,
  runtime_error,
  bad_alloc,
  count_
};

/// The largest frame a rank may send: all_to_all_v counts of 1,024 ranks are 16 KiB.
constexpr std::uint32_t kMaxFrame = 1u << 20;
/// Staged regions start on this boundary, so a rank's data keeps its alignment in the arena.
constexpr std::size_t kStageAlign = 64;

/// A request the proxy refuses to serve: the rank process broke the protocol (or tampered with
/// it). It fails the rank instead of being answered.
class Malformed : public std::runtime_error {
 public:
  explicit Malformed(const std::string& what)
      : std::runtime_error("the process of a rank sent a malformed request: " + what) {}
};

class Writer {
 public:
  template <class T>
  Writer& put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  Writer& str(std::string_view s) {
    put<std::uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  const std::vector<unsigned char>& bytes() const { return b_; }

 private:
  std::vector<unsigned char> b_;
};

class Reader {
 public:
  explicit Reader(const std::vector<unsigned char>& b) : p_(b.data()), end_(b.data() + b.size()) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (static_cast<std::size_t>(end_ - p_) < sizeof(T)) throw Malformed("truncated");
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  /// An enum whose values are below `limit`.
  template <class E>
  E get_enum(E limit) {
    using U = std::underlying_type_t<E>;
    const U v = get<U>();
    bool bad = v >= static_cast<U>(limit);
    if constexpr (std::is_signed_v<U>) bad = bad || v < 0;
    if (bad) throw Malformed("an unknown enum value");
    return static_cast<E>(v);
  }
  std::string str() {
    const auto n = get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(end_ - p_)) throw Malformed("a string runs past the frame");
    std::string s(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return s;
  }

 private:
  const unsigned char* p_;
  const unsigned char* end_;
};

/// Writes all of `n` bytes; false when the other side has gone.
bool write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool send_frame(int fd, const Writer& w) {
  const auto& b = w.bytes();
  const auto n = static_cast<std::uint32_t>(b.size());
  return write_all(fd, &n, sizeof n) && write_all(fd, b.data(), b.size());
}

enum class ReadResult { frame, closed, aborted };

/// Reads exactly `n` bytes. `stop()` is asked every 50 ms while nothing arrives; when it says
/// so, gives up with `aborted`.
template <class Stop>
ReadResult read_exact(int fd, void* data, std::size_t n, Stop&& stop) {
  auto* p = static_cast<unsigned char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 50);
    if (ready < 0 && errno != EINTR) return ReadResult::closed;
    if (ready <= 0) {
      if (stop()) return ReadResult::aborted;
      continue;
    }
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return ReadResult::closed;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return ReadResult::frame;
}

template <class Stop>
ReadResult read_frame(int fd, std::vector<unsigned char>& out, Stop&& stop) {
  std::uint32_t n = 0;
  if (auto r = read_exact(fd, &n, sizeof n, stop); r != ReadResult::frame) return r;
  if (n > kMaxFrame) throw Malformed("a frame of " + std::to_string(n) + " bytes");
  out.resize(n);
  return read_exact(fd, out.data(), n, stop);
}

/// Writes the exception being handled as (fault, type, message).
void put_current_exception(Writer& w) {
  Fault f = Fault::runtime_error;
  std::string type = "unknown", what = "an exception that is not a std::exception";
  try {
    throw;
  } catch (const NotImplemented& e) {
    f = Fault::not_implemented, what = e.what();
  } catch (const DeadlockError& e) {
    f = Fault::deadlock, what = e.what();
  } catch (const CollectiveMismatch& e) {
    f = Fault::mismatch, what = e.what();
  } catch (const RankStopped& e) {
    f = Fault::stopped, what = e.what();
  } catch (const OutOfMemory& e) {
    f = Fault::out_of_memory, what = e.what();
  } catch (const std::invalid_argument& e) {
    f = Fault::invalid_argument, what = e.what();
  } catch (const std::out_of_range& e) {
    f = Fault::out_of_range, what = e.what();
  } catch (const std::bad_alloc& e) {
    f = Fault::bad_alloc, what = e.what();
  } catch (const std::exception& e) {
    // Any other type keeps its message; the family (logic or runtime) is kept when it is known.
    f = dynamic_cast<const std::logic_error*>(&e) ? Fault::logic_error : Fault::runtime_error;
    type = type_name(typeid(e));
    what = e.what();
  } catch (...) {
  }
  w.put(f).str(type).str(what);
}

/// Throws the exception that put_current_exception wrote.
[[noreturn]] void throw_fault(Fault f, const std::string& type, const std::string& what) {
  switch (f) {
    case Fault::not_implemented: {
      const std::string prefix = "not implemented: ";
      throw NotImplemented(what.starts_with(prefix) ? what.substr(prefix.size()) : what);
    }
    case Fault::deadlock:
      throw DeadlockError(what);
    case Fault::mismatch:
      throw CollectiveMismatch(what);
    case Fault::stopped:
      throw RankStopped(what);
    case Fault::out_of_memory:
      throw OutOfMemory(what);
    case Fault::invalid_argument:
      throw std::invalid_argument(what);
    case Fault::out_of_range:
      throw std::out_of_range(what);
    case Fault::bad_alloc:
      throw std::bad_alloc();
    case Fault::logic_error:
      throw std::logic_error(type == "unknown" ? what : type + ": " + what);
    default:
      throw std::runtime_error(type == "unknown" ? what : type + ": " + what);
  }
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended";
}

/// First-fit allocator of staging regions in a rank's arena, by offset.
class Staging {
 public:
  explicit Staging(std::size_t bytes) {
    if (bytes > 0) free_[0] = bytes;
  }
  /// Offset of a free region of at least `n` bytes (never 0 bytes, so every region is distinct).
  std::size_t take(std::size_t n, int rank, std::size_t arena_bytes) {
    const std::size_t want =
        std::max(kStageAlign, (n + kStageAlign - 1) / kStageAlign * kStageAlign);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < want) continue;
      const std::size_t off = it->first, len = it->second;
      free_.erase(it);
      if (len > want) free_[off + want] = len - want;
      return off;
    }
    throw std::runtime_error("rank " + std::to_string(rank) +
                             ": the operations in flight need more than the " +
                             std::to_string(arena_bytes) + " bytes of its arena (this one " +
                             std::to_string(n) + " bytes); raise ClusterConfig::rank_arena_bytes");
  }
  void give(std::size_t off, std::size_t n) {
    const std::size_t len =
        std::max(kStageAlign, (n + kStageAlign - 1) / kStageAlign * kStageAlign);
    auto it = free_.emplace(off, len).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

 private:
  std::map<std::size_t, std::size_t> free_;
};

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

/// One rank's channel, made before the fork: the arena and both ends of the socket.
struct Channel {
  int proxy_fd = -1;  // the trusted side's end
  int rank_fd = -1;   // the rank process's end
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;
  unsigned char* arena = nullptr;  // shared with the rank process, which unmaps all others
  int arena_fd = -1;  // a rank program's arena (a memory file: a mapping does not survive exec)
  std::vector<unsigned char> start;  // a rank program's first message: who it is, its input
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

// ------------------------------------------------------------------------------------ rank side

/// The rank process's end of its link: the socket, its own mapping of its arena, and the
/// staging regions in use.
struct RemoteLink {
  int fd = -1;
  int rank = 0;
  RankState* self = nullptr;
  unsigned char* arena = nullptr;
  std::size_t arena_bytes = 0;
  Staging staging{0};
  std::vector<unsigned char> frame;

  std::vector<unsigned char> queued;  // frames of requests that need no answer, not yet sent

  /// Queues a request that needs no answer (ledger, compute, checkpoint): they go in one write
  /// with the next request that does, in order, so a step's many allocations cost one system
  /// call rather than one each.
  void queue(const Writer& w) {
    const auto& b = w.bytes();
    const auto n = static_cast<std::uint32_t>(b.size());
    const auto* p = reinterpret_cast<const unsigned char*>(&n);
    queued.insert(queued.end(), p, p + sizeof n);
    queued.insert(queued.end(), b.begin(), b.end());
    if (queued.size() >= (std::size_t(1) << 16)) flush();
  }
  /// Writes what is queued. A trusted side that has gone means the run is over: the process ends.
  void flush() {
    if (!queued.empty() && !write_all(fd, queued.data(), queued.size())) std::_Exit(70);
    queued.clear();
  }
  /// Sends a request (after everything queued before it).
  void send(const Writer& w) {
    queue(w);
    flush();
  }
  /// Reads the reply to the last request; rethrows the error it carries.
  Reader reply() {
    if (read_frame(fd, frame, [] { return false; }) != ReadResult::frame) std::_Exit(70);
    Reader r(frame);
    const Fault f = r.get_enum(Fault::count_);
    if (f != Fault::none) {
      std::string type = r.str();
      std::string what = r.str();
      throw_fault(f, type, what);
    }
    return r;
  }

  /// A staged copy of [p, p + n) in the arena (copied in when `copy_in`).
  std::size_t stage(const void* p, std::size_t n, bool copy_in) {
    const std::size_t off = staging.take(n, rank, arena_bytes);
    if (copy_in && n) std::memcpy(arena + off, p, n);
    return off;
  }

  void attach(RankState& s) {
    self = &s;
    s.remote = this;
    s.memory.remote_ = this;
  }

  static Request request(std::shared_ptr<Operation> op) { return Request(std::move(op)); }
  static Comm comm(std::shared_ptr<Group> g, RankState* self, int rank, int id) {
    Comm c(std::move(g), self, rank);
    c.remote_id_ = id;
    return c;
  }
  static int id_of(const Comm& c) { return c.remote_id_; }
};

namespace {

/// A staged region: where it lies in the arena and, when the operation writes it, where its
/// bytes go back in the rank's memory.
struct Region {
  unsigned char* user = nullptr;
  std::size_t off = 0;
  std::size_t len = 0;
  bool back = false;
};

/// An operation posted by a rank process; the proxy holds the real one under `id`.
struct RemoteOp final : Operation {
  RemoteLink* link = nullptr;
  std::uint64_t id = 0;
  std::vector<Region> regions;
  bool ready_locked() const override { return false; }
  std::string describe_locked() const override { return "a request of a rank process"; }
  void finish() override {}
  void release_regions() {
    for (const Region& r : regions) link->staging.give(r.off, r.len);
    regions.clear();
  }
  void copy_back() {
    for (const Region& r : regions)
      if (r.back && r.len) std::memcpy(r.user, link->arena + r.off, r.len);
  }
};

/// Posts the request in `w` for `op` (whose regions are staged) and returns its handle.
Request post(RemoteLink& link, std::shared_ptr<RemoteOp> op, const Writer& w) {
  link.send(w);
  try {
    op->id = link.reply().get<std::uint64_t>();
  } catch (...) {
    op->release_regions();
    throw;
  }
  return RemoteLink::request(std::move(op));
}

std::shared_ptr<RemoteOp> new_op(RemoteLink& link) {
  auto op = std::make_shared<RemoteOp>();
  op->owner = link.self;
  op->link = &link;
  return op;
}

/// Stages an input and an output range. Ranges that overlap are staged as one region, keeping
/// their relative layout, so the proxy's argument checks see what the rank passed.
void stage_in_out(RemoteLink& link, RemoteOp& op, const void* in, std::size_t in_bytes, void* out,
                  std::size_t out_bytes, std::uint64_t& in_off, std::uint64_t& out_off) {
  auto* ip = static_cast<const unsigned char*>(in);
  auto* outp = static_cast<unsigned char*>(out);
  if (ip == outp || overlaps(ip, in_bytes, outp, out_bytes)) {
    auto* lo = std::min<const unsigned char*>(ip, outp);
    auto* hi = std::max<const unsigned char*>(ip + in_bytes, outp + out_bytes);
    const auto len = static_cast<std::size_t>(hi - lo);
    const std::size_t off = link.stage(lo, len, true);
    op.regions.push_back({outp + (lo - outp), off, len, out_bytes > 0});
    in_off = off + static_cast<std::size_t>(ip - lo);
    out_off = off + static_cast<std::size_t>(outp - lo);
    return;
  }
  in_off = link.stage(ip, in_bytes, true);
  op.regions.push_back({nullptr, in_off, in_bytes, false});
  out_off = link.stage(outp, out_bytes, false);
  op.regions.push_back({outp, out_off, out_bytes, true});
}

}  // namespace

Request remote_isend(RemoteLink& link, const Comm& comm, const void* data, std::size_t count,
                     DType dtype, int peer, int tag) {
  auto op = new_op(link);
  const std::size_t bytes = count * dtype_bytes(dtype);
  const std::size_t off = link.stage(data, bytes, true);
  op->regions.push_back({nullptr, off, bytes, false});
  Writer w;
  w.put(Call::isend).put<std::int32_t>(RemoteLink::id_of(comm)).put<std::uint64_t>(off);
  w.put<std::uint64_t>(count).put(dtype).put<std::int32_t>(peer).put<std::int32_t>(tag);
  Request q = post(link, op, w);
  op->release_regions();  // a send copies its data when posted
  return q;
}

Request remote_irecv(RemoteLink& link, const Comm& comm, void* data, std::size_t count, DType dtype,
                     int peer, int tag) {
  auto op = new_op(link);
  const std::size_t bytes = count * dtype_bytes(dtype);
  const std::size_t off = link.stage(data, bytes, false);
  op->regions.push_back({static_cast<unsigned char*>(data), off, bytes, true});
  Writer w;
  w.put(Call::irecv).put<std::int32_t>(RemoteLink::id_of(comm)).put<std::uint64_t>(off);
  w.put<std::uint64_t>(count).put(dtype).put<std::int32_t>(peer).put<std::int32_t>(tag);
  return post(link, op, w);
}

Request remote_collective(RemoteLink& link, const Comm& comm, OpKind kind, const void* in,
                          void* out, std::size_t in_count, std::size_t out_count, DType dtype,
                          ReduceOp op, int root) {
  auto rop = new_op(link);
  const std::size_t es = dtype_bytes(dtype);
  std::uint64_t in_off = 0, out_off = 0;
  if (collective(kind).entry == Entry::generic)
    stage_in_out(link, *rop, in, in_count * es, out, out_count * es, in_off, out_off);
  Writer w;
  w.put(Call::collective).put<std::int32_t>(RemoteLink::id_of(comm)).put(kind).put(dtype).put(op);
  w.put<std::int32_t>(root).put(in_off).put<std::uint64_t>(in_count).put(out_off);
  w.put<std::uint64_t>(out_count);
  return post(link, rop, w);
}

Request remote_collective_v(RemoteLink& link, const Comm& comm, const void* in,
                            std::size_t in_count, std::span<const std::size_t> send_counts,
                            void* out, std::size_t out_count,
                            std::span<const std::size_t> recv_counts, DType dtype) {
  auto rop = new_op(link);
  const std::size_t es = dtype_bytes(dtype);
  std::uint64_t in_off = 0, out_off = 0;
  stage_in_out(link, *rop, in, in_count * es, out, out_count * es, in_off, out_off);
  Writer w;
  w.put(Call::collective_v).put<std::int32_t>(RemoteLink::id_of(comm)).put(dtype);
  w.put(in_off).put<std::uint64_t>(in_count).put(out_off).put<std::uint64_t>(out_count);
  w.put<std::uint64_t>(send_counts.size());
  for (auto c : send_counts) w.put<std::uint64_t>(c);
  w.put<std::uint64_t>(recv_counts.size());
  for (auto c : recv_counts) w.put<std::uint64_t>(c);
  return post(link, rop, w);
}

Comm remote_split(RemoteLink& link, const Comm& comm, int color, int key, const std::string& name) {
  Writer w;
  w.put(Call::split).put<std::int32_t>(RemoteLink::id_of(comm)).put<std::int32_t>(color);
  w.put<std::int32_t>(key).str(name);
  link.send(w);
  Reader r = link.reply();
  const auto id = r.get<std::int32_t>();
  if (id < 0) return Comm();
  const auto group_rank = r.get<std::int32_t>();
  auto g = std::make_shared<Group>();
  g->name = r.str();
  const auto n = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) g->members.push_back(r.get<std::int32_t>());
  return RemoteLink::comm(std::move(g), link.self, group_rank, id);
}

void remote_wait(Operation& base) {
  auto& op = static_cast<RemoteOp&>(base);
  Writer w;
  w.put(Call::wait).put(op.id);
  op.link->send(w);
  try {
    op.link->reply();
  } catch (...) {
    op.release_regions();
    throw;
  }
  op.copy_back();
  op.release_regions();
}

bool remote_test(Operation& base) {
  auto& op = static_cast<RemoteOp&>(base);
  Writer w;
  w.put(Call::test).put(op.id);
  op.link->send(w);
  bool done = false;
  try {
    done = op.link->reply().get<std::uint8_t>() != 0;
  } catch (...) {
    op.release_regions();
    throw;
  }
  if (done) {
    op.copy_back();
    op.release_regions();
  }
  return done;
}

void remote_drop(Operation& base, bool unwinding) noexcept {
  auto& op = static_cast<RemoteOp&>(base);
  Writer w;
  w.put(Call::drop).put(op.id).put<std::uint8_t>(unwinding ? 1 : 0);
  if (unwinding)
    op.link->queue(w);
  else
    op.link->send(w);
  if (!unwinding) {
    // Like the threaded destructor: waits, and the data lands; an error there is the trusted
    // side's to record (it fails the run), so it is not thrown here.
    try {
      op.link->reply();
      op.copy_back();
    } catch (...) {
    }
  }
  op.release_regions();
}

void remote_allocate(RemoteLink& link, Category category, std::size_t bytes,
                     std::string_view label) {
  Writer w;
  w.put(Call::allocate).put(category).put<std::uint64_t>(bytes).str(label);
  link.queue(w);
}

void remote_release(RemoteLink& link, Category category, std::size_t bytes) {
  Writer w;
  w.put(Call::release).put(category).put<std::uint64_t>(bytes);
  link.queue(w);
}

void remote_reset_peaks(RemoteLink& link) {
  Writer w;
  w.put(Call::reset_peaks);
  link.queue(w);
}

void remote_compute(RemoteLink& link, double seconds, std::string_view label) {
  Writer w;
  w.put(Call::compute).put(seconds).str(label);
  link.queue(w);
}

double remote_now(RemoteLink& link) {
  Writer w;
  w.put(Call::now);
  link.send(w);
  return link.reply().get<double>();
}

void remote_checkpoint(RemoteLink& link, const std::string& name) {
  Writer w;
  w.put(Call::checkpoint).str(name);
  link.queue(w);
}

void remote_publish(RemoteLink& link, const std::string& name, const void* data, std::size_t count,
                    DType dtype) {
  const std::size_t bytes = count * dtype_bytes(dtype);
  const std::size_t off = link.stage(data, bytes, true);
  Writer w;
  w.put(Call::publish).str(name).put<std::uint64_t>(off).put<std::uint64_t>(count).put(dtype);
  link.send(w);
  try {
    link.reply();
  } catch (...) {
    link.staging.give(off, bytes);
    throw;
  }
  link.staging.give(off, bytes);
}

// ------------------------------------------------------------------------------------ proxy

/// The thread of one rank in the trusted process: serves its rank process's requests with
/// real runtime calls on the rank's state and arena, until the process finishes or fails.
struct RankProxy {
  ClusterState& cluster;
  Rank& rank;
  RankState& self;
  Channel& ch;
  std::size_t arena_bytes;
  std::vector<Comm> comms;
  std::map<std::uint64_t, Request> requests;
  std::uint64_t next_id = 1;

  RankProxy(ClusterState& c, Rank& r, Channel& channel)
      : cluster(c),
        rank(r),
        self(*c.ranks[static_cast<std::size_t>(r.id())]),
        ch(channel),
        arena_bytes(c.config.rank_arena_bytes) {
    comms.push_back(r.world());
  }

  /// The arena's bytes [off, off + count * es): refuses a range outside the arena.
  unsigned char* at(std::uint64_t off, std::uint64_t count, DType dtype) const {
    const std::uint64_t es = dtype_bytes(dtype);
    if (off > arena_bytes || count > (arena_bytes - off) / es)
      throw Malformed("a buffer outside the rank's arena");
    return ch.arena + off;
  }
  Comm& comm(std::int32_t id) {
    if (id < 0 || static_cast<std::size_t>(id) >= comms.size()) throw Malformed("no such group");
    return comms[static_cast<std::size_t>(id)];
  }
  std::map<std::uint64_t, Request>::iterator request(std::uint64_t id) {
    auto it = requests.find(id);
    if (it == requests.end()) throw Malformed("no such request");
    return it;
  }
  std::uint64_t keep(Request q) {
    requests.emplace(next_id, std::move(q));
    return next_id++;
  }

  /// Gives up on a request as the threaded destructor does while its rank unwinds.
  void abandon(Request& q) {
    std::shared_ptr<Operation> op = std::move(q.op_);
    if (!op) return;
    Lock lk(cluster.mu);
    if (op->abandon_stops_run()) {
      cluster.abort_locked("rank " + std::to_string(self.id) +
                           " left a collective unfinished while handling an exception");
    }
    op->cancel(lk);
  }

  /// Ends the rank process at once (the run failed, or it broke the protocol).
  void kill_rank() const {
    if (ch.pid > 0 && !ch.reaped) ::kill(ch.pid, SIGKILL);
  }

  /// Reaps the rank process after its socket closed; kills it if it lingers.
  std::string reap() {
    for (int i = 0; i < 100 && !ch.reaped; ++i) {
      if (::waitpid(ch.pid, &ch.status, WNOHANG) == ch.pid) {
        ch.reaped = true;
        break;
      }
      ::usleep(10000);
    }
    if (!ch.reaped) {
      ::kill(ch.pid, SIGKILL);
      if (::waitpid(ch.pid, &ch.status, 0) == ch.pid) ch.reaped = true;
    }
    return status_text(ch.status);
  }

  /// Serves requests until the rank process finishes (returns) or fails (throws its error).
  void serve() {
    std::vector<unsigned char> frame;
    for (;;) {
      ReadResult got = ReadResult::closed;
      try {
        got = read_frame(ch.proxy_fd, frame, [this] { return cluster.aborting.load(); });
      } catch (...) {
        kill_rank();
        throw;
      }
      if (got == ReadResult::aborted) {
        kill_rank();
        cluster.check_abort(self);  // throws RankStopped
      }
      if (got == ReadResult::closed) {
        cluster.check_abort(self);
        const std::string how = reap();
        throw std::runtime_error("the process of rank " + std::to_string(self.id) + " " + how +
                                 " before its body returned");
      }
      Reader in(frame);
      Call call = Call::count_;
      try {
        call = in.get_enum(Call::count_);
        if (call == Call::finished) {
          // A request the body never waited nor destroyed (a leaked handle) is left as the
          // threaded run leaves it: nobody waits for it.
          for (auto& [id, q] : requests) {
            std::shared_ptr<Operation> op = std::move(q.op_);
            Lock lk(cluster.mu);
            op->cancel(lk);
          }
          return;
        }
        if (call == Call::failed) {
          const Fault f = in.get_enum(Fault::count_);
          std::string type = in.str();
          std::string what = in.str();
          throw_fault(f, type, what);
        }
        handle(call, in);
      } catch (const Malformed&) {
        kill_rank();
        throw;
      }
    }
  }

  /// Answers one request; errors of the runtime call go back to the rank process.
  void handle(Call call, Reader& in) {
    Writer out;
    out.put(Fault::none);
    bool reply = true;
    try {
      reply = serve_call(call, in, out);
    } catch (const Malformed&) {
      throw;
    } catch (...) {
      // The error is the answer, even to a call the rank process does not wait on.
      out = Writer();
      put_current_exception(out);
    }
    if (reply && !send_frame(ch.proxy_fd, out)) {
      cluster.check_abort(self);
      throw std::runtime_error("the process of rank " + std::to_string(self.id) + " " + reap() +
                               " before its body returned");
    }
  }

  /// Makes the runtime call of one request, its answer in `out`; returns whether the rank
  /// process waits for that answer.
  bool serve_call(Call call, Reader& in, Writer& out) {
    switch (call) {
      case Call::allocate:
        return serve_allocate(in);
      case Call::release:
        return serve_release(in);
      case Call::reset_peaks:
        self.memory.reset_peaks();
        return false;
      case Call::compute:
        return serve_compute(in);
      case Call::now:
        out.put(self.clock.now());
        return true;
      case Call::checkpoint:
        rank.checkpoint(in.str());
        return false;
      case Call::publish:
        return serve_publish(in);
      case Call::isend:
      case Call::irecv:
        return serve_p2p(call, in, out);
      case Call::collective:
        return serve_collective(in, out);
      case Call::collective_v:
        return serve_collective_v(in, out);
      case Call::split:
        return serve_split(in, out);
      case Call::wait:
        return serve_wait(in);
      case Call::test:
        return serve_test(in, out);
      case Call::drop:
        return serve_drop(in);
      default:
        throw Malformed("an unknown call");
    }
  }

  // One function per kind of request, in the order of `Call`; each returns whether the rank
  // process waits for an answer.

  bool serve_allocate(Reader& in) {
    const Category c = in.get_enum(static_cast<Category>(kCategoryCount));
    const auto bytes = in.get<std::uint64_t>();
    const std::string label = in.str();
    self.memory.allocate(c, bytes, label);
    return false;
  }
  bool serve_release(Reader& in) {
    const Category c = in.get_enum(static_cast<Category>(kCategoryCount));
    self.memory.release(c, in.get<std::uint64_t>());
    return false;
  }
  bool serve_compute(Reader& in) {
    const auto seconds = in.get<double>();
    const std::string label = in.str();
    rank.compute_seconds(seconds, label);
    return false;
  }
  bool serve_publish(Reader& in) {
    std::string name = in.str();
    const auto off = in.get<std::uint64_t>();
    const auto count = in.get<std::uint64_t>();
    const DType dtype = in.get_enum(static_cast<DType>(3));
    const unsigned char* p = at(off, count, dtype);
    auto& slot = self.published[std::move(name)];
    slot.dtype = dtype;
    slot.bytes.assign(p, p + count * dtype_bytes(dtype));
    return true;
  }
  /// isend or irecv; the answer is the request's id.
  bool serve_p2p(Call call, Reader& in, Writer& out) {
    Comm& c = comm(in.get<std::int32_t>());
    const auto off = in.get<std::uint64_t>();
    const auto count = in.get<std::uint64_t>();
    const DType dtype = in.get_enum(static_cast<DType>(3));
    const auto peer = in.get<std::int32_t>();
    const auto tag = in.get<std::int32_t>();
    unsigned char* p = at(off, count, dtype);
    out.put(keep(call == Call::isend ? c.isend_raw(p, count, dtype, peer, tag)
                                     : c.irecv_raw(p, count, dtype, peer, tag)));
    return true;
  }
  bool serve_collective(Reader& in, Writer& out) {
    Comm& c = comm(in.get<std::int32_t>());
    const OpKind kind = in.get_enum(static_cast<OpKind>(op_kind_count()));
    const DType dtype = in.get_enum(static_cast<DType>(3));
    const ReduceOp op = in.get_enum(static_cast<ReduceOp>(3));
    const auto root = in.get<std::int32_t>();
    const auto in_off = in.get<std::uint64_t>();
    const auto in_count = in.get<std::uint64_t>();
    const auto out_off = in.get<std::uint64_t>();
    const auto out_count = in.get<std::uint64_t>();
    const Entry entry = collective(kind).entry;
    if (entry == Entry::barrier) {
      out.put(keep(c.ibarrier()));
      return true;
    }
    if (entry != Entry::generic) throw Malformed("not a collective of this call");
    out.put(keep(c.icollective(kind, at(in_off, in_count, dtype), at(out_off, out_count, dtype),
                               in_count, out_count, dtype, op, root)));
    return true;
  }
  /// A list of counts: its length, then the counts.
  static std::vector<std::size_t> read_counts(Reader& in) {
    const auto n = in.get<std::uint64_t>();
    if (n > kMaxFrame / sizeof(std::uint64_t)) throw Malformed("too many counts");
    std::vector<std::size_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = in.get<std::uint64_t>();
    return v;
  }
  bool serve_collective_v(Reader& in, Writer& out) {
    Comm& c = comm(in.get<std::int32_t>());
    const DType dtype = in.get_enum(static_cast<DType>(3));
    const auto in_off = in.get<std::uint64_t>();
    const auto in_count = in.get<std::uint64_t>();
    const auto out_off = in.get<std::uint64_t>();
    const auto out_count = in.get<std::uint64_t>();
    const auto send_counts = read_counts(in);
    const auto recv_counts = read_counts(in);
    out.put(keep(c.icollective_v(at(in_off, in_count, dtype), in_count, send_counts,
                                 at(out_off, out_count, dtype), out_count, recv_counts, dtype)));
    return true;
  }
  /// The answer is the new group's id (-1 when this rank is in none), rank and members.
  bool serve_split(Reader& in, Writer& out) {
    Comm& c = comm(in.get<std::int32_t>());
    const auto color = in.get<std::int32_t>();
    const auto key = in.get<std::int32_t>();
    Comm made = c.split(color, key, in.str());
    if (!made.valid()) {
      out.put<std::int32_t>(-1);
      return true;
    }
    comms.push_back(made);
    out.put(static_cast<std::int32_t>(comms.size() - 1)).put<std::int32_t>(made.rank());
    out.str(made.name()).put<std::uint64_t>(made.members().size());
    for (int m : made.members()) out.put<std::int32_t>(m);
    return true;
  }
  bool serve_wait(Reader& in) {
    auto it = request(in.get<std::uint64_t>());
    Request q = std::move(it->second);
    requests.erase(it);
    q.wait();
    return true;
  }
  bool serve_test(Reader& in, Writer& out) {
    auto it = request(in.get<std::uint64_t>());
    const bool done = it->second.test();
    if (done) requests.erase(it);
    out.put<std::uint8_t>(done ? 1 : 0);
    return true;
  }
  bool serve_drop(Reader& in) {
    auto it = request(in.get<std::uint64_t>());
    const bool unwinding = in.get<std::uint8_t>() != 0;
    Request q = std::move(it->second);
    requests.erase(it);
    if (unwinding) {
      abandon(q);
      return false;
    }
    // Otherwise q's destructor waits, as the threaded one does, and records its error.
    return true;
  }
};

// ------------------------------------------------------------------------------------ the run

namespace {

/// Closes every descriptor above stderr marked close-on-exec but `keep`. Those are the forking
/// process's own (other ranks' channels, a grader's result pipe), never the rank's: a rank that
/// could write to the result pipe could void the case that runs it.
void close_parents_descriptors(int keep) {
  std::vector<int> open;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') open.push_back(std::atoi(e->d_name));
    ::closedir(d);  // its own descriptor, listed too, is closed by now: fcntl below fails on it
  } else {
    for (int fd = 3; fd < 1024; ++fd) open.push_back(fd);  // no /proc: the usual range
  }
  for (int fd : open) {
    const int flags = fd > 2 && fd != keep ? ::fcntl(fd, F_GETFD) : -1;
    if (flags >= 0 && (flags & FD_CLOEXEC)) ::close(fd);
  }
}

/// The rank's side once its link is set up: runs the body, reports how it ended, ends the process.
/// Static destructors are skipped: a forked rank's belong to the process that forked it, and a
/// rank program's report is out.
[[noreturn]] void finish_rank(RemoteLink& link, RankState& state,
                              const std::function<void()>& body) {
  link.attach(state);
  Writer w;
  try {
    body();
    w.put(Call::finished);
  } catch (...) {
    w.put(Call::failed);
    put_current_exception(w);
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  link.send(w);
  std::_Exit(0);
}

/// The rank process: keeps only its own channel, runs the body, reports how it ended.
[[noreturn]] void rank_process(ClusterState& cluster, int r, std::vector<Channel>& channels,
                               const std::function<void(Rank&)>& body) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::size_t bytes = cluster.config.rank_arena_bytes;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    Channel& c = channels[i];
    close_fd(c.proxy_fd);
    if (static_cast<int>(i) == r) continue;
    // Gone from this process for good: nothing else refers to another rank's pages.
    ::munmap(c.arena, bytes);
    c.arena = nullptr;
    close_fd(c.rank_fd);
  }
  Channel& own = channels[static_cast<std::size_t>(r)];
  close_parents_descriptors(own.rank_fd);
  RemoteLink link;
  link.fd = own.rank_fd;
  link.rank = r;
  link.arena_bytes = bytes;
  link.arena = own.arena;
  link.staging = Staging(link.arena_bytes);
  const auto i = static_cast<std::size_t>(r);
  finish_rank(link, *cluster.ranks[i], [&] { body(cluster.handles[i]); });
}

/// The arena size of a run: ClusterConfig::rank_arena_bytes, lowered where world_size of them
/// would take more than half the address-space limit (RLIMIT_AS, which every graded case runs
/// under). This process maps every rank's arena, and 32 ranks of 64 MiB alone fill a case's
/// 2 GiB; sparse pages do not help, as the limit counts what is mapped.
/// A rank program's arena is a memory file, which the file-size limit (RLIMIT_FSIZE) bounds too.
std::size_t arena_bytes_that_fit(const ClusterConfig& config, bool memory_file) {
  std::size_t bytes = config.rank_arena_bytes;
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    bytes = std::min(bytes, static_cast<std::size_t>(as.rlim_cur / 2) /
                                static_cast<std::size_t>(config.world_size));
  rlimit fsize{};
  if (memory_file && ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
    bytes = std::min(bytes, static_cast<std::size_t>(fsize.rlim_cur));
  return bytes / kStageAlign * kStageAlign;
}

/// Makes every rank's arena before any process starts: shared anonymous memory for a forked rank
/// (no file, so no file-size limit and no descriptor a rank could pass on; inherited by the fork
/// and unmapped at once in every other rank's process), a memory file for a rank program (a
/// mapping does not survive exec: the program maps the file it is given, and no other).
void open_channels(const ClusterState& cluster, std::vector<Channel>& channels, bool memory_files) {
  const std::size_t bytes = cluster.config.rank_arena_bytes;
  for (int r = 0; r < cluster.config.world_size; ++r) {
    Channel& c = channels[static_cast<std::size_t>(r)];
    const std::string name = "rank " + std::to_string(r);
    int fd = -1;
    if (memory_files) {
      fd = c.arena_fd = ::memfd_create("mgpu rank arena", MFD_CLOEXEC);
      if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
        throw std::system_error(errno, std::generic_category(), "mgpu: the arena file of " + name);
    }
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_NORESERVE | (memory_files ? 0 : MAP_ANONYMOUS), fd, 0);
    if (m == MAP_FAILED)
      throw std::system_error(errno, std::generic_category(),
                              "mgpu: the arena of " + name +
                                  " (ClusterConfig::rank_arena_bytes times world_size must fit "
                                  "in the address space)");
    c.arena = static_cast<unsigned char*>(m);
  }
}

/// The socket of rank `r`, made just before its fork, so that this process never holds more
/// than one descriptor per rank and one spare (a graded case whose ranks run in processes may
/// open 256).
void open_socket(Channel& c, std::size_t r) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::system_error(errno, std::generic_category(),
                            "mgpu: socketpair for rank " + std::to_string(r));
  c.proxy_fd = sv[0];
  c.rank_fd = sv[1];
}

/// Where a rank program finds its socket and its arena file: not 3, where a case program's
/// result goes, so that code writing "the result" there fails instead of garbling the link.
constexpr int kRankSocketFd = 10;
constexpr int kRankArenaFd = 11;

/// The first message to rank r of a run of programs: its rank, the cluster's configuration (its
/// handle answers config() from it), its arena's size and its input.
std::vector<unsigned char> start_message(const ClusterConfig& c, int r, const std::string& input) {
  Writer w;
  w.put<std::int32_t>(r).put<std::int32_t>(c.world_size).put<std::int32_t>(c.gpus_per_node);
  w.put(c.flops_per_second).put(c.intra_node_bytes_per_second).put(c.inter_node_bytes_per_second);
  w.put(c.intra_node_latency_seconds).put(c.inter_node_latency_seconds);
  w.put<std::uint8_t>(c.ring_per_nic);
  w.put<std::uint8_t>(c.memory_capacity_bytes.has_value());
  w.put<std::uint64_t>(c.memory_capacity_bytes.value_or(0));
  w.put<std::uint64_t>(c.rank_arena_bytes);
  w.str(input);
  return w.bytes();
}

/// Starts every rank's process (`start_rank(r, channels)` runs in it and never returns), then
/// serves each from a proxy thread of this process until the run ends. Whatever happens, no
/// rank process, descriptor or mapping outlives the run.
/// `programs`: the ranks are programs of their own (run_isolated_programs); null: forks.
template <class StartRank>
void run_rank_processes(ClusterState& cluster, const RankPrograms* programs,
                        StartRank&& start_rank) {
  const bool memory_files = programs != nullptr;
  if (cluster.config.rank_arena_bytes == 0)
    throw std::invalid_argument("mgpu::ClusterConfig: rank_arena_bytes must be > 0");
  cluster.config.rank_arena_bytes = arena_bytes_that_fit(cluster.config, memory_files);
  const auto n = static_cast<std::size_t>(cluster.config.world_size);
  std::vector<Channel> channels(n);
  struct Cleanup {
    std::vector<Channel>& channels;
    std::size_t bytes;
    ~Cleanup() {
      for (auto& c : channels) {
        if (c.pid > 0 && !c.reaped) {
          ::kill(c.pid, SIGKILL);
          ::waitpid(c.pid, &c.status, 0);
          c.reaped = true;
        }
        if (c.arena) ::munmap(c.arena, bytes);
        c.arena = nullptr;
        close_fd(c.proxy_fd);
        close_fd(c.rank_fd);
        close_fd(c.arena_fd);
      }
    }
  } cleanup{channels, cluster.config.rank_arena_bytes};
  open_channels(cluster, channels, memory_files);
  for (std::size_t r = 0; programs && r < n; ++r)
    channels[r].start = start_message(cluster.config, static_cast<int>(r), programs->inputs[r]);
  // No process of this run (nor this one) may be traced or have its memory read by another
  // process of the same user: the flag passes to every forked rank (a rank program gets the
  // flag of its own program, and holds nothing of this process).
  ::prctl(PR_SET_DUMPABLE, 0);
  std::cout.flush();
  std::fflush(nullptr);  // output buffered now would otherwise be written once per process
  for (std::size_t r = 0; r < n; ++r) {
    open_socket(channels[r], r);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::system_error(errno, std::generic_category(), "mgpu: fork of a rank");
    if (pid == 0) start_rank(static_cast<int>(r), channels);
    channels[r].pid = pid;
    close_fd(channels[r].rank_fd);
    close_fd(channels[r].arena_fd);
  }
  cluster.run_threads([&](Rank& rank) {
    Channel& ch = channels[static_cast<std::size_t>(rank.id())];
    // A rank program learns who it is and gets its input first (a rank gone already shows as
    // a closed socket when the proxy reads).
    if (!ch.start.empty()) {
      const std::uint64_t len = ch.start.size();
      if (write_all(ch.proxy_fd, &len, sizeof len)) write_all(ch.proxy_fd, ch.start.data(), len);
    }
    RankProxy proxy(cluster, rank, ch);
    proxy.serve();
  });
}

/// The process of rank r of a run of programs, before its program starts: its socket and arena
/// file at the numbers the program expects and no other descriptor of this process.
[[noreturn]] void start_program(const RankPrograms& programs, int r, Channel& own) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int sock = ::fcntl(own.rank_fd, F_DUPFD, 20), arena = ::fcntl(own.arena_fd, F_DUPFD, 20);
  if (sock < 0 || arena < 0 || ::dup2(sock, kRankSocketFd) < 0 || ::dup2(arena, kRankArenaFd) < 0)
    std::_Exit(71);
  ::close_range(3, kRankSocketFd - 1, 0);
  ::close_range(kRankArenaFd + 1, ~0U, 0);
  try {
    if (programs.before_start) programs.before_start(r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mgpu: rank %d could not start: %s\n", r, e.what());
    std::_Exit(71);
  }
  std::vector<char*> argv;
  std::string name = programs.program;
  argv.push_back(name.data());
  std::vector<std::string> args = programs.arguments;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(name.c_str(), argv.data());
  std::fprintf(stderr, "mgpu: rank %d could not start %s: %s\n", r, name.c_str(),
               std::strerror(errno));
  std::_Exit(127);
}

}  // namespace

void run_isolated(ClusterState& cluster, const std::function<void(Rank&)>& body) {
  run_rank_processes(cluster, nullptr, [&](int r, std::vector<Channel>& channels) {
    rank_process(cluster, r, channels, body);
  });
}

void run_isolated_programs(ClusterState& cluster, const RankPrograms& programs) {
  const auto n = static_cast<std::size_t>(cluster.config.world_size);
  if (programs.inputs.size() != n)
    throw std::invalid_argument(
        "mgpu::Cluster::run_programs: " + std::to_string(programs.inputs.size()) + " inputs for " +
        std::to_string(n) + " ranks (one per rank)");
  if (programs.program.empty())
    throw std::invalid_argument("mgpu::Cluster::run_programs: no program named");
  run_rank_processes(cluster, &programs, [&](int r, std::vector<Channel>& channels) {
    start_program(programs, r, channels[static_cast<std::size_t>(r)]);
  });
}

}  // namespace mgpu::detail

namespace mgpu {

int serve_rank(const RankProgramBody& body) {
  using namespace mgpu::detail;
  struct stat st {};
  if (::fstat(kRankSocketFd, &st) != 0 || !S_ISSOCK(st.st_mode) || ::fstat(kRankArenaFd, &st) != 0)
    return 2;
  const int fd = kRankSocketFd;
  std::uint64_t len = 0;
  std::vector<unsigned char> start;
  auto never = [] { return false; };
  if (read_exact(fd, &len, sizeof len, never) != ReadResult::frame) std::_Exit(70);
  start.resize(len);
  if (read_exact(fd, start.data(), len, never) != ReadResult::frame) std::_Exit(70);
  ClusterConfig c;
  int r = 0;
  std::string input;
  try {
    Reader in(start);
    r = in.get<std::int32_t>();
    c.world_size = in.get<std::int32_t>();
    c.gpus_per_node = in.get<std::int32_t>();
    c.flops_per_second = in.get<double>();
    c.intra_node_bytes_per_second = in.get<double>();
    c.inter_node_bytes_per_second = in.get<double>();
    c.intra_node_latency_seconds = in.get<double>();
    c.inter_node_latency_seconds = in.get<double>();
    c.ring_per_nic = in.get<std::uint8_t>() != 0;
    const bool capped = in.get<std::uint8_t>() != 0;
    const auto capacity = in.get<std::uint64_t>();
    if (capped) c.memory_capacity_bytes = capacity;
    c.rank_arena_bytes = in.get<std::uint64_t>();
    input = in.str();
  } catch (const Malformed&) {
    std::_Exit(70);
  }
  c.isolation = RankIsolation::threads;  // this process holds one rank, served from the other side
  ClusterState cluster(c);
  cluster.reset();
  if (r < 0 || r >= c.world_size) std::_Exit(70);
  void* m =
      ::mmap(nullptr, c.rank_arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, kRankArenaFd, 0);
  if (m == MAP_FAILED) std::_Exit(70);
  ::close(kRankArenaFd);
  RemoteLink link;
  link.fd = fd;
  link.rank = r;
  link.arena_bytes = c.rank_arena_bytes;
  link.arena = static_cast<unsigned char*>(m);
  link.staging = Staging(link.arena_bytes);
  const auto i = static_cast<std::size_t>(r);
  finish_rank(link, *cluster.ranks[i], [&] { body(cluster.handles[i], input); });
}

}  // namespace mgpu
