// Bytes charged per rank follow the ring accounting of nccl-tests: the bus-bandwidth factor
// times the buffer size, for every collective, and per op kind and group name.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cstdio>

using namespace mgpu;

TEST_CASE(
    "each rank sends and receives bus_bandwidth_factor x S for all_reduce, reduce_scatter, "
    "all_gather, all_to_all") {
  for (int n : {2, 3, 4, 8}) {
    const std::size_t m = 1000;  // elements per rank slot, so every count divides by n
    const auto nn = static_cast<std::size_t>(n);
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      Comm& w = r.world();
      std::vector<float> full(m * nn), part(m), out(m * nn);
      w.all_reduce(full);
      w.reduce_scatter(full, part);
      w.all_gather(part, full);
      w.all_to_all(full, out);
    });
    const double S = double(m * nn * sizeof(float));
    for (int r = 0; r < n; ++r) {
      const auto& t = cluster.report(r).traffic;
      for (OpKind k :
           {OpKind::all_reduce, OpKind::reduce_scatter, OpKind::all_gather, OpKind::all_to_all}) {
        CAPTURE(to_string(k));
        CAPTURE(n);
        CHECK(double(t.op(k).bytes_sent) == bus_bandwidth_factor(k, n) * S);
        CHECK(double(t.op(k).bytes_received) == bus_bandwidth_factor(k, n) * S);
      }
      CHECK(t.op(OpKind::all_reduce).messages_sent == 2u * (nn - 1));
      CHECK(t.group("world") == t.total());
    }
    std::printf(
        "n=%d: all_reduce of %.0f bytes charged %llu bytes sent per rank (2(n-1)/n = %.4f)\n", n, S,
        static_cast<unsigned long long>(
            cluster.report(0).traffic.op(OpKind::all_reduce).bytes_sent),
        bus_bandwidth_factor(OpKind::all_reduce, n));
  }
}

TEST_CASE(
    "all_reduce of a length not divisible by n charges 2(count - own ring chunk) elements per "
    "rank") {
  const int n = 3;
  const std::size_t count = 10;  // chunks 4, 3, 3
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<double> v(count);
    r.world().all_reduce(v);
  });
  std::uint64_t total = 0;
  const std::size_t chunk[] = {4, 3, 3};
  for (int r = 0; r < n; ++r) {
    const auto sent = cluster.report(r).traffic.total().bytes_sent;
    CHECK(sent == 2 * (count - chunk[r]) * sizeof(double));
    total += sent;
  }
  CHECK(total ==
        2u * (n - 1) * count * sizeof(double));  // the ring moves 2(n-1)/n of S per rank on average
}

TEST_CASE(
    "broadcast: every rank but the root receives S, every rank but the last in the chain sends S") {
  const int n = 5, root = 2;
  const std::size_t count = 77;
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<bf16> v(count);
    r.world().broadcast(v, root);
  });
  std::uint64_t sent = 0;
  for (int r = 0; r < n; ++r) {
    const auto t = cluster.report(r).traffic.op(OpKind::broadcast);
    CHECK(t.bytes_received == (r == root ? 0 : count * 2));
    CHECK(t.bytes_sent == (r == (root + n - 1) % n ? 0 : count * 2));
    sent += t.bytes_sent;
  }
  CHECK(sent == (n - 1) * count * 2);
}

TEST_CASE("point-to-point charges the message to the sender and the receiver, per group") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    std::vector<double> v(10);
    if (w.rank() == 0)
      w.send(v, 1, 0);
    else
      w.recv(v, 0, 0);
  });
  CHECK(cluster.report(0).traffic.of(OpKind::send, "world").bytes_sent == 80);
  CHECK(cluster.report(0).traffic.total().messages_sent == 1);
  CHECK(cluster.report(1).traffic.of(OpKind::recv, "world").bytes_received == 80);
  CHECK(cluster.report(1).traffic.total().bytes_sent == 0);
}

TEST_CASE("bus bandwidth factors are those of nccl-tests") {
  CHECK(bus_bandwidth_factor(OpKind::all_reduce, 8) == doctest::Approx(1.75));
  CHECK(bus_bandwidth_factor(OpKind::all_gather, 8) == doctest::Approx(0.875));
  CHECK(bus_bandwidth_factor(OpKind::reduce_scatter, 4) == doctest::Approx(0.75));
  CHECK(bus_bandwidth_factor(OpKind::broadcast, 4) == 1.0);
  CHECK(bus_bandwidth_factor(OpKind::all_reduce, 1) == 0.0);
}
