// Timing-only sends and collectives: they cost what the data versions of the same size cost
// (the data versions, run beside them, are the reference), are metered the same, move nothing,
// and put in-server and cross-server traffic on separate lanes.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

using namespace mgpu;

namespace {

// Two nodes of two ranks, with round numbers: ranks 0,1 on node 0 and 2,3 on node 1.
ClusterConfig two_nodes() {
  ClusterConfig c;
  c.world_size = 4;
  c.gpus_per_node = 2;
  c.intra_node_bytes_per_second = 100e9;
  c.inter_node_bytes_per_second = 10e9;
  c.intra_node_latency_seconds = 1e-6;
  c.inter_node_latency_seconds = 5e-6;
  c.isolation = RankIsolation::threads;
  return c;
}

double lane_end(const RankReport& rep, Stream lane) {
  double end = 0;
  for (const Span& s : rep.clock.timeline())
    if (s.stream == lane) end = std::max(end, s.end);
  return end;
}

}  // namespace

TEST_CASE("a timing-only send costs and meters what a data send of the same bytes does") {
  const std::size_t n = 250000;  // 1 MB of floats
  const double bytes = n * sizeof(float);
  for (int peer : {1, 2}) {  // in the node, then across nodes
    Cluster data(two_nodes()), timing(two_nodes());
    data.run([&](Rank& r) {
      std::vector<float> v(n, 1.0f);
      if (r.id() == 0) r.world().send(v, peer, 3);
      if (r.id() == peer) r.world().recv(v, 0, 3);
    });
    timing.run([&](Rank& r) {
      if (r.id() == 0) r.world().isend_timing(bytes, peer, 3).wait();
      if (r.id() == peer) r.world().irecv_timing(0, 3).wait();
    });
    CAPTURE(peer);
    CHECK(timing.report(peer).clock.now() == doctest::Approx(data.report(peer).clock.now()));
    CHECK(timing.report(0).clock.now() == doctest::Approx(data.report(0).clock.now()));
    CHECK(timing.report(0).traffic.total() == data.report(0).traffic.total());
    CHECK(timing.report(peer).traffic.total() == data.report(peer).traffic.total());
    // The lane: NVLink (comm) inside the node, the network lane across.
    const Stream lane = peer == 1 ? Stream::comm : Stream::network;
    const Stream other = peer == 1 ? Stream::network : Stream::comm;
    CHECK(lane_end(timing.report(0), lane) > 0);
    CHECK(lane_end(timing.report(0), other) == 0);
  }
}

TEST_CASE("in-server and cross-server sends run at once on their own lanes") {
  Cluster cluster(two_nodes());
  cluster.run([](Rank& r) {
    if (r.id() == 0) {
      Request a = r.world().isend_timing(1e9, 1);  // 10 ms on NVLink
      Request b = r.world().isend_timing(1e8, 2);  // 10 ms on the network
      Request c = r.world().isend_timing(1e8, 3);  // queues behind b on the network lane
      a.wait();
      b.wait();
      c.wait();
    } else {
      r.world().irecv_timing(0).wait();
    }
  });
  CHECK(cluster.report(1).clock.now() == doctest::Approx(1e-6 + 1e9 / 100e9));
  CHECK(cluster.report(2).clock.now() == doctest::Approx(5e-6 + 1e8 / 10e9));
  CHECK(cluster.report(3).clock.now() == doctest::Approx(2 * (5e-6 + 1e8 / 10e9)));
  CHECK(cluster.report(0).clock.end_time() == doctest::Approx(2 * (5e-6 + 1e8 / 10e9)));
}

TEST_CASE("a timing-only collective lasts and meters what the data collective does") {
  const std::size_t n = 1 << 18;
  for (OpKind kind :
       {OpKind::all_reduce, OpKind::reduce_scatter, OpKind::all_gather, OpKind::broadcast}) {
    Cluster data(two_nodes()), timing(two_nodes());
    data.run([&](Rank& r) {
      r.compute_seconds(1e-3 * r.id(), "late arrival");
      std::vector<float> full(n, 1.0f), part(n / 4, 1.0f);
      if (kind == OpKind::all_reduce) r.world().all_reduce(full);
      if (kind == OpKind::reduce_scatter) r.world().reduce_scatter(full, part);
      if (kind == OpKind::all_gather) r.world().all_gather(part, full);
      if (kind == OpKind::broadcast) r.world().broadcast(full, 0);
    });
    timing.run([&](Rank& r) {
      r.compute_seconds(1e-3 * r.id(), "late arrival");
      r.world().icollective_timing(kind, n * sizeof(float)).wait();
    });
    CAPTURE(to_string(kind));
    for (int i = 0; i < 4; ++i) {
      CHECK(timing.report(i).clock.now() == doctest::Approx(data.report(i).clock.now()));
      CHECK(timing.report(i).traffic.total() == data.report(i).traffic.total());
    }
    CHECK(lane_end(timing.report(0), Stream::network) == doctest::Approx(data.makespan()));
  }
}

TEST_CASE("a timing-only collective overlaps compute, and members that disagree fail") {
  Cluster cluster(two_nodes());
  cluster.run([](Rank& r) {
    Request q = r.world().icollective_timing(OpKind::all_reduce, 4e8);
    r.compute_seconds(1.0, "backward");  // far longer than the all-reduce
    q.wait();
    CHECK(r.clock().idle_time() == 0);
    CHECK(r.now() == doctest::Approx(1.0));
  });
  CHECK_THROWS_AS(cluster.run([](Rank& r) {
    r.world().icollective_timing(OpKind::all_reduce, r.id() == 0 ? 8.0 : 4.0).wait();
  }),
                  CollectiveMismatch);
}

TEST_CASE("with a ring per NIC, k members per node divide a cross-node collective's bytes by k") {
  // world_size 4 on nodes of 2: the world group has k = 2 members per node. One ring: every
  // member's bytes through its NIC at 10 GB/s. A ring per NIC: min(2 x 10, 100 x 2/1) = 20 GB/s.
  // A group with one member per node ({0, 2}) has nothing to share, so it is priced as before.
  const double bytes = 64e6;
  const auto seconds = [&](bool per_nic, bool spread) {
    ClusterConfig c = two_nodes();
    c.ring_per_nic = per_nic;
    Cluster cluster(c);
    cluster.run([&](Rank& r) {
      if (!spread) {
        r.world().icollective_timing(OpKind::all_gather, bytes).wait();
        return;
      }
      Comm across = r.world().split(r.id() % 2, r.id(), "across");  // {0, 2} and {1, 3}
      across.icollective_timing(OpKind::all_gather, bytes).wait();
    });
    return cluster.makespan();
  };
  // A ring all-gather of n members: (n-1) (alpha + S / (n beta)).
  CHECK(seconds(false, false) == doctest::Approx(3 * (5e-6 + bytes / (4 * 10e9))));
  CHECK(seconds(true, false) == doctest::Approx(3 * (5e-6 + bytes / (4 * 20e9))));
  CHECK(seconds(true, true) == doctest::Approx(seconds(false, true)));
  CHECK(seconds(true, true) == doctest::Approx(1 * (5e-6 + bytes / (2 * 10e9))));
}
