// The thread of one simulated rank, started with a small stack so that a cluster of 1,024 ranks
// stays within the address space a graded case may use.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <functional>

namespace mgpu::detail {

/// Stack reserved for each rank thread. The default, `ulimit -s` (8 MiB on most Linux systems),
/// reserves 8 GiB of address space at 1,024 ranks and 2 GiB at 256, which is the grader's whole
/// RLIMIT_AS for a case. Rank code keeps its data on the heap (Buffers, Eigen matrices,
/// vectors); the chapters' tests all pass with 64 KiB, so 512 KiB leaves ample room for deeper
/// student code while 1,024 ranks reserve only 512 MiB.
inline constexpr std::size_t kRankStackBytes = std::size_t(512) << 10;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
/// Sanitizers keep their per-thread state in thread-local storage, which glibc carves out of the
/// thread's stack (ThreadSanitizer's leaves 127 KiB of 512), and their frames are larger.
inline constexpr std::size_t kRankStackExtraBytes = std::size_t(1) << 20;
#else
inline constexpr std::size_t kRankStackExtraBytes = 0;
#endif

/// A joinable thread with a kRankStackBytes stack (std::thread cannot set a stack size).
class RankThread {
 public:
  /// Starts `body` on a new thread; `body` must not throw. Throws std::system_error naming the
  /// thread limit when the system refuses another thread.
  explicit RankThread(std::function<void()> body);
  RankThread(RankThread&& other) noexcept;
  RankThread(const RankThread&) = delete;
  RankThread& operator=(const RankThread&) = delete;
  RankThread& operator=(RankThread&&) = delete;
  /// Joins the thread if nobody did, so no thread outlives the state it runs on.
  ~RankThread();
  /// Waits for the thread to end.
  void join();

 private:
  pthread_t thread_{};
  bool joinable_ = false;
};

}  // namespace mgpu::detail
