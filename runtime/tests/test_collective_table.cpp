// Every row of the runtime's collective table (runtime/src/collectives.cpp) against a cluster:
// its name, its bus-bandwidth factor, and for each rendezvous collective the traffic every rank
// is charged and the virtual time the call takes, each computed here from the ring algorithm
// step by step. A new row fails the test until it is given a case below.
#include "../src/collectives.hpp"

#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

using namespace mgpu;

namespace {

constexpr double kAlpha = 3e-6, kBeta = 50e9;  // one node: every link is intra-node
constexpr std::size_t kFloat = sizeof(float);

ClusterConfig one_node_config(int n) {
  ClusterConfig c;
  c.world_size = n;
  c.gpus_per_node = 8;
  c.intra_node_latency_seconds = kAlpha;
  c.intra_node_bytes_per_second = kBeta;
  return c;
}

/// Size of chunk i when `count` elements are dealt out to n ranks, larger chunks first.
std::size_t chunk_size(std::size_t count, int n, int i) {
  std::vector<std::size_t> sizes(static_cast<std::size_t>(n), 0);
  for (std::size_t e = 0; e < count; ++e) {
    // Element e goes to the first chunk not yet at its share.
    const std::size_t share = count / static_cast<std::size_t>(n);
    const std::size_t extra = count % static_cast<std::size_t>(n);
    for (std::size_t c = 0; c < sizes.size(); ++c)
      if (sizes[c] < share + (c < extra ? 1 : 0)) {
        ++sizes[c];
        break;
      }
  }
  return sizes[static_cast<std::size_t>(i)];
}

int mod(int a, int n) { return ((a % n) + n) % n; }

/// How a rendezvous collective is called here, and what the ring moves and costs.
struct Case {
  std::function<void(Comm&)> call;                  // posts and waits, sizes chosen here
  std::function<TrafficCounts(int n, int r)> ring;  // bytes and messages of rank r
  std::function<double(int n)> seconds;             // virtual time from a start at 0
  // The meter charges a rank as many bytes sent as received, which the ring does only when the
  // chunks are equal (all_reduce of an uneven length: a rank sends every chunk but its right
  // neighbour's, twice); then only the total sent over all ranks is the ring's.
  bool sent_as_received = false;
};

// Sizes: an all_reduce length that no n below divides, shards of m elements.
constexpr std::size_t kCount = 1001, kShard = 333;

/// all_to_all_v: how many elements rank i sends rank j (zeros included).
std::size_t sends(int i, int j) { return static_cast<std::size_t>((i + 2 * j + 1) % 4) * 7; }

std::map<std::string, Case> cases() {
  std::map<std::string, Case> c;
  c["all_reduce"] = {
      [](Comm& w) {
        std::vector<float> v(kCount, 1.0f);
        w.all_reduce(v);
      },
      [](int n, int r) {
        // Rank r ends the reduce-scatter holding chunk r: its step s receives chunk r + 1 + s
        // and sends chunk r + 2 + s (what rank r + 1 receives). The all-gather starts from
        // there: step s sends chunk r - s and receives chunk r - 1 - s.
        TrafficCounts t;
        for (int s = 0; s < n - 1; ++s) {
          t.bytes_sent +=
              (chunk_size(kCount, n, mod(r + 2 + s, n)) + chunk_size(kCount, n, mod(r - s, n))) *
              kFloat;
          t.bytes_received += (chunk_size(kCount, n, mod(r + 1 + s, n)) +
                               chunk_size(kCount, n, mod(r - 1 - s, n))) *
                              kFloat;
          t.messages_sent += 2;
        }
        return t;
      },
      [](int n) { return 2 * (n - 1) * (kAlpha + kCount * kFloat / double(n) / kBeta); }, true};
  c["reduce_scatter"] = {[](Comm& w) {
                           std::vector<float> in(kShard * static_cast<std::size_t>(w.size()), 1.0f),
                               out(kShard);
                           w.reduce_scatter(in, out);
                         },
                         [](int n, int) {
                           TrafficCounts t;
                           for (int s = 0; s < n - 1; ++s) {
                             t.bytes_sent += kShard * kFloat;
                             t.bytes_received += kShard * kFloat;
                             ++t.messages_sent;
                           }
                           return t;
                         },
                         [](int n) { return (n - 1) * (kAlpha + kShard * kFloat / kBeta); }};
  c["all_gather"] = {[](Comm& w) {
                       std::vector<float> in(kShard, 1.0f),
                           out(kShard * static_cast<std::size_t>(w.size()));
                       w.all_gather(in, out);
                     },
                     c["reduce_scatter"].ring, c["reduce_scatter"].seconds};
  c["broadcast"] = {
      [](Comm& w) {
        std::vector<float> v(kCount, 1.0f);
        w.broadcast(v, w.size() - 1);
      },
      [](int n, int r) {  // a chain from the root (the last rank): root, 0, 1, ..., n - 2
        TrafficCounts t;
        const bool last = r == n - 2, root = r == n - 1;
        if (!last) t.bytes_sent = kCount * kFloat, t.messages_sent = 1;
        if (!root) t.bytes_received = kCount * kFloat;
        return t;
      },
      [](int n) { return (n - 1) * kAlpha + kCount * kFloat / kBeta; }};  // pipelined chain
  c["all_to_all"] = {
      [](Comm& w) {
        std::vector<float> in(kShard * static_cast<std::size_t>(w.size()), 1.0f), out(in.size());
        w.all_to_all(in, out);
      },
      [](int n, int) {
        TrafficCounts t;
        for (int peer = 1; peer < n; ++peer) {  // one block to and from every other rank
          t.bytes_sent += kShard * kFloat;
          t.bytes_received += kShard * kFloat;
          ++t.messages_sent;
        }
        return t;
      },
      [](int n) { return (n - 1) * kAlpha + (n - 1) * kShard * kFloat / kBeta; }};
  c["all_to_all_v"] = {
      [](Comm& w) {
        const int n = w.size(), i = w.rank();
        std::vector<std::size_t> sc, rc;
        for (int j = 0; j < n; ++j) sc.push_back(sends(i, j)), rc.push_back(sends(j, i));
        std::vector<float> in(std::accumulate(sc.begin(), sc.end(), std::size_t(0)), 1.0f);
        std::vector<float> out(std::accumulate(rc.begin(), rc.end(), std::size_t(0)));
        w.all_to_all_v(in, sc, out, rc);
      },
      [](int n, int r) {
        TrafficCounts t;
        for (int j = 0; j < n; ++j) {
          if (j == r) continue;
          t.bytes_sent += sends(r, j) * kFloat;
          t.bytes_received += sends(j, r) * kFloat;
          t.messages_sent += sends(r, j) ? 1 : 0;
        }
        return t;
      },
      [](int n) {  // the busiest member, sending or receiving, sets the pace
        std::size_t busiest = 0;
        for (int i = 0; i < n; ++i) {
          std::size_t out = 0, in = 0;
          for (int j = 0; j < n; ++j)
            if (j != i) out += sends(i, j), in += sends(j, i);
          busiest = std::max({busiest, out, in});
        }
        return (n - 1) * kAlpha + double(busiest * kFloat) / kBeta;
      }};
  c["barrier"] = {[](Comm& w) { w.barrier(); },
                  [](int n, int) {
                    return TrafficCounts{0, 0, 2 * std::uint64_t(n - 1)};
                  },
                  [](int n) { return 2 * (n - 1) * kAlpha; }};  // an all_reduce of nothing
  return c;
}

/// nccl-tests' bus-bandwidth factors, by name.
double expected_factor(std::string_view name, int n) {
  const double dn = n;
  if (name == "all_reduce") return 2 * (dn - 1) / dn;
  if (name == "reduce_scatter" || name == "all_gather" || name == "all_to_all" ||
      name == "all_to_all_v")
    return (dn - 1) / dn;
  if (name == "broadcast" || name == "send" || name == "recv") return 1.0;
  if (name == "barrier" || name == "split") return 0.0;
  FAIL("no expected bus-bandwidth factor for '" << name << "': add it to expected_factor");
  return -1.0;
}

}  // namespace

