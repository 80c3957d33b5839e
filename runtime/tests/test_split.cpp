// Sub-groups from split(): membership and order, collectives within each group, per-group
// traffic, and splits of splits, as tensor/pipeline/data-parallel layouts need.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

using namespace mgpu;

TEST_CASE(
    "splitting 8 ranks into tp groups of 4 and dp groups of 2 gives the right members and sums") {
  Cluster cluster(8);
  cluster.run([](Rank& r) {
    const int id = r.id();
    Comm tp = r.world().split(id / 4, id, "tp");
    Comm dp = r.world().split(id % 4, id, "dp");
    CHECK(tp.size() == 4);
    CHECK(dp.size() == 2);
    CHECK(tp.rank() == id % 4);
    CHECK(dp.rank() == id / 4);
    CHECK(tp.global_rank(0) == (id / 4) * 4);
    CHECK(dp.members() == std::vector<int>{id % 4, id % 4 + 4});
    std::vector<double> v{double(id)};
    tp.all_reduce(v);
    CHECK(v[0] == double(4 * (id / 4) * 4 + 6));  // sum of the four ids in the node
    std::vector<double> w{double(id)};
    dp.all_reduce(w);
    CHECK(w[0] == double(2 * (id % 4) + 4));
    tp.send(std::vector<double>{double(id)}, (tp.rank() + 1) % 4, 9);
    std::vector<double> got(1);
    tp.recv(got, (tp.rank() + 3) % 4, 9);
    CHECK(got[0] == double(tp.global_rank((tp.rank() + 3) % 4)));
    std::vector<double> grads(400);
    tp.all_reduce(grads);
    dp.all_reduce(grads);
  });
  for (int r = 0; r < 8; ++r) {
    const auto& t = cluster.report(r).traffic;
    // 400 doubles = 3200 bytes: 2(n-1)/n of it per group (1-element all_reduces add 2 x 8
    // bytes on ranks that do not own the single ring chunk, i.e. group rank != 0).
    const auto tp_small = (r % 4 == 0) ? 0u : 16u, dp_small = (r / 4 == 0) ? 0u : 16u;
    CHECK(t.of(OpKind::all_reduce, "tp").bytes_sent == 4800u + tp_small);
    CHECK(t.of(OpKind::all_reduce, "dp").bytes_sent == 3200u + dp_small);
    CHECK(t.of(OpKind::send, "tp").bytes_sent == 8u);
    CHECK(t.group("world").bytes_sent == 0u);
  }
}

TEST_CASE("key orders the new group, a negative color joins no group, splits nest") {
  Cluster cluster(6);
  cluster.run([](Rank& r) {
    Comm rev = r.world().split(0, -r.id(), "rev");
    CHECK(rev.rank() == 5 - r.id());
    Comm none = r.world().split(r.id() == 0 ? -1 : 1, 0, "rest");
    CHECK(none.valid() == (r.id() != 0));
    if (none.valid()) {
      CHECK(none.size() == 5);
      Comm pairs = none.split(none.rank() / 2, 0, "pair");
      CHECK(pairs.size() == (none.rank() == 4 ? 1 : 2));
      std::vector<float> v{1.0f};
      pairs.all_reduce(v);
      CHECK(v[0] == float(pairs.size()));
      CHECK(pairs.describe().rfind("pair{", 0) == 0);
    }
  });
}
