// RAII device memory for the GPU labs. Every buffer is booked in its rank's mgpu::MemoryLedger
// (the runtime's) under a category, so the bytes a lab holds per GPU are measured, not estimated.
// Host code only: it pulls in the runtime's headers (and Eigen), so .cu files do not include it.
#pragma once

#include "common/check.hpp"
#include "common/dtype.hpp"

#include <mgpu/memory.hpp>

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mgpu::gpu {

/// Set by DeviceCluster on the threads that run NCCL ranks. While such a thread unwinds from an
/// exception, destructors leave device memory and handles allocated instead of freeing them:
/// freeing waits for the whole device, and this rank may still have a collective in flight that
/// only the abort of its communicator ends, which comes later in the unwinding. The process is
/// failing anyway; a hang would hide why.
inline thread_local bool nccl_rank_thread = false;

/// True while an NCCL rank's thread unwinds (see nccl_rank_thread): skip waits and frees.
inline bool rank_unwinding() { return nccl_rank_thread && std::uncaught_exceptions() > 0; }

/// `count` elements of T in device memory of the current device, booked in `ledger` under a
/// category while alive. Move-only. A default-constructed buffer is empty and books nothing.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `count` elements (uninitialised) on the current device and books them. `label`
  /// names the buffer in the ledger's OutOfMemory message when the ledger has a capacity.
  DeviceBuffer(MemoryLedger& ledger, Category category, std::size_t count,
               std::string_view label = "device buffer")
      : ledger_(&ledger), category_(category), count_(count) {
    // Book first: a ledger with a capacity refuses before any device memory is taken.
    ledger_->allocate(category_, bytes(), label);
    if (count_ > 0) {
      const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&data_), bytes());
      if (status != cudaSuccess) {
        ledger_->release(category_, bytes());
        check_cuda(status, "cudaMalloc(DeviceBuffer)", __FILE__, __LINE__);
      }
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  /// Takes over `other`'s memory and booking; `other` becomes empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  /// Frees the current memory, then takes over `other`'s.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  /// Frees the memory and its booking now (the "discard" of gather, use, discard).
  void reset() noexcept {
    if (ledger_ != nullptr) {
      // No throw from a destructor path; no device-wide wait while a failing rank unwinds.
      if (data_ != nullptr && !rank_unwinding()) cudaFree(data_);
      ledger_->release(category_, bytes());
    }
    ledger_ = nullptr;
    data_ = nullptr;
    count_ = 0;
  }
  /// Device pointer (nullptr when empty).
  T* data() const { return data_; }
  /// Number of elements.
  std::size_t size() const { return count_; }
  /// Number of bytes.
  std::size_t bytes() const { return count_ * sizeof(T); }
  /// Sets every byte to zero, ordered on `stream`.
  void zero(cudaStream_t stream) { MGPU_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes(), stream)); }
  /// Copies host[0, size()) in, ordered on `stream`, and waits for it (setup, not timed loops).
  void upload(const std::vector<T>& host, cudaStream_t stream) {
    if (host.size() != count_) {
      throw std::invalid_argument("DeviceBuffer::upload: host vector has " +
                                  std::to_string(host.size()) + " elements but the buffer " +
                                  std::to_string(count_) + ": size them alike");
    }
    MGPU_CUDA_CHECK(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream));
    MGPU_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  /// Copies bytes() bytes from `host` (any element type of the same layout, e.g. the uint16 bits
  /// of bf16 values) and waits for it.
  void upload_raw(const void* host, std::size_t host_bytes, cudaStream_t stream) {
    if (host_bytes != bytes()) {
      throw std::invalid_argument("DeviceBuffer::upload_raw: " + std::to_string(host_bytes) +
                                  " bytes for a buffer of " + std::to_string(bytes()) +
                                  ": size them alike");
    }
    MGPU_CUDA_CHECK(cudaMemcpyAsync(data_, host, host_bytes, cudaMemcpyHostToDevice, stream));
    MGPU_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  /// Copies the whole buffer into `host` (bytes() bytes) after the work on `stream`, and waits.
  void download_raw(void* host, cudaStream_t stream) const {
    MGPU_CUDA_CHECK(cudaMemcpyAsync(host, data_, bytes(), cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  /// Copies the whole buffer to the host after the work already on `stream`, and waits for it.
  std::vector<T> download(cudaStream_t stream) const {
    std::vector<T> host(count_);
    MGPU_CUDA_CHECK(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
  }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ledger_, o.ledger_);
    std::swap(category_, o.category_);
    std::swap(count_, o.count_);
    std::swap(data_, o.data_);
  }
  MemoryLedger* ledger_ = nullptr;
  Category category_ = Category::activations;
  std::size_t count_ = 0;
  T* data_ = nullptr;
};

}  // namespace mgpu::gpu