TEST_CASE("every row of the collective table names its kind and has the nccl-tests factor") {
  REQUIRE(detail::op_kind_count() > 0);
  for (std::size_t i = 0; i < detail::op_kind_count(); ++i) {
    const auto kind = static_cast<OpKind>(i);
    const detail::Collective& row = detail::collective(kind);
    CAPTURE(row.name);
    CHECK(row.kind == kind);
    CHECK(to_string(kind) == row.name);
    CHECK(op_kind_named(row.name) == kind);
    for (int n : {1, 2, 3, 8}) {
      CAPTURE(n);
      CHECK(bus_bandwidth_factor(kind, n) == doctest::Approx(expected_factor(row.name, n)));
    }
  }
  CHECK_FALSE(op_kind_named("all_reduce_typo").has_value());
  CHECK_THROWS_AS(detail::collective(static_cast<OpKind>(detail::op_kind_count())),
                  std::logic_error);
}

TEST_CASE(
    "every rendezvous collective of the table charges each rank the ring's traffic and takes the "
    "ring's time") {
  const auto all = cases();
  for (std::size_t i = 0; i < detail::op_kind_count(); ++i) {
    const detail::Collective& row = detail::collective(static_cast<OpKind>(i));
    if (row.entry == detail::Entry::point_to_point || row.entry == detail::Entry::split) continue;
    CAPTURE(row.name);
    const auto it = all.find(std::string(row.name));
    REQUIRE_MESSAGE(it != all.end(), "no case for this row: add one to cases()");
    const Case& c = it->second;
    for (int n : {1, 2, 3, 5}) {
      CAPTURE(n);
      Cluster cluster(one_node_config(n));
      std::vector<double> ends(static_cast<std::size_t>(n));
      cluster.run([&](Rank& r) {
        c.call(r.world());
        ends[static_cast<std::size_t>(r.id())] = r.now();
      });
      std::uint64_t sent = 0, ring_sent = 0;
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        const TrafficCounts want = n == 1 ? TrafficCounts{} : c.ring(n, r);
        const TrafficCounts got = cluster.report(r).traffic.op(row.kind);
        sent += got.bytes_sent;
        ring_sent += want.bytes_sent;
        CHECK(got.bytes_sent == (c.sent_as_received ? want.bytes_received : want.bytes_sent));
        CHECK(got.bytes_received == want.bytes_received);
        CHECK(got.messages_sent == want.messages_sent);
        CHECK(cluster.report(r).traffic.total() == got);  // nothing else was charged
        CHECK(ends[static_cast<std::size_t>(r)] ==
              doctest::Approx(n == 1 ? 0.0 : c.seconds(n)).epsilon(1e-12));
      }
      CHECK(sent == ring_sent);
    }
  }
}

TEST_CASE("split, a rendezvous without data, takes no virtual time and charges no traffic") {
  Cluster cluster(one_node_config(4));
  cluster.run([](Rank& r) {
    Comm half = r.world().split(r.id() % 2, r.id(), "half");
    CHECK(half.size() == 2);
    CHECK(r.now() == 0.0);
  });
  for (int r = 0; r < 4; ++r) CHECK(cluster.report(r).traffic.total() == TrafficCounts{});
}
