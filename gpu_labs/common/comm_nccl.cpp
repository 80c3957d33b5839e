// The NCCL backend of DeviceComm: every call maps to one NCCL call on the rank's stream.
#include "common/backends.hpp"
#include "common/device_buffer.hpp"

#include <chrono>
#include <exception>
#include <thread>

namespace mgpu::gpu::detail {

namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::f32 ? ncclFloat32 : ncclBfloat16; }

class NcclComm final : public DeviceComm {
 public:
  NcclComm(const ncclUniqueId& id, int ranks, int rank, int device,
           std::shared_ptr<std::atomic<bool>> aborted)
      : rank_(rank), size_(ranks), device_(device), aborted_(std::move(aborted)), ledger_(rank) {
    MGPU_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MGPU_NCCL_CHECK(ncclCommInitRank(&comm_, ranks, id, rank));
    scratch_ = DeviceBuffer<float>(ledger_, Category::comm, 1, "barrier scratch");
  }
  ~NcclComm() override {
    scratch_.reset();
    if (comm_ != nullptr) {
      // After a failure peers may never answer: abort instead of a destroy that could wait.
      if (std::uncaught_exceptions() > 0 || aborted_->load()) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
    }
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const override { return device_; }
  cudaStream_t stream() const override { return stream_; }
  Backend backend() const override { return Backend::nccl; }
  MemoryLedger& ledger() override { return ledger_; }
  ncclComm_t nccl() const override { return comm_; }

  void all_reduce(const void* send, void* recv, std::size_t count, DType type, cudaStream_t s) override {
    MGPU_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, pick(s)));
  }
  void all_gather(const void* send, void* recv, std::size_t send_count, DType type, cudaStream_t s) override {
    MGPU_NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(type), comm_, pick(s)));
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, cudaStream_t s) override {
    MGPU_NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(type), ncclSum, comm_, pick(s)));
  }
  void group_start() override { MGPU_NCCL_CHECK(ncclGroupStart()); }
  void group_end() override { MGPU_NCCL_CHECK(ncclGroupEnd()); }
  void send(const void* buf, std::size_t count, DType type, int peer, cudaStream_t s) override {
    MGPU_NCCL_CHECK(ncclSend(buf, count, nccl_type(type), peer, comm_, pick(s)));
  }
  void recv(void* buf, std::size_t count, DType type, int peer, cudaStream_t s) override {
    MGPU_NCCL_CHECK(ncclRecv(buf, count, nccl_type(type), peer, comm_, pick(s)));
  }
  void synchronize(cudaStream_t s) override {
    // Poll rather than block: a rank whose peer died would otherwise wait forever on a kernel
    // that never gets its data. On abort the communicator is aborted, which ends such kernels.
    const cudaStream_t st = pick(s);
    for (;;) {
      const cudaError_t q = cudaStreamQuery(st);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) MGPU_CUDA_CHECK(q);
      if (aborted_->load()) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw RankAborted("synchronize");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  void barrier() override {
    synchronize(nullptr);
    all_reduce(scratch_.data(), scratch_.data(), 1, DType::f32, nullptr);
    synchronize(nullptr);
  }

 private:
  cudaStream_t pick(cudaStream_t s) const { return s == nullptr ? stream_ : s; }
  int rank_, size_, device_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  MemoryLedger ledger_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  DeviceBuffer<float> scratch_;
};

}  // namespace

std::unique_ptr<DeviceComm> make_nccl_comm(const ncclUniqueId& id, int ranks, int rank, int device,
                                           std::shared_ptr<std::atomic<bool>> aborted) {
  return std::make_unique<NcclComm>(id, ranks, rank, device, std::move(aborted));
}

}  // namespace mgpu::gpu::detail
