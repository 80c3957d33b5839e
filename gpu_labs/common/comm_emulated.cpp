// The single-device emulation of DeviceComm: t ranks on one GPU, each with its own stream and
// buffers. Collectives are device copies plus reduce_sum over the ranks in rank order, so the
// result is the same on every run; streams are ordered with events, ranks meet on host barriers.
#include "common/backends.hpp"
#include "common/device_buffer.hpp"
#include "common/kernels.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mgpu::gpu::detail {

namespace {

/// What one rank posts for a collective: its buffer and the events that order the others on it.
struct Post {
  const void* data = nullptr;
  std::size_t count = 0;
  DType type = DType::f32;
  const char* op = "";
  cudaEvent_t ready = nullptr;  // the buffer holds its data once this has happened
  cudaEvent_t done = nullptr;   // this rank has finished reading the others' buffers
};

/// A send waiting for its recv.
struct Message {
  const void* data = nullptr;
  std::size_t bytes = 0;
  cudaEvent_t ready = nullptr;
  cudaEvent_t consumed = nullptr;
  bool consumed_posted = false;
};

}  // namespace

class EmulatedHub {
 public:
  explicit EmulatedHub(int n) : n(n), barrier(n) {
    posts[0].resize(static_cast<std::size_t>(n));
    posts[1].resize(static_cast<std::size_t>(n));
  }
  const int n;
  AbortableBarrier barrier;
  // Two slots used alternately: a rank can post collective k+1 while a slower one still reads
  // collective k's events, but never k+2, since that needs everyone past k+1's first barrier.
  std::vector<Post> posts[2];
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> mail;  // (from, to)
  bool aborted = false;

  /// Waits on `cv` until `ready()` holds; throws RankAborted if the hub is aborted meanwhile.
  void wait_for(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready,
                const char* where) {
    cv.wait(lock, [&] { return aborted || ready(); });
    if (aborted) throw RankAborted(where);
  }
};

