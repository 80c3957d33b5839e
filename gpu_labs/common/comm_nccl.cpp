// The NCCL backend of DeviceComm: every call maps to one NCCL call on the rank's stream, and
// every wait can be abandoned when another rank fails (see settle and synchronize).
#include "common/backends.hpp"
#include "common/device_buffer.hpp"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>

namespace mgpu::gpu::detail {

namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::f32 ? ncclFloat32 : ncclBfloat16; }

// Communicators are non-blocking unless MGPU_NCCL_BLOCKING=1. Non-blocking, no NCCL call can
// hold this thread: a call that is not done answers ncclInProgress, and the rank waits for it in
// settle(), as for device work in synchronize(); both give up once another rank has failed. The
// variable is the way back to NCCL's default, should a system misbehave in this mode.
bool nonblocking_comm() {
  const char* v = std::getenv("MGPU_NCCL_BLOCKING");
  return v == nullptr || *v == '\0' || std::string(v) == "0";
}

class NcclComm final : public DeviceComm {
 public:
  NcclComm(const ncclUniqueId& id, int ranks, int rank, int device,
           std::shared_ptr<std::atomic<bool>> aborted, int init_timeout_s)
      : rank_(rank), size_(ranks), device_(device), aborted_(std::move(aborted)), ledger_(rank) {
    MGPU_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = nonblocking_ ? 0 : 1;
      const ncclResult_t started = ncclCommInitRankConfig(&comm_, ranks, id, rank, &config);
      if (comm_ == nullptr && started != ncclSuccess) throw_nccl(started, "ncclCommInitRankConfig");
      // Every rank came to the rendezvous, but one may still never reach NCCL's init (it failed
      // in between, or its network is blocked): give up after the launch's timeout.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(init_timeout_s);
      settle(started, "ncclCommInitRankConfig", [&] {
        if (std::chrono::steady_clock::now() < give_up) return;
        throw std::runtime_error("NCCL init of rank " + std::to_string(rank) + " of " +
                                 std::to_string(ranks) + " (device " + std::to_string(device) +
                                 ") did not finish within " + std::to_string(init_timeout_s) +
                                 " s; the communicator is aborted. A rank failed before its init "
                                 "(see its output), or the "
                                 "nodes cannot reach each other (NCCL_DEBUG=WARN, "
                                 "NCCL_SOCKET_IFNAME; MGPU_INIT_TIMEOUT sets the wait)");
      });
      scratch_ = DeviceBuffer<float>(ledger_, Category::comm, 1, "barrier scratch");
      scratch_.zero(stream_);
      // Every rank's communicator answers before any lab code runs: a rank whose init failed
      // shows up here, and the first timed collective does not pay for connection setup.
      barrier();
    } catch (...) {
      // No destructor runs for a half-built object: abort here, before scratch_ is freed.
      abort_comm();
      cudaStreamDestroy(stream_);
      throw;
    }
  }
  ~NcclComm() override {
    if (comm_ != nullptr) {
      // After a failure peers may never answer: abort, which also ends this rank's kernels that
      // wait for them. Only then free memory: cudaFree waits for the device to be idle.
      if (std::uncaught_exceptions() > 0 || aborted_->load()) {
        abort_comm();
      } else {
        try {
          // Finalizing waits until every rank is quiescent: polled, so it too gives up when
          // another rank fails. A blocking communicator goes straight to the local destroy.
          if (nonblocking_) settle(ncclCommFinalize(comm_), "ncclCommFinalize");
          ncclCommDestroy(comm_);
          comm_ = nullptr;
        } catch (...) {
          abort_comm();  // another rank failed meanwhile, or NCCL did: nothing to flush
        }
      }
    }
    scratch_.reset();
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const override { return device_; }
  cudaStream_t stream() const override { return stream_; }
  Backend backend() const override { return Backend::nccl; }
  MemoryLedger& ledger() override { return ledger_; }
  ncclComm_t nccl() const override { return comm_; }

  void all_reduce(const void* send, void* recv, std::size_t count, DType type,
                  cudaStream_t s) override {
    enter("all_reduce");
    settle(ncclAllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, pick(s)),
           "ncclAllReduce");
  }
  void all_gather(const void* send, void* recv, std::size_t send_count, DType type,
                  cudaStream_t s) override {
    enter("all_gather");
    settle(ncclAllGather(send, recv, send_count, nccl_type(type), comm_, pick(s)), "ncclAllGather");
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      cudaStream_t s) override {
    enter("reduce_scatter");
    settle(ncclReduceScatter(send, recv, recv_count, nccl_type(type), ncclSum, comm_, pick(s)),
           "ncclReduceScatter");
  }
  void group_start() override {
    enter("group_start");
    MGPU_NCCL_CHECK(ncclGroupStart());
  }
  void group_end() override {
    enter("group_end");
    settle(ncclGroupEnd(), "ncclGroupEnd");
  }
  void send(const void* buf, std::size_t count, DType type, int peer, cudaStream_t s) override {
    enter("send");
    settle(ncclSend(buf, count, nccl_type(type), peer, comm_, pick(s)), "ncclSend");
  }
  void recv(void* buf, std::size_t count, DType type, int peer, cudaStream_t s) override {
    enter("recv");
    settle(ncclRecv(buf, count, nccl_type(type), peer, comm_, pick(s)), "ncclRecv");
  }
  void synchronize(cudaStream_t s) override {
    // Poll rather than block: a rank whose peer died would otherwise wait forever on a kernel
    // that never gets its data. Aborting the communicator ends such kernels.
    enter("synchronize");
    const cudaStream_t st = pick(s);
    wait_until(
        [&] {
          const cudaError_t q = cudaStreamQuery(st);
          if (q == cudaSuccess) return true;
          if (q != cudaErrorNotReady) MGPU_CUDA_CHECK(q);
          check_async("synchronize");
          return false;
        },
        *aborted_, "synchronize", [&] { abort_comm(); });
  }
  void barrier() override {
    synchronize(nullptr);
    all_reduce(scratch_.data(), scratch_.data(), 1, DType::f32, nullptr);
    synchronize(nullptr);
  }

 private:
  cudaStream_t pick(cudaStream_t s) const { return s == nullptr ? stream_ : s; }

  // Every call starts here: once another rank has failed, nothing new is enqueued.
  void enter(const char* what) {
    if (comm_ == nullptr) throw RankAborted(std::string(what) + " (communicator already aborted)");
    if (aborted_->load()) {
      abort_comm();
      throw RankAborted(what);
    }
  }

  // A non-blocking communicator may answer ncclInProgress; the next call on it must wait until
  // NCCL is done with this one. Errors, here or reported asynchronously, throw.
  // `check_time`, when given, is called while waiting and throws to give up.
  void settle(ncclResult_t result, const char* what, const std::function<void()>& check_time = {}) {
    if (result != ncclSuccess && result != ncclInProgress) throw_nccl(result, what);
    if (result == ncclSuccess) return;
    wait_until(
        [&] {
          if (check_time) check_time();
          ncclResult_t state = ncclSuccess;
          MGPU_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
          if (state == ncclInProgress) return false;
          if (state != ncclSuccess) throw_nccl(state, what);
          return true;
        },
        *aborted_, what, [&] { abort_comm(); }, std::chrono::microseconds(10));
  }

  // A peer's failure, a network error: NCCL reports them on the communicator, not on a call.
  void check_async(const char* what) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress) {
      throw_nccl(state, what);
    }
  }

  [[noreturn]] void throw_nccl(ncclResult_t result, const char* what) {
    std::string msg = std::string("NCCL error ") + ncclGetErrorString(result) + " in " + what +
                      " on rank " + std::to_string(rank_) + " (device " + std::to_string(device_) +
                      ")";
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    if (last != nullptr && *last != '\0') msg += ": " + std::string(last);
    msg += " (run with NCCL_DEBUG=WARN for details)";
    throw std::runtime_error(msg);
  }

  void abort_comm() noexcept {
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

  int rank_, size_, device_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  const bool nonblocking_ = nonblocking_comm();
  MemoryLedger ledger_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  DeviceBuffer<float> scratch_;
};

}  // namespace

std::unique_ptr<DeviceComm> make_nccl_comm(const ncclUniqueId& id, int ranks, int rank, int device,
                                           std::shared_ptr<std::atomic<bool>> aborted,
                                           int init_timeout_s) {
  return std::make_unique<NcclComm>(id, ranks, rank, device, std::move(aborted), init_timeout_s);
}

}  // namespace mgpu::gpu::detail
