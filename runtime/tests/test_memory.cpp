// The memory ledger: exact current and peak bytes per category and in total, RAII Buffers,
// and an out-of-memory error that says what was in use.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

using namespace mgpu;

TEST_CASE("ledger peaks are exact on a scripted sequence") {
  MemoryLedger m(3);
  m.allocate(Category::weights, 100, "w");
  m.allocate(Category::grads, 50, "g");
  m.release(Category::grads, 50);
  m.allocate(Category::activations, 200, "a1");  // total 300
  m.allocate(Category::activations, 30, "a2");   // total 330
  m.release(Category::activations, 200);
  m.allocate(Category::optimizer, 150, "adam");  // total 280
  CHECK(m.current(Category::weights) == 100);
  CHECK(m.current(Category::activations) == 30);
  CHECK(m.peak(Category::activations) == 230);
  CHECK(m.peak(Category::grads) == 50);
  CHECK(m.current(Category::grads) == 0);
  CHECK(m.current_total() == 280);
  CHECK(m.peak_total() == 330);  // not the sum of per-category peaks (530)
  m.reset_peaks();
  CHECK(m.peak_total() == 280);
  CHECK(m.peak(Category::activations) == 30);
  CHECK_THROWS_AS(m.release(Category::master, 1), std::logic_error);
}

TEST_CASE("Buffer is zeroed, counts its bytes while alive, and moves without double counting") {
  MemoryLedger m;
  {
    Buffer<bf16> a(m, Category::weights, 1000, "w");
    CHECK(m.current(Category::weights) == 2000);
    CHECK(float(a[999]) == 0.0f);
    Buffer<bf16> b = std::move(a);
    CHECK(a.empty());
    CHECK(b.size() == 1000);
    CHECK(m.current(Category::weights) == 2000);
    Buffer<double> c(m, Category::master, 10, "master");
    CHECK(c.span()[9] == 0.0);
    c.reset();
    CHECK(m.current(Category::master) == 0);
    CHECK(m.peak(Category::master) == 80);
  }
  CHECK(m.current_total() == 0);
  CHECK(m.peak_total() == 2080);
}

TEST_CASE("exceeding the capacity throws OutOfMemory naming rank, request, label and breakdown") {
  MemoryLedger m(5, 1000);
  Buffer<float> w(m, Category::weights, 200, "layer0.weight");  // 800 bytes
  try {
    Buffer<float> a(m, Category::activations, 100, "layer0.act");
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    MESSAGE(msg);
    CHECK(msg.find("rank 5") != std::string::npos);
    CHECK(msg.find("400 bytes") != std::string::npos);
    CHECK(msg.find("layer0.act") != std::string::npos);
    CHECK(msg.find("weights: 800 bytes") != std::string::npos);
  }
  CHECK(m.current_total() == 800);  // the failed request recorded nothing
}

TEST_CASE("per-rank capacity in the cluster: OutOfMemory reaches the caller") {
  ClusterConfig cfg;
  cfg.world_size = 4;
  cfg.memory_capacity_bytes = 4096;
  Cluster cluster(cfg);
  CHECK_THROWS_AS(cluster.run([](Rank& r) {
    Buffer<double> x(r.memory(), Category::activations, r.id() == 2 ? 1000 : 10, "x");
    r.world().barrier();
  }),
                  OutOfMemory);
}

TEST_CASE("each rank's peak is reported after the run") {
  Cluster cluster(3);
  cluster.run([](Rank& r) {
    Buffer<float> w(r.memory(), Category::weights, 100 * static_cast<std::size_t>(r.id() + 1), "w");
    { Buffer<float> act(r.memory(), Category::activations, 50, "act"); }
  });
  for (int r = 0; r < 3; ++r) {
    CHECK(cluster.report(r).memory.peak(Category::weights) ==
          400u * static_cast<std::size_t>(r + 1));
    CHECK(cluster.report(r).memory.peak_total() == 400u * static_cast<std::size_t>(r + 1) + 200);
    CHECK(cluster.report(r).memory.current_total() == 0);
  }
}

TEST_CASE("tensor views map Buffers row-major and reject shapes that do not fit") {
  MemoryLedger m;
  Buffer<float> b(m, Category::weights, 6, "w");
  auto M = as_matrix(b, 2, 3);  // (2, 3)
  M(1, 0) = 5.0f;
  CHECK(b[3] == 5.0f);
  const Buffer<float>& cb = b;
  CHECK(as_vector(cb).sum() == 5.0f);
  CHECK(as_vector(b, 3, 2)(0) == 5.0f);
  CHECK_THROWS_AS(as_matrix(b, 3, 3), std::invalid_argument);
}