namespace {

class EmulatedComm final : public DeviceComm {
 public:
  EmulatedComm(std::shared_ptr<EmulatedHub> hub, int rank)
      : hub_(std::move(hub)), rank_(rank), ledger_(rank) {
    MGPU_CUDA_CHECK(cudaSetDevice(0));
    MGPU_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (int p = 0; p < 2; ++p) {
      MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&ready_[p], cudaEventDisableTiming));
      MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&done_[p], cudaEventDisableTiming));
    }
  }
  ~EmulatedComm() override {
    cudaStreamSynchronize(stream_);
    staging_.clear();
    for (int p = 0; p < 2; ++p) {
      cudaEventDestroy(ready_[p]);
      cudaEventDestroy(done_[p]);
    }
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return hub_->n; }
  int device() const override { return 0; }
  cudaStream_t stream() const override { return stream_; }
  Backend backend() const override { return Backend::emulated; }
  MemoryLedger& ledger() override { return ledger_; }
  ncclComm_t nccl() const override { return nullptr; }

  void all_reduce(const void* send, void* recv, std::size_t count, DType type,
                  cudaStream_t s) override {
    s = pick(s);
    // Stage first: in place, this rank would overwrite its input while others still read it.
    const void* staged = stage(send, count * dtype_bytes(type), s);
    exchange("all_reduce", staged, count, type, s, [&](const std::vector<Post>& posts) {
      reduce_sum(pointers(posts, 0).data(), size(), recv, count, type, s);
    });
  }

  void all_gather(const void* send, void* recv, std::size_t send_count, DType type,
                  cudaStream_t s) override {
    s = pick(s);
    const std::size_t bytes = send_count * dtype_bytes(type);
    // No staging needed: a rank writes only its own recv, and in place its own block is its input.
    exchange("all_gather", send, send_count, type, s, [&](const std::vector<Post>& posts) {
      for (int j = 0; j < size(); ++j) {
        char* dst = static_cast<char*>(recv) + static_cast<std::size_t>(j) * bytes;
        if (dst != posts[static_cast<std::size_t>(j)].data) {
          MGPU_CUDA_CHECK(cudaMemcpyAsync(dst, posts[static_cast<std::size_t>(j)].data, bytes,
                                          cudaMemcpyDeviceToDevice, s));
        }
      }
    });
  }

  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      cudaStream_t s) override {
    s = pick(s);
    const std::size_t block = recv_count * dtype_bytes(type);
    const void* staged = stage(send, block * static_cast<std::size_t>(size()), s);
    exchange("reduce_scatter", staged, recv_count, type, s, [&](const std::vector<Post>& posts) {
      reduce_sum(pointers(posts, block * static_cast<std::size_t>(rank_)).data(), size(), recv,
                 recv_count, type, s);
    });
  }

  void group_start() override { ++group_depth_; }
  void group_end() override {
    if (group_depth_ == 0)
      throw std::logic_error("group_end without group_start on rank " + std::to_string(rank_));
    if (--group_depth_ == 0) flush();
  }
  void send(const void* buf, std::size_t count, DType type, int peer, cudaStream_t s) override {
    check_peer(peer, "send");
    pending_.push_back({true, const_cast<void*>(buf), count * dtype_bytes(type), peer, pick(s)});
    if (group_depth_ == 0) flush();
  }
  void recv(void* buf, std::size_t count, DType type, int peer, cudaStream_t s) override {
    check_peer(peer, "recv");
    pending_.push_back({false, buf, count * dtype_bytes(type), peer, pick(s)});
    if (group_depth_ == 0) flush();
  }
  void synchronize(cudaStream_t s) override { MGPU_CUDA_CHECK(cudaStreamSynchronize(pick(s))); }
  void barrier() override {
    synchronize(nullptr);
    hub_->barrier.wait();
  }

 private:
  struct Pending {
    bool is_send;
    void* buf;
    std::size_t bytes;
    int peer;
    cudaStream_t stream;
  };

  cudaStream_t pick(cudaStream_t s) const { return s == nullptr ? stream_ : s; }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size()) {
      throw std::out_of_range(std::string(what) + " on rank " + std::to_string(rank_) + ": peer " +
                              std::to_string(peer) + " outside [0, " + std::to_string(size()) +
                              ")");
    }
  }

  // One staging buffer per stream. A collective's staged copy is ordered after the previous
  // collective on the same stream (which ends waiting until every rank has read it), but not after
  // one on another stream: a reduce-scatter on a side stream would otherwise have its input
  // overwritten by an all-gather staged on the main stream while other ranks still read it.
  const void* stage(const void* src, std::size_t bytes, cudaStream_t s) {
    DeviceBuffer<unsigned char>& staging = staging_[s];
    if (staging.bytes() < bytes) {
      // Everything that might still read the old buffer is ordered before this point on our
      // streams (each collective ends waiting on every rank's done event).
      MGPU_CUDA_CHECK(cudaDeviceSynchronize());
      staging = DeviceBuffer<unsigned char>(ledger_, Category::comm, bytes,
                                            "emulated collective staging");
    }
    MGPU_CUDA_CHECK(cudaMemcpyAsync(staging.data(), src, bytes, cudaMemcpyDeviceToDevice, s));
    return staging.data();
  }

  std::vector<const void*> pointers(const std::vector<Post>& posts, std::size_t byte_offset) const {
    std::vector<const void*> out;
    for (const Post& p : posts) out.push_back(static_cast<const char*>(p.data) + byte_offset);
    return out;
  }

  // Post, meet, order on everyone's input, use, mark done, meet, order on everyone's done.
  void exchange(const char* op, const void* data, std::size_t count, DType type, cudaStream_t s,
                const std::function<void(const std::vector<Post>&)>& use) {
    const int parity = static_cast<int>(generation_++ % 2);
    std::vector<Post>& posts = hub_->posts[parity];
    MGPU_CUDA_CHECK(cudaEventRecord(ready_[parity], s));
    posts[static_cast<std::size_t>(rank_)] = {data, count, type, op, ready_[parity], done_[parity]};
    hub_->barrier.wait();
    const Post& first = posts[0];
    if (std::string(first.op) != op || first.count != count || first.type != type) {
      throw std::invalid_argument(
          "rank " + std::to_string(rank_) + " called " + op + "(count " + std::to_string(count) +
          ", " + dtype_name(type) + ") while rank 0 called " + first.op + "(count " +
          std::to_string(first.count) + ", " + dtype_name(first.type) +
          "): every rank must issue the same collectives in the same order");
    }
    for (const Post& p : posts) MGPU_CUDA_CHECK(cudaStreamWaitEvent(s, p.ready, 0));
    use(posts);
    MGPU_CUDA_CHECK(cudaEventRecord(done_[parity], s));
    hub_->barrier.wait();
    for (const Post& p : posts) MGPU_CUDA_CHECK(cudaStreamWaitEvent(s, p.done, 0));
  }

  // Group semantics: all sends are published before any recv waits, so a ring never deadlocks.
  void flush() {
    std::vector<Pending> ops;
    ops.swap(pending_);
    std::vector<std::shared_ptr<Message>> sent;
    for (const Pending& op : ops) {
      if (!op.is_send) continue;
      auto msg = std::make_shared<Message>();
      msg->data = op.buf;
      msg->bytes = op.bytes;
      MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&msg->ready, cudaEventDisableTiming));
      MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&msg->consumed, cudaEventDisableTiming));
      MGPU_CUDA_CHECK(cudaEventRecord(msg->ready, op.stream));
      {
        std::lock_guard lock(hub_->mu);
        hub_->mail[{rank_, op.peer}].push_back(msg);
      }
      hub_->cv.notify_all();
      sent.push_back(msg);
    }
    for (const Pending& op : ops) {
      if (op.is_send) continue;
      std::shared_ptr<Message> msg;
      {
        std::unique_lock lock(hub_->mu);
        auto& box = hub_->mail[{op.peer, rank_}];
        hub_->wait_for(
            lock, [&] { return !box.empty(); }, "recv");
        msg = box.front();
        box.pop_front();
      }
      if (msg->bytes != op.bytes) {
        throw std::invalid_argument(
            "rank " + std::to_string(rank_) + " receives " + std::to_string(op.bytes) +
            " bytes from rank " + std::to_string(op.peer) + ", which sent " +
            std::to_string(msg->bytes) + ": match send and recv counts and types");
      }
      MGPU_CUDA_CHECK(cudaStreamWaitEvent(op.stream, msg->ready, 0));
      MGPU_CUDA_CHECK(
          cudaMemcpyAsync(op.buf, msg->data, op.bytes, cudaMemcpyDeviceToDevice, op.stream));
      MGPU_CUDA_CHECK(cudaEventRecord(msg->consumed, op.stream));
      {
        std::lock_guard lock(hub_->mu);
        msg->consumed_posted = true;
      }
      hub_->cv.notify_all();
    }
    // The sender may reuse its buffer only after the receiver's copy: order our stream on it.
    std::size_t i = 0;
    for (const Pending& op : ops) {
      if (!op.is_send) continue;
      const std::shared_ptr<Message>& msg = sent[i++];
      {
        std::unique_lock lock(hub_->mu);
        hub_->wait_for(
            lock, [&] { return msg->consumed_posted; }, "send");
      }
      MGPU_CUDA_CHECK(cudaStreamWaitEvent(op.stream, msg->consumed, 0));
      cudaEventDestroy(msg->ready);
      cudaEventDestroy(msg->consumed);
    }
  }

  std::shared_ptr<EmulatedHub> hub_;
  int rank_;
  MemoryLedger ledger_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  unsigned long long generation_ = 0;
  std::map<cudaStream_t, DeviceBuffer<unsigned char>> staging_;
  int group_depth_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace

std::shared_ptr<EmulatedHub> make_emulated_hub(int ranks) {
  return std::make_shared<EmulatedHub>(ranks);
}

void abort_emulated_hub(EmulatedHub& hub) {
  hub.barrier.abort();
  {
    std::lock_guard lock(hub.mu);
    hub.aborted = true;
  }
  hub.cv.notify_all();
}

std::unique_ptr<DeviceComm> make_emulated_comm(std::shared_ptr<EmulatedHub> hub, int rank) {
  return std::make_unique<EmulatedComm>(std::move(hub), rank);
}

}  // namespace mgpu::gpu::detail
