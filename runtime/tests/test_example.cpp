// The usage example of runtime/README.md, kept compiling and checked against the cost model.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

TEST_CASE("the README example runs and its numbers follow the cost model") {
  mgpu::Cluster cluster(4);
  cluster.run([](mgpu::Rank& r) {
    mgpu::Buffer<float> grad(r.memory(), mgpu::Category::grads, 1 << 20, "grad");
    mgpu::as_vector(grad).setConstant(float(r.id()));
    r.compute(2e12, "backward");
    mgpu::Request q = r.world().iall_reduce(grad, mgpu::ReduceOp::avg);
    r.compute(1e12, "optimizer prep");
    q.wait();
    CHECK(grad[123] == 1.5f);
    mgpu::Comm tp = r.world().split(r.id() / 2, r.id(), "tp");
    tp.all_reduce(grad);
    CHECK(grad[0] == 3.0f);
  });
  const auto& rep = cluster.report(0);
  const double S = 4.0 * (1 << 20);
  const double ar4 = 2 * 3 * (3e-6 + S / (4 * 450e9)), ar2 = 2 * 1 * (3e-6 + S / (2 * 450e9));
  CHECK(rep.memory.peak_total() == std::size_t(S));
  CHECK(rep.clock.now() ==
        doctest::Approx(3e12 / 4e14 + ar2));  // the first all-reduce hid under compute
  CHECK(rep.clock.idle_time() == doctest::Approx(ar2));
  // Both all-reduces kept the comm stream busy, and all of the world one ran while "optimizer
  // prep" computed: the overlap the clock records is exactly its cost.
  CHECK(rep.clock.comm_time() == doctest::Approx(ar4 + ar2));
  CHECK(rep.clock.overlap_time(0.0, rep.clock.now()) == doctest::Approx(ar4));
}
