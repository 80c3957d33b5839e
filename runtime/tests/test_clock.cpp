// Virtual time follows the cost model exactly: compute at the FLOP rate, messages at
// latency + bytes / bandwidth (intra- vs inter-node), ring-model collectives, and overlap of
// compute with non-blocking communication.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <limits>

using namespace mgpu;

namespace {
ClusterConfig config(int n, int per_node = 8) {
  ClusterConfig c;
  c.world_size = n;
  c.gpus_per_node = per_node;
  c.flops_per_second = 1e12;
  c.intra_node_bytes_per_second = 100e9;
  c.inter_node_bytes_per_second = 10e9;
  c.intra_node_latency_seconds = 2e-6;
  c.inter_node_latency_seconds = 20e-6;
  return c;
}
}  // namespace

TEST_CASE("compute advances the clock by flops / rate") {
  Cluster cluster(config(1));
  cluster.run([](Rank& r) {
    r.compute(3e12, "matmul");
    CHECK(r.now() == doctest::Approx(3.0));
  });
  CHECK(cluster.report(0).clock.compute_time() == doctest::Approx(3.0));
  CHECK(cluster.report(0).clock.idle_time() == 0.0);
}

TEST_CASE(
    "a token passed around a ring takes one latency + bytes/bandwidth per hop, slower between "
    "nodes") {
  const int n = 4;
  const std::size_t count = 250000;  // 1 MB of floats
  Cluster cluster(config(n, 2));     // nodes {0,1} and {2,3}: hop 1->2 crosses nodes
  cluster.run([&](Rank& r) {
    Comm& w = r.world();
    std::vector<float> token(count);
    if (w.rank() > 0) w.recv(token, w.rank() - 1, 0);
    if (w.rank() < n - 1) w.send(token, w.rank() + 1, 0);
  });
  const double bytes = count * 4.0;
  const double intra = 2e-6 + bytes / 100e9, inter = 20e-6 + bytes / 10e9;
  CHECK(cluster.report(1).clock.now() ==
        doctest::Approx(intra + inter));  // recv, then its send to node 1
  CHECK(cluster.report(3).clock.now() == doctest::Approx(intra + inter + intra));
  std::printf("ring of 3 hops: %.3f us (model %.3f us)\n", cluster.report(3).clock.now() * 1e6,
              (2 * intra + inter) * 1e6);
}

TEST_CASE("a compute charge that is negative, infinite or NaN is refused, naming its label") {
  Cluster cluster(config(1));
  for (double flops :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(flops);
    CHECK_THROWS_WITH_AS(cluster.run([&](Rank& r) { r.compute(flops, "attention"); }),
                         doctest::Contains("compute 'attention'"), std::invalid_argument);
  }
  cluster.run([](Rank& r) { r.compute(0.0, "nothing"); });  // zero is a charge like any other
  CHECK(cluster.makespan() == 0.0);
}

TEST_CASE("a receive completes at max(post time, arrival), recording idle time") {
  Cluster cluster(config(2));
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    std::vector<double> x(1000);
    if (w.rank() == 0) {
      r.compute(1e9, "late");  // 1 ms
      w.send(x, 1);
    } else {
      w.recv(x, 0);
    }
  });
  const double arrival = 1e-3 + 2e-6 + 8000 / 100e9;
  CHECK(cluster.report(1).clock.now() == doctest::Approx(arrival));
  CHECK(cluster.report(1).clock.idle_time() == doctest::Approx(arrival));
}

TEST_CASE("collectives take the ring-model time and start when the last member arrives") {
  const int n = 4;
  const std::size_t count = 1 << 20;
  Cluster cluster(config(n));
  cluster.run([&](Rank& r) {
    r.compute(1e9 * r.id(), "straggle");  // rank 3 arrives last, at 3 ms
    std::vector<float> v(count), part(count / n);
    r.world().all_reduce(v);
    r.world().reduce_scatter(v, part);
    r.world().all_gather(part, v);
    r.world().broadcast(v, 1);
  });
  const double S = count * 4.0, a = 2e-6, b = 100e9;
  const double ar = 2 * (n - 1) * (a + S / (n * b));
  const double rs = (n - 1) * (a + S / (n * b));
  const double bc = (n - 1) * a + S / b;
  for (int r = 0; r < n; ++r) {
    CHECK(cluster.report(r).clock.now() == doctest::Approx(3e-3 + ar + 2 * rs + bc));
  }
  CHECK(cluster.report(0).clock.idle_time() == doctest::Approx(3e-3 + ar + 2 * rs + bc));
  CHECK(cluster.report(3).clock.comm_time() == doctest::Approx(ar + 2 * rs + bc));
}

TEST_CASE("a group spanning nodes runs at the inter-node bandwidth") {
  const int n = 4;
  Cluster cluster(config(n, 2));
  cluster.run([](Rank& r) {
    std::vector<float> v(1000);
    r.world().all_reduce(v);
  });
  CHECK(cluster.report(0).clock.now() == doctest::Approx(2 * 3 * (20e-6 + 4000 / (4 * 10e9))));
}

TEST_CASE("compute overlaps a non-blocking all_reduce: elapsed = max(compute, comm), not the sum") {
  const int n = 2;
  const std::size_t count = 25'000'000;  // 100 MB: comm = 2 * (2us + 50MB/100GB/s) = 1.004 ms
  const double comm = 2 * (2e-6 + count * 4.0 / (2 * 100e9));
  for (double flops : {0.5e9, 2e9}) {  // 0.5 ms (comm-bound) and 2 ms (compute-bound)
    Cluster cluster(config(n));
    cluster.run([&](Rank& r) {
      std::vector<float> g(count, 1.0f);
      Request q = r.world().iall_reduce(g);
      r.compute(flops, "backward");
      q.wait();
      CHECK(g[0] == 2.0f);
    });
    const double comp = flops / 1e12;
    CAPTURE(flops);
    CHECK(cluster.report(0).clock.now() == doctest::Approx(std::max(comp, comm)));
    CHECK(cluster.report(0).clock.idle_time() == doctest::Approx(std::max(0.0, comm - comp)));
    std::printf("overlap: compute %.3f ms, comm %.3f ms, elapsed %.3f ms\n", comp * 1e3, comm * 1e3,
                cluster.report(0).clock.now() * 1e3);
  }
}

TEST_CASE("sends queue on the comm stream behind earlier communication") {
  Cluster cluster(config(2));
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    std::vector<float> big(250000), small(1);
    if (w.rank() == 0) {
      Request a = w.isend(big, 1, 0);
      Request b = w.isend(small, 1, 1);
      b.wait();
      CHECK(r.now() == doctest::Approx(2 * 2e-6 + 1e6 / 100e9 + 4 / 100e9));
    } else {
      w.recv(small, 0, 1);
      w.recv(big, 0, 0);
    }
  });
}

TEST_CASE("virtual time and timelines are identical across runs") {
  auto once = [] {
    Cluster cluster(config(5));
    cluster.run([](Rank& r) {
      std::vector<float> v(12345);
      for (int step = 0; step < 3; ++step) {
        r.compute(1e6 * (1 + r.id()), "fwd");
        Request q = r.world().iall_reduce(v);
        r.compute(2e6, "bwd");
        q.wait();
        if (r.id() > 0)
          r.world().send(v, 0, step);
        else
          for (int s = 1; s < 5; ++s) r.world().recv(v, s, step);
      }
    });
    std::vector<double> ends;
    for (const auto& rep : cluster.reports())
      for (const auto& sp : rep.clock.timeline()) ends.push_back(sp.end);
    return ends;
  };
  CHECK(once() == once());
}
