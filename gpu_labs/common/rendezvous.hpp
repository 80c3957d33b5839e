// Host-side meeting points for the rank threads of one process: a reusable barrier that can be
// aborted, so that when one rank throws, the others stop waiting and fail too instead of hanging.
// Pure host code (tested without a GPU).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace mgpu::gpu {

/// Thrown in a rank that was waiting when another rank failed.
class RankAborted : public std::runtime_error {
 public:
  /// @param where what the rank was waiting in, e.g. "barrier".
  explicit RankAborted(const std::string& where)
      : std::runtime_error("stopped in " + where + " because another rank failed") {}
};

/// Reusable barrier for n threads with abort(). Waiting threads see RankAborted after abort().
class AbortableBarrier {
 public:
  /// A barrier for `n` threads (n >= 1).
  explicit AbortableBarrier(int n) : n_(n) {
    if (n < 1) throw std::invalid_argument("AbortableBarrier: " + std::to_string(n) + " threads; use at least 1");
  }
  /// Blocks until n threads have called wait() in this round. Throws RankAborted if aborted.
  void wait() {
    std::unique_lock lock(mu_);
    if (aborted_) throw RankAborted("barrier");
    const std::uint64_t round = round_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return round_ != round || aborted_; });
    if (round_ == round) throw RankAborted("barrier");
  }
  /// Wakes every waiter with RankAborted; later waits throw at once.
  void abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }
  /// Whether abort() was called.
  bool aborted() const {
    std::lock_guard lock(mu_);
    return aborted_;
  }

 private:
  const int n_;
  int arrived_ = 0;
  std::uint64_t round_ = 0;
  bool aborted_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace mgpu::gpu
