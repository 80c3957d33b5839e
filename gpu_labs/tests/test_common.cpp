// Host tests of the common harness: byte formatting and the ledger's peak table, error metrics
// (NaN included), RESULT lines, the options every lab main shares, the graded values a lab writes
// to the grader's descriptor, how a failed device query is
// reported, and the abort path the rank threads take when one of them fails. (The ledger itself
// is the runtime's mgpu::MemoryLedger and is tested with the runtime.)
#include "common/device_buffer.hpp"
#include "common/lab_main.hpp"
#include "common/rendezvous.hpp"
#include "common/report.hpp"
#include "device.hpp"

#include <doctest/doctest.h>
#include <CLI/CLI.hpp>
#include <mgpu/not_implemented.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
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
    CHECK(row(mgpu::to_string(category))
              .ends_with(format_bytes(static_cast<double>(led.peak(category)))));
  }
  // The total peaked with weights + activations (5 MiB), not at the sum of the peaks (6 MiB).
  CHECK(row("peak total").ends_with(format_bytes(static_cast<double>(led.peak_total()))));
  CHECK(led.peak_total() == std::size_t{5} << 20);
}

TEST_CASE("scaled_max_error is relative to the reference's largest magnitude") {
  const std::vector<double> want{0.0, 2.0, -4.0}, got{0.1, 2.0, -4.2};
  const double e = scaled_max_error(got, want);
  MESSAGE("max rel error " << e);
  CHECK(e == doctest::Approx(0.2 / 4.0));
  CHECK(scaled_max_error(want, want) == 0.0);
  CHECK(norm_rel_error(got, want) == doctest::Approx(std::sqrt(0.01 + 0.04) / std::sqrt(20.0)));
  CHECK_THROWS_AS(scaled_max_error(got, std::vector<double>{1.0}), std::invalid_argument);
}

TEST_CASE("a NaN anywhere in a result makes every error check fail") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> want{1.0, -2.0, 3.0};
  const std::vector<double> all_nan(3, nan), one_nan{1.0, nan, 3.0}, last_nan{1.0, -2.0, nan};
  for (const auto* got : {&all_nan, &one_nan, &last_nan}) {
    CHECK(std::isnan(scaled_max_error(*got, want)));
    CHECK(std::isnan(norm_rel_error(*got, want)));
    CHECK_FALSE(within_tolerance(scaled_max_error(*got, want), 1e9));
  }
  CHECK(std::isnan(scaled_max_error(want, all_nan)));  // a broken reference does not pass either
  // Folding the errors of several outputs or ranks keeps a NaN in either position.
  CHECK(std::isnan(worse_error(0.0, nan)));
  CHECK(std::isnan(worse_error(nan, 0.0)));
  CHECK(worse_error(1e-3, 2e-3) == 2e-3);
  CHECK(within_tolerance(1e-3, 2e-2));
  CHECK_FALSE(within_tolerance(std::numeric_limits<double>::infinity(), 2e-2));
  CHECK(scaled_max_error(std::vector<double>{1.0}, std::vector<double>{0.0}) ==
        std::numeric_limits<double>::infinity());
}

TEST_CASE(
    "a failed device query is reported with its error name, code and cause, not as no device") {
  DeviceQuery no_driver{cudaErrorInsufficientDriver, 0, 0, 13000};
  const std::string a = no_driver.describe();
  MESSAGE(a);
  CHECK_FALSE(no_driver.usable());
  CHECK(a.find("CUDA device query failed") != std::string::npos);
  CHECK(a.find("cudaErrorInsufficientDriver") != std::string::npos);
  CHECK(a.find("(35:") != std::string::npos);
  CHECK(a.find("no NVIDIA driver") != std::string::npos);
  CHECK(a.find("no CUDA device") == std::string::npos);

  const std::string old = DeviceQuery{cudaErrorInsufficientDriver, 0, 12020, 13000}.describe();
  MESSAGE(old);
  CHECK(old.find("driver supports CUDA 12.2") != std::string::npos);
  CHECK(old.find("built for CUDA 13.0") != std::string::npos);

  const std::string none = DeviceQuery{cudaErrorNoDevice, 0, 13000, 13000}.describe();
  CHECK(none.find("no CUDA device visible") != std::string::npos);
  CHECK(none.find("cudaErrorNoDevice") != std::string::npos);
  const DeviceQuery two{cudaSuccess, 2, 13000, 13000};
  CHECK(two.usable());
  CHECK(two.describe().find("2 CUDA device(s)") == 0);
}

