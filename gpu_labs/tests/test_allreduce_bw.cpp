// Tests of the allreduce_bw lab: the table maths (host), and on a GPU the emulated collectives
// and the ring all-reduce against exact expected sums.
#include "allreduce_bw/bench.hpp"
#include "allreduce_bw/ring.hpp"
#include "common/device_buffer.hpp"
#include "common/lab_main.hpp"
#include "common/shard.hpp"
#include "device.hpp"

#include <doctest/doctest.h>

#include <numeric>
#include <stdexcept>
#include <string>

using namespace mgpu::gpu;
using mgpu::Category;
using mgpu::MemoryLedger;

TEST_CASE("size sweep grows by the factor and stops at the maximum") {
  CHECK(size_sweep(1024, 65536, 4) == std::vector<std::size_t>{1024, 4096, 16384, 65536});
  CHECK(size_sweep(8, 8, 2) == std::vector<std::size_t>{8});
  CHECK_THROWS_AS(size_sweep(64, 32, 2), std::invalid_argument);
}

TEST_CASE("a table row's bus bandwidth is algbw times the collective's factor") {
  const BwRow r =
      make_row("all_reduce", 1000000000, 250000000, DType::f32, 1e6, 0, 8);  // 1 GB in 1 s
  CHECK(r.algbw == doctest::Approx(1.0));
  CHECK(r.busbw == doctest::Approx(2.0 * 7 / 8));
  const std::string line = format_row(r);
  CHECK(line.find("all_reduce") == 0);
  CHECK(line.find("float") != std::string::npos);
}

namespace {

// Runs `body` on `ranks` emulated ranks (the tests below need only one GPU) and adds up what the
// ranks return: the number of wrong elements.
int wrong_on_emulated(int ranks, const std::function<int(DeviceComm&)>& body) {
  DeviceCluster cluster({ranks, Backend::emulated});
  const std::vector<int> wrong = run_ranks(cluster, body);
  return std::accumulate(wrong.begin(), wrong.end(), 0);
}

std::vector<float> host_pattern(std::size_t n, float factor, std::size_t offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = factor * static_cast<float>((i + offset) % 7 + 1);
  return v;
}

}  // namespace

MGPU_DEVICE_TEST_CASE(
    "emulated all_reduce, all_gather and reduce_scatter give exact sums on every rank") {
  MGPU_REQUIRE_DEVICE();
  for (int n : {1, 3, 4}) {
    const std::size_t block = 37, full = block * static_cast<std::size_t>(n);
    const float total = static_cast<float>(n * (n + 1) / 2);
    const int bad = wrong_on_emulated(n, [&](DeviceComm& c) {
      const auto r = static_cast<std::size_t>(c.rank());
      MemoryLedger& led = c.ledger();
      DeviceBuffer<float> a(led, Category::comm, full), out(led, Category::comm, full);
      a.upload(host_pattern(full, static_cast<float>(r + 1), 0), c.stream());
      c.all_reduce(a.data(), a.data(), full, DType::f32);  // in place
      const std::vector<float> sum = a.download(c.stream());
      a.upload(host_pattern(full, static_cast<float>(r + 1), 0), c.stream());
      c.reduce_scatter(a.data(), out.data(), block, DType::f32);
      std::vector<float> rs = out.download(c.stream());
      DeviceBuffer<float> mine(led, Category::comm, block);
      mine.upload(host_pattern(block, static_cast<float>(r + 1), r * block), c.stream());
      c.all_gather(mine.data(), out.data(), block, DType::f32);
      const std::vector<float> ag = out.download(c.stream());
      int wrong = 0;
      for (std::size_t i = 0; i < full; ++i) {
        wrong += sum[i] != total * static_cast<float>(i % 7 + 1);
        wrong += ag[i] != static_cast<float>(i / block + 1) * static_cast<float>(i % 7 + 1);
      }
      for (std::size_t i = 0; i < block; ++i)
        wrong += rs[i] != total * static_cast<float>((r * block + i) % 7 + 1);
      return wrong;
    });
    CHECK(bad == 0);
  }
}

