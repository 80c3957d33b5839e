// Rank threads through pthreads, the only portable-enough way on Linux to choose a stack size.
#include "rank_thread.hpp"

#include <memory>
#include <system_error>

namespace mgpu::detail {

namespace {

void* run_body(void* arg) {
  std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()>*>(arg));
  (*body)();
  return nullptr;
}

/// Throws std::system_error for a pthread call that returned `code` != 0.
void check(int code) {
  if (code != 0) {
    throw std::system_error(
        code, std::generic_category(),
        "mgpu: could not start a rank thread (too many threads? see ulimit -u)");
  }
}

}  // namespace

RankThread::RankThread(std::function<void()> body) {
  auto arg = std::make_unique<std::function<void()>>(std::move(body));
  pthread_attr_t attr;
  check(pthread_attr_init(&attr));
  int code = pthread_attr_setstacksize(&attr, kRankStackBytes + kRankStackExtraBytes);
  if (code == 0) code = pthread_create(&thread_, &attr, &run_body, arg.get());
  pthread_attr_destroy(&attr);
  check(code);
  arg.release();  // the thread owns it now
  joinable_ = true;
}

RankThread::RankThread(RankThread&& other) noexcept
    : thread_(other.thread_), joinable_(other.joinable_) {
  other.joinable_ = false;
}

RankThread::~RankThread() { join(); }

void RankThread::join() {
  if (!joinable_) return;
  pthread_join(thread_, nullptr);
  joinable_ = false;
}

}  // namespace mgpu::detail
