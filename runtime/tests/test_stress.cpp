// Many short runs mixing point-to-point and collectives on overlapping groups, to shake out
// races in the runtime's bookkeeping: every run must give the same data and the same clocks.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace mgpu;

TEST_CASE("repeated mixed workloads give identical results and virtual times") {
  double first_makespan[3] = {-1.0, -1.0, -1.0};  // per buffer length (iter % 3)
  std::vector<float> first;
  for (int iter = 0; iter < 40; ++iter) {
    std::vector<float> result(8);
    Cluster cluster(8);
    cluster.run([&](Rank& r) {
      const int id = r.id();
      Comm tp = r.world().split(id / 2, id, "tp");
      Comm dp = r.world().split(id % 2, id, "dp");
      std::vector<float> a(1000 + static_cast<std::size_t>(iter % 3), float(id)), g(8 * 17), s(17);
      for (int step = 0; step < 3; ++step) {
        Request q = dp.iall_reduce(a, ReduceOp::avg);
        r.compute(1e6 * (1 + id % 3), "work");
        std::vector<float> token{float(id + step)}, in(1);
        tp.send(token, 1 - tp.rank(), step);
        tp.recv(in, 1 - tp.rank(), step);
        q.wait();
        a[0] += in[0];
        std::iota(s.begin(), s.end(), float(id));
        r.world().all_gather(s, g);
        r.world().reduce_scatter(g, s);
        tp.broadcast(a, step % 2);
      }
      result[static_cast<std::size_t>(id)] = a[0] + s[16];
    });
    if (iter == 0) first = result;
    if (iter < 3) first_makespan[iter] = cluster.makespan();
    CHECK(result == first);
    CHECK(cluster.makespan() == first_makespan[iter % 3]);
  }
}
