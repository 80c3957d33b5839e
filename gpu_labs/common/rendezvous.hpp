// Host-side meeting points for the rank threads of one process: a reusable barrier that can be
// aborted, a polling wait that gives up when another rank failed, and the thread runner that
// turns one rank's failure into one error for the caller. Everything that keeps a failing run
// from hanging lives here, as pure host code, so it is tested without a GPU.
#pragma once

#include <mgpu/not_implemented.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
    if (n < 1)
      throw std::invalid_argument("AbortableBarrier: " + std::to_string(n) +
                                  " threads; use at least 1");
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

/// Polls `done()` until it returns true, sleeping `pause` between polls. If `aborted` is set
/// first, calls `on_abort` (when given) and throws RankAborted(where). An exception from `done()`
/// (a CUDA or NCCL error) propagates as it is. This is how a rank waits on device work that a
/// dead peer may never complete: a blocking wait would never return.
inline void wait_until(const std::function<bool()>& done, const std::atomic<bool>& aborted,
                       const std::string& where, const std::function<void()>& on_abort = {},
                       std::chrono::microseconds pause = std::chrono::microseconds(20)) {
  for (;;) {
    if (done()) return;
    if (aborted.load()) {
      if (on_abort) on_abort();
      throw RankAborted(where);
    }
    std::this_thread::sleep_for(pause);
  }
}

/// Runs `rank_main(rank)` for rank = first_rank .. first_rank + n - 1, each on its own thread.
/// The first rank to throw calls `on_failure` (once, from its thread), which must wake every rank
/// that could be waiting for it (abort barriers, set the flag polled by wait_until); those then
/// fail with RankAborted. After every thread has ended:
/// - an mgpu::NotImplemented from any rank is rethrown as it is (the lab reports "not
/// implemented");
/// - otherwise the lowest rank that failed first-hand is rethrown as std::runtime_error
///   "rank r: <message>"; a RankAborted is reported only when no rank failed first-hand.
/// Returns normally when every rank returned.
inline void run_rank_threads(int n, int first_rank, const std::function<void(int)>& rank_main,
                             const std::function<void()>& on_failure) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::once_flag failed;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        rank_main(first_rank + i);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
        std::call_once(failed, [&] {
          if (on_failure) on_failure();
        });
      }
    });
  }
  for (std::thread& t : threads) t.join();

  std::optional<std::pair<int, std::string>> first, fallback;
  for (int i = 0; i < n; ++i) {
    if (!errors[static_cast<std::size_t>(i)]) continue;
    try {
      std::rethrow_exception(errors[static_cast<std::size_t>(i)]);
    } catch (const mgpu::NotImplemented&) {
      std::rethrow_exception(errors[static_cast<std::size_t>(i)]);
    } catch (const RankAborted& e) {
      if (!fallback) fallback = {first_rank + i, e.what()};
    } catch (const std::exception& e) {
      if (!first) first = {first_rank + i, e.what()};
    } catch (...) {
      if (!first) first = {first_rank + i, "unknown exception"};
    }
  }
  if (!first) first = fallback;
  if (first)
    throw std::runtime_error("rank " + std::to_string(first->first) + ": " + first->second);
}

}  // namespace mgpu::gpu
