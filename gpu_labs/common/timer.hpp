// Timing on the GPU with CUDA events: the span between two points of one stream's work,
// which host clocks cannot see because launches return before the work runs.
#pragma once

#include "common/check.hpp"

#include <functional>

namespace mgpu::gpu {

/// A pair of CUDA events; start() and stop() record them on a stream, ms() waits and reads.
class EventTimer {
 public:
  EventTimer() {
    MGPU_CUDA_CHECK(cudaEventCreate(&start_));
    MGPU_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  /// Records the start on `stream`.
  void start(cudaStream_t stream) { MGPU_CUDA_CHECK(cudaEventRecord(start_, stream)); }
  /// Records the stop on `stream`.
  void stop(cudaStream_t stream) { MGPU_CUDA_CHECK(cudaEventRecord(stop_, stream)); }
  /// Milliseconds between start and stop; blocks until the stop event has happened.
  float ms() const {
    MGPU_CUDA_CHECK(cudaEventSynchronize(stop_));
    float out = 0.0f;
    MGPU_CUDA_CHECK(cudaEventElapsedTime(&out, start_, stop_));
    return out;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

/// Mean milliseconds of one call of `step`, measured on `stream`: `warmup` untimed calls, then
/// `sync` when given (a barrier, so every rank starts the timed calls together), then `iters`
/// calls between two events. `step` must enqueue its work on `stream`. `wait`, when given, is how
/// to wait for the stream before the events are read: a rank's DeviceComm::synchronize, which
/// gives up when another rank failed, where a plain event wait would hang on a dead peer.
inline double time_per_call(cudaStream_t stream, int warmup, int iters,
                            const std::function<void()>& step,
                            const std::function<void()>& sync = {},
                            const std::function<void()>& wait = {}) {
  for (int i = 0; i < warmup; ++i) step();
  if (sync) sync();
  EventTimer timer;
  timer.start(stream);
  for (int i = 0; i < iters; ++i) step();
  timer.stop(stream);
  if (wait) wait();
  return static_cast<double>(timer.ms()) / iters;
}

}  // namespace mgpu::gpu