TEST_CASE("device tests skip without a usable device, and fail instead when a GPU is required") {
  const DeviceQuery broken{cudaErrorInsufficientDriver, 0, 0, 13000},
      good{cudaSuccess, 1, 13000, 13000};
  CHECK(test::skip_device_tests(broken, false));
  CHECK_FALSE(test::skip_device_tests(broken, true));  // runs, and MGPU_REQUIRE_DEVICE fails it
  CHECK_FALSE(test::skip_device_tests(good, false));
  CHECK_FALSE(test::skip_device_tests(good, true));
  const char* saved = std::getenv("MGPU_REQUIRE_GPU");
  const std::string keep = saved != nullptr ? saved : "";
  setenv("MGPU_REQUIRE_GPU", "1", 1);
  CHECK(test::gpu_required());
  setenv("MGPU_REQUIRE_GPU", "0", 1);
  CHECK_FALSE(test::gpu_required());
  if (saved != nullptr) {
    setenv("MGPU_REQUIRE_GPU", keep.c_str(), 1);
  } else {
    unsetenv("MGPU_REQUIRE_GPU");
  }
}

// Only a machine whose query fails can provoke this; on a GPU machine the case is skipped (shown
// as skipped, never as passed).
TEST_CASE("on a machine whose device query fails, a lab stops with that error, not with no device" *
          doctest::skip(mgpu::gpu::test::device_query().usable())) {
  const DeviceQuery q = DeviceCluster::query_devices();
  MESSAGE("this machine: " << q.describe());
  try {
    DeviceCluster cluster({1, Backend::automatic});
    FAIL("DeviceCluster started without a usable device");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find(q.describe()) != std::string::npos);
    CHECK(what.find(cudaGetErrorName(q.status)) != std::string::npos);
  }
}

TEST_CASE("a RESULT line is one line of key=value fields") {
  const std::string s = ResultLine("tp_ffn")
                            .add("check", "pass")
                            .add("err", 0.00123)
                            .add_int("ranks", 4)
                            .add("note", "a b")
                            .str();
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
  app.parse("--ranks 3 --backend emulated --check-d 64 --iters 1 --result-fd 7", false);
  CHECK(common.result_fd == 7);
  CHECK(common.ranks == 3);
  CHECK(common.cluster().backend == Backend::emulated);
  CHECK(steps.warmup == 2);  // untouched default
  CHECK(steps.iters == 1);
  CHECK(check_d == 64);
  CHECK(timing_d == 4096);
  common.backend = "gloo";
  CHECK_THROWS_AS(common.cluster(), std::invalid_argument);
}

namespace {

// What guarded_main writes to a pipe standing in for the grader's descriptor, and its exit status.
std::pair<nlohmann::json, int> graded_run(const std::function<int(GradedValues&)>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const int code = guarded_main("lab", fds[1], body);  // closes fds[1]
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  return {nlohmann::json::parse(text), code};
}

}  // namespace

TEST_CASE(
    "a graded run writes its outputs, not its verdict, to the grader's descriptor and exits 0") {
  auto [doc, code] = graded_run([](GradedValues& v) {
    const double y[] = {1.5, std::numeric_limits<double>::quiet_NaN(), -INFINITY};
    v.add("y", y);
    return static_cast<int>(lab_fail);  // its own check failed: the grader decides anyway
  });
  CHECK(code == 0);
  CHECK(doc["status"] == "ok");
  CHECK(doc["values"]["y"] == nlohmann::json::parse(R"([1.5, "nan", "-inf"])"));
  CHECK_FALSE(doc.contains("check"));

  std::tie(doc, code) =
      graded_run([](GradedValues&) -> int { throw mgpu::NotImplemented("gpu lab part"); });
  CHECK(code == 0);
  CHECK(doc["status"] == "not-implemented");
  CHECK(doc["message"].get<std::string>().find("gpu lab part") != std::string::npos);

  std::tie(doc, code) = graded_run([](GradedValues& v) {
    v.add("ring_1024", std::vector<double>{1.0});
    v.set_not_implemented("gpu allreduce_bw ring_all_reduce");
    return static_cast<int>(lab_not_implemented);
  });
  CHECK(doc["status"] == "not-implemented");
  CHECK_FALSE(doc.contains("values"));

  std::tie(doc, code) =
      graded_run([](GradedValues&) -> int { throw std::runtime_error("no device"); });
  CHECK(doc["status"] == "exception");
  CHECK(doc["message"] == "no device");
  // Without a descriptor the exit status is the lab's own verdict, as check.sh reads it.
  CHECK(guarded_main("lab", -1, [](GradedValues&) { return static_cast<int>(lab_fail); }) ==
        lab_fail);
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

TEST_CASE("wait_until returns when done, and gives up with RankAborted once another rank failed") {
  std::atomic<bool> aborted{false};
  int polls = 0;
  wait_until([&] { return ++polls == 3; }, aborted, "test");
  CHECK(polls == 3);

  int aborts = 0;
  std::thread failer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    aborted = true;
  });
  CHECK_THROWS_WITH_AS(wait_until([] { return false; }, aborted, "synchronize", [&] { ++aborts; }),
                       "stopped in synchronize because another rank failed", RankAborted);
  failer.join();
  CHECK(aborts == 1);
  // An error found while polling (a CUDA or NCCL error) comes through as it is.
  std::atomic<bool> fine{false};
  CHECK_THROWS_WITH_AS(
      wait_until([]() -> bool { throw std::runtime_error("NCCL error"); }, fine, "x"), "NCCL error",
      std::runtime_error);
}

