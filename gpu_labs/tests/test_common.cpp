// Host tests of the common harness: byte formatting and the ledger's peak table, error metrics,
// RESULT lines, the options every lab main shares, the abortable barrier the rank threads meet on. (The ledger itself is the
// runtime's mgpu::MemoryLedger and is tested with the runtime.)
#include "common/lab_main.hpp"
#include "common/rendezvous.hpp"
#include "common/report.hpp"

#include <CLI/CLI.hpp>
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

using namespace mgpu::gpu;
using mgpu::Category;
using mgpu::MemoryLedger;

TEST_CASE("format_bytes uses binary units") {
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(3.0 * 1024 * 1024 * 1024) == "3.00 GiB");
}

TEST_CASE("peak_table lists every category's peak and the peak of the total") {
  MemoryLedger led;
  led.allocate(Category::weights, 3 << 20, "w");
  led.allocate(Category::comm, 1 << 20, "gathered shard");
  led.release(Category::comm, 1 << 20);
  led.allocate(Category::activations, 2 << 20, "acts");
  const std::string table = peak_table(led);
  MESSAGE(table);
  auto row = [&](std::string_view name) {
    const std::size_t at = table.find(name);
    REQUIRE(at != std::string::npos);
    return table.substr(at, table.find('\n', at) - at);
  };
  for (std::size_t c = 0; c < mgpu::kCategoryCount; ++c) {
    const auto category = static_cast<Category>(c);
    CHECK(row(mgpu::to_string(category)).ends_with(format_bytes(static_cast<double>(led.peak(category)))));
  }
  // The total peaked with weights + activations (5 MiB), not at the sum of the peaks (6 MiB).
  CHECK(row("peak total").ends_with(format_bytes(static_cast<double>(led.peak_total()))));
  CHECK(led.peak_total() == std::size_t{5} << 20);
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

TEST_CASE("the shared lab options bind --ranks, --backend, --warmup, --iters and both shapes") {
  CLI::App app;
  CommonOptions common;
  StepOptions steps{2, 5};
  int timing_d = 4096, check_d = 512;
  common.add_to(app);
  steps.add_to(app);
  add_shape_option(app, "d", timing_d, check_d, "width");
  app.parse("--ranks 3 --backend emulated --check-d 64 --iters 1", false);
  CHECK(common.ranks == 3);
  CHECK(common.cluster().backend == Backend::emulated);
  CHECK(steps.warmup == 2);  // untouched default
  CHECK(steps.iters == 1);
  CHECK(check_d == 64);
  CHECK(timing_d == 4096);
  common.backend = "gloo";
  CHECK_THROWS_AS(common.cluster(), std::invalid_argument);
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