// ZeRO-3 puts the gradients' reduce-scatter on a side stream while the main stream goes on with
// the next all-reduce: the two collectives are in flight together, and neither may see the
// other's staged input. Large buffers and several rounds, so that an overlap is all but certain.
MGPU_DEVICE_TEST_CASE(
    "emulated collectives on a side stream and the main stream at once stay exact") {
  MGPU_REQUIRE_DEVICE();
  const int n = 4;
  const std::size_t block = std::size_t{1} << 18, full = block * std::size_t{4},
                    other = std::size_t{1} << 20;
  const float total = static_cast<float>(n * (n + 1) / 2);
  const int bad = wrong_on_emulated(n, [&](DeviceComm& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    MemoryLedger& led = c.ledger();
    cudaStream_t side = nullptr;
    MGPU_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    DeviceBuffer<float> grads(led, Category::comm, full), shard(led, Category::comm, block);
    DeviceBuffer<float> w(led, Category::comm, other);
    int wrong = 0;
    for (int round = 0; round < 4; ++round) {
      grads.upload(host_pattern(full, static_cast<float>(r + 1), 0), side);
      w.upload(host_pattern(other, static_cast<float>(2 * (r + 1)), 3), c.stream());
      c.reduce_scatter(grads.data(), shard.data(), block, DType::f32, side);
      c.all_reduce(w.data(), w.data(), other, DType::f32);  // staged while the side one reads
      c.synchronize(side);
      c.synchronize();
      const std::vector<float> rs = shard.download(side), ar = w.download(c.stream());
      for (std::size_t i = 0; i < block; ++i)
        wrong += rs[i] != total * static_cast<float>((r * block + i) % 7 + 1);
      for (std::size_t i = 0; i < other; ++i)
        wrong += ar[i] != 2 * total * static_cast<float>((i + 3) % 7 + 1);
    }
    MGPU_CUDA_CHECK(cudaStreamDestroy(side));
    return wrong;
  });
  CHECK(bad == 0);
}

MGPU_DEVICE_TEST_CASE(
    "ring all-reduce equals the exact sum for any length, also shorter than the ring") {
  MGPU_REQUIRE_DEVICE();
  for (int n : {2, 3, 5}) {
    for (std::size_t count :
         {std::size_t{1}, std::size_t{4}, std::size_t{1000}, std::size_t{4099}}) {
      const int bad = wrong_on_emulated(n, [&](DeviceComm& c) {
        MemoryLedger& led = c.ledger();
        DeviceBuffer<float> data(led, Category::comm, count);
        DeviceBuffer<float> scratch(led, Category::comm, chunk_range(count, n, 0).count + 1);
        data.upload(host_pattern(count, static_cast<float>(c.rank() + 1), 0), c.stream());
        ring_all_reduce(c, data.data(), count, scratch.data());
        const std::vector<float> got = data.download(c.stream());
        const float total = static_cast<float>(n * (n + 1) / 2);
        int wrong = 0;
        for (std::size_t i = 0; i < count; ++i)
          wrong += got[i] != total * static_cast<float>(i % 7 + 1);
        return wrong;
      });
      INFO("ranks " << n << ", count " << count);
      CHECK(bad == 0);
    }
  }
}

MGPU_DEVICE_TEST_CASE("a rank that fails stops the others and its message reaches the caller") {
  MGPU_REQUIRE_DEVICE();
  CHECK_THROWS_WITH_AS(DeviceCluster({3, Backend::emulated}).run([](DeviceComm& c) {
    if (c.rank() == 1) throw std::runtime_error("boom");
    c.barrier();  // ranks 0 and 2 would wait here forever
  }),
                       "rank 1: boom", std::runtime_error);
}

MGPU_DEVICE_TEST_CASE(
    "one failing rank releases ranks waiting in a collective, emulated and over NCCL") {
  MGPU_REQUIRE_DEVICE();
  // Emulated: rank 2 fails before the all-reduce that ranks 0 and 1 are already waiting in.
  CHECK_THROWS_WITH_AS(DeviceCluster({3, Backend::emulated}).run([](DeviceComm& c) {
    DeviceBuffer<float> b(c.ledger(), Category::comm, 1024);
    b.zero(c.stream());
    if (c.rank() == 2) throw std::runtime_error("rank two gave up");
    c.all_reduce(b.data(), b.data(), 1024, DType::f32);
    c.synchronize();
  }),
                       "rank 2: rank two gave up", std::runtime_error);
  // NCCL, one rank per visible GPU: the last rank fails after one good all-reduce, while the
  // others (if any) wait in the second; its communicator is aborted before its memory is freed.
  const int n = DeviceCluster::device_count();
  const std::string want = "rank " + std::to_string(n - 1) + ": last rank gave up";
  CHECK_THROWS_WITH_AS(DeviceCluster({n, Backend::nccl}).run([n](DeviceComm& c) {
    DeviceBuffer<float> b(c.ledger(), Category::comm, 1024);
    b.zero(c.stream());
    c.all_reduce(b.data(), b.data(), 1024, DType::f32);
    c.synchronize();
    if (c.rank() == n - 1) throw std::runtime_error("last rank gave up");
    c.all_reduce(b.data(), b.data(), 1024, DType::f32);
    c.synchronize();
  }),
                       want.c_str(), std::runtime_error);
  // Nothing is left behind: a new communicator starts and works.
  DeviceCluster({1, Backend::nccl}).run([](DeviceComm& c) { c.barrier(); });
}