TEST_CASE("when one rank fails, the others are woken, and the caller sees the first-hand error") {
  // The shape of DeviceCluster::run: ranks meet at a barrier before creating their
  // communicators, then wait on device work with wait_until. Rank 2 fails before the barrier.
  constexpr int n = 4;
  AbortableBarrier started(n);
  std::atomic<bool> aborted{false};
  std::atomic<int> failures{0}, stopped{0};
  auto on_failure = [&] {
    ++failures;
    aborted = true;
    started.abort();
  };
  CHECK_THROWS_WITH_AS(run_rank_threads(
                           n, 0,
                           [&](int rank) {
                             try {
                               if (rank == 2) throw std::runtime_error("cudaSetDevice failed");
                               started.wait();
                             } catch (const RankAborted&) {
                               ++stopped;
                               throw;
                             }
                           },
                           on_failure),
                       "rank 2: cudaSetDevice failed", std::runtime_error);
  CHECK(failures == 1);
  CHECK(stopped == n - 1);

  // Past the barrier: rank 1 fails while the others wait on "device work" that never finishes.
  aborted = false;
  CHECK_THROWS_WITH_AS(run_rank_threads(
                           3, 0,
                           [&](int rank) {
                             if (rank == 1) throw std::runtime_error("boom");
                             wait_until([] { return false; }, aborted, "synchronize");
                           },
                           [&] { aborted = true; }),
                       "rank 1: boom", std::runtime_error);

  // An unfinished exercise stays NotImplemented, so the lab can say so.
  aborted = false;
  CHECK_THROWS_AS(run_rank_threads(
                      2, 0,
                      [&](int rank) {
                        if (rank == 0) throw mgpu::NotImplemented("gpu zero3 zero3_forward");
                        wait_until([] { return false; }, aborted, "synchronize");
                      },
                      [&] { aborted = true; }),
                  mgpu::NotImplemented);

  // Ranks of a multi-process launch are numbered from first_rank; success returns normally.
  std::atomic<int> sum{0};
  run_rank_threads(
      2, 6, [&](int rank) { sum += rank; }, [] {});
  CHECK(sum == 13);
}

TEST_CASE("a failing NCCL rank skips device-wide waits while it unwinds, and only then") {
  struct Probe {
    bool* seen;
    ~Probe() { *seen = rank_unwinding(); }
  };
  bool seen = true;
  std::thread([&] {
    { Probe p{&seen}; }  // an NCCL rank's thread, but no exception
  }).join();
  CHECK_FALSE(seen);
  std::thread([&] {
    nccl_rank_thread = true;
    { Probe p{&seen}; }
  }).join();
  CHECK_FALSE(seen);
  std::thread([&] {
    nccl_rank_thread = true;
    try {
      Probe p{&seen};
      throw std::runtime_error("rank failed");
    } catch (const std::runtime_error&) {
    }
  }).join();
  CHECK(seen);
  std::thread([&] {  // an emulated rank, or the main thread: frees as usual even when unwinding
    try {
      Probe p{&seen};
      throw std::runtime_error("rank failed");
    } catch (const std::runtime_error&) {
    }
  })
      .join();
  CHECK_FALSE(seen);
}
