// Host tests of the common harness: memory ledger, error metrics, RESULT lines, the abortable
// barrier the rank threads meet on.
#include "common/ledger.hpp"
#include "common/rendezvous.hpp"
#include "common/report.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

using namespace mgpu::gpu;

TEST_CASE("memory ledger tracks current and peak bytes per category and in total") {
  MemoryLedger led;
  led.add(Category::weights, 100);
  led.add(Category::comm, 50);
  led.release(Category::comm, 50);
  led.add(Category::comm, 20);
  CHECK(led.current(Category::weights) == 100);
  CHECK(led.current(Category::comm) == 20);
  CHECK(led.peak(Category::comm) == 50);
  CHECK(led.current_total() == 120);
  CHECK(led.peak_total() == 150);  // the moment both weights and the first comm buffer were held
  CHECK_THROWS_AS(led.release(Category::grads, 1), std::logic_error);
  CHECK(led.summary().find("peak total") != std::string::npos);
}

TEST_CASE("format_bytes uses binary units") {
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(3.0 * 1024 * 1024 * 1024) == "3.00 GiB");
}

TEST_CASE("max_rel_error is relative to the reference's largest magnitude") {
  const std::vector<double> want{0.0, 2.0, -4.0}, got{0.1, 2.0, -4.2};
  const double e = max_rel_error(got, want);
  MESSAGE("max rel error " << e);
  CHECK(e == doctest::Approx(0.2 / 4.0));
  CHECK(max_rel_error(want, want) == 0.0);
  CHECK(norm_rel_error(got, want) == doctest::Approx(std::sqrt(0.01 + 0.04) / std::sqrt(20.0)));
  CHECK_THROWS_AS(max_rel_error(got, std::vector<double>{1.0}), std::invalid_argument);
}

TEST_CASE("a RESULT line is one line of key=value fields") {
  const std::string s = ResultLine("tp_ffn").add("check", "pass").add("err", 0.00123).add_int("ranks", 4).add("note", "a b").str();
  CHECK(s == "RESULT lab=tp_ffn check=pass err=0.00123 ranks=4 note=a_b");
}

TEST_CASE("abortable barrier releases every round together and stops waiters on abort") {
  constexpr int n = 4;
  AbortableBarrier barrier(n);
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&] {
      for (int round = 0; round < 3; ++round) {
        barrier.wait();
        ++passed;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(passed == 3 * n);

  AbortableBarrier lonely(2);
  std::atomic<bool> aborted{false};
  std::thread waiter([&] {
    try {
      lonely.wait();  // its partner never comes
    } catch (const RankAborted&) {
      aborted = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  lonely.abort();
  waiter.join();
  CHECK(aborted);
  CHECK_THROWS_AS(lonely.wait(), RankAborted);
}
