// 11.7 visible tests of the expert-parallel MoE layer: output and every gradient against a dense,
// single-rank MoE written here from the header's rules (on n = 2 and 4 ranks, k = 1 and 2, with
// and without dropped copies), the dropped count against the capacity, and the all_to_all_v
// bytes of an evenly routed batch against expert_all_to_all_bytes_per_rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/formulas.hpp"
#include "11_7_3d_and_experts/moe.hpp"
#include "mgpu_test/compare.hpp"

#include "helpers.hpp"

using namespace mgpu;
using namespace mgpu::experts;

namespace {

using layout_test::random_matrix;

constexpr double kTol = 2e-5;  // fp32 sums of a few dozen O(1) products, in another order

// The unsplit layer on one rank, dense: every token's row of a (T, E) mask says which experts
// it uses (with weight = probability), decided chunk by chunk (one chunk per source rank, since
// capacity is per source rank). Written independently of the student's code, with loops.
struct Dense {
  MatrixRM y, dx, drouter;
  std::vector<MatrixRM> dw;
  std::int64_t dropped = 0;
};

Dense dense_moe(const FullMoe& f, MatIn x, MatIn dy, std::int64_t chunk, std::int64_t k,
                double factor) {
  const Eigen::Index T = x.rows(), h = x.cols(), E = f.router.cols();
  const auto capacity =
      static_cast<std::int64_t>(std::ceil(factor * double(chunk * k) / double(E)));
  MatrixRM logits = x * f.router, p(T, E), mask = MatrixRM::Zero(T, E);
  Dense d;
  for (Eigen::Index t = 0; t < T; ++t) {
    double z = 0;
    for (Eigen::Index e = 0; e < E; ++e) z += std::exp(double(logits(t, e)));
    for (Eigen::Index e = 0; e < E; ++e) p(t, e) = float(std::exp(double(logits(t, e))) / z);
  }
  for (Eigen::Index start = 0; start < T; start += chunk) {
    std::vector<std::int64_t> used(static_cast<std::size_t>(E), 0);
    for (Eigen::Index t = start; t < start + chunk; ++t) {
      std::vector<int> rank(static_cast<std::size_t>(E));
      std::iota(rank.begin(), rank.end(), 0);
      std::stable_sort(rank.begin(), rank.end(), [&](int a, int b) { return p(t, a) > p(t, b); });
      for (std::int64_t j = 0; j < k; ++j) {
        const int e = rank[static_cast<std::size_t>(j)];
        if (used[static_cast<std::size_t>(e)] < capacity) {
          ++used[static_cast<std::size_t>(e)];
          mask(t, e) = 1;
        } else {
          ++d.dropped;
        }
      }
    }
  }
  d.y = MatrixRM::Zero(T, h);
  d.dx = MatrixRM::Zero(T, h);
  MatrixRM dp = MatrixRM::Zero(T, E);
  for (Eigen::Index e = 0; e < E; ++e) {
    MatrixRM out = x * f.experts[static_cast<std::size_t>(e)];
    MatrixRM dout(T, h);
    for (Eigen::Index t = 0; t < T; ++t) {
      const float g = mask(t, e) * p(t, e);
      d.y.row(t) += g * out.row(t);
      dout.row(t) = g * dy.row(t);
      if (mask(t, e) != 0) dp(t, e) = dy.row(t).dot(out.row(t));
    }
    d.dw.push_back(x.transpose() * dout);
    d.dx += dout * f.experts[static_cast<std::size_t>(e)].transpose();
  }
  MatrixRM dl(T, E);
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index e = 0; e < E; ++e) dl(t, e) = p(t, e) * (dp(t, e) - p.row(t).dot(dp.row(t)));
  d.drouter = x.transpose() * dl;
  d.dx += dl * f.router.transpose();
  return d;
}

struct Run {
  MatrixRM y, dx, drouter;
  std::vector<MatrixRM> dw;
  std::int64_t dropped = 0;
  std::vector<std::uint64_t> a2av_bytes;  // per rank, forward only
};

// The layer on n ranks, rank r taking rows [r*T, (r+1)*T) of x and dy; a non-empty `router`
// replaces the drawn one on every rank (to force a routing). Without `backward`, only the
// forward runs (dx and the gradients stay unset).
Run run_moe(int n, const MoeConfig& cfg, std::uint64_t seed, MatIn x, MatIn dy,
            const MatrixRM& router = MatrixRM(), bool backward = true) {
  const Eigen::Index T = x.rows() / n, h = cfg.hidden;
  Run out{MatrixRM(x.rows(), h),
          MatrixRM(x.rows(), h),
          MatrixRM::Zero(h, cfg.experts),
          std::vector<MatrixRM>(static_cast<std::size_t>(cfg.experts)),
          0,
          std::vector<std::uint64_t>(static_cast<std::size_t>(n))};
  std::vector<MatrixRM> drouters(static_cast<std::size_t>(n));
  std::vector<std::int64_t> dropped(static_cast<std::size_t>(n));
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    Comm& ep = r.world();
    MoeLayer layer = make_moe_layer(r, ep, cfg, seed);
    if (router.size() != 0)
      as_matrix(layer.router, static_cast<std::size_t>(h), static_cast<std::size_t>(cfg.experts)) =
          router;
    const MatrixRM xs = x.middleRows(r.id() * T, T), dys = dy.middleRows(r.id() * T, T);
    MatrixRM y(T, h), dx(T, h);
    MoeCache cache = moe_forward(r, ep, layer, xs, y);
    out.a2av_bytes[static_cast<std::size_t>(r.id())] =
        r.traffic().op(OpKind::all_to_all_v).bytes_sent;
    out.y.middleRows(r.id() * T, T) = y;
    dropped[static_cast<std::size_t>(r.id())] = cache.routing.dropped;
    if (!backward) return;
    moe_backward(r, ep, layer, xs, cache, dys, dx);
    out.dx.middleRows(r.id() * T, T) = dx;
    drouters[static_cast<std::size_t>(r.id())] = as_matrix(
        layer.drouter, static_cast<std::size_t>(h), static_cast<std::size_t>(cfg.experts));
    for (std::int64_t i = 0; i < layer.local_experts; ++i)
      out.dw[static_cast<std::size_t>(r.id() * layer.local_experts + i)] =
          as_matrix(layer.dw, static_cast<std::size_t>(h), static_cast<std::size_t>(h),
                    static_cast<std::size_t>(i * h * h));
  });
  for (int i = 0; i < n; ++i) {
    if (backward) out.drouter += drouters[static_cast<std::size_t>(i)];
    out.dropped += dropped[static_cast<std::size_t>(i)];
  }
  return out;
}

// Checks a run of the whole layer against the dense one: each rank's rows of y and dx, each
// expert's weight gradient on the rank that holds it (with_experts), and the router gradient
// summed over the ranks. One message for the first failing rank (and a count of the rest); a
// failure ends the test, so a loop over configurations stops at the first that fails.
void check_layer(const Run& run, const Dense& ref, int n, Eigen::Index tokens, bool with_experts) {
  mgpu_test::RankChecks checks(n);
  const auto mine = [&](const MatrixRM& m, int r) { return m.middleRows(r * tokens, tokens); };
  const std::size_t experts = ref.dw.size(), per_rank = experts / static_cast<std::size_t>(n);
  for (int r = 0; r < n; ++r) {
    checks.compare(r, "y (its tokens' output)", mine(run.y, r), mine(ref.y, r),
                   mgpu_test::below(kTol));
    checks.compare(r, "dx (its tokens' input gradient)", mine(run.dx, r), mine(ref.dx, r),
                   mgpu_test::below(kTol));
  }
  if (with_experts)
    for (std::size_t e = 0; e < experts; ++e)
      checks.compare(static_cast<int>(e / per_rank), "dW of expert " + std::to_string(e), run.dw[e],
                     ref.dw[e], mgpu_test::below(kTol));
  INFO("each rank's share of the layer against the dense single-rank MoE's");
  checks.require();
  mgpu_test::require_close("drouter (summed over the ranks)", run.drouter, ref.drouter,
                           mgpu_test::below(kTol));
}

}  // namespace

TEST_CASE("expert_capacity is the even share of the copies times the factor, rounded up") {
  CHECK(expert_capacity(8, 2, 4, 1.0) == 4);
  CHECK(expert_capacity(8, 2, 4, 1.25) == 5);
  CHECK(expert_capacity(7, 1, 4, 1.0) == 2);
  CHECK(expert_capacity(0, 1, 4, 1.0) == 0);
  CHECK_THROWS_AS(expert_capacity(8, 3, 2, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(expert_capacity(8, 1, 4, 0.0), std::invalid_argument);
}

TEST_CASE(
    "the router picks the k most probable experts, best first, and drops copies past capacity") {
  // Token rows that point at expert 2, then 0: logits = x (identity router).
  MatrixRM x = MatrixRM::Zero(3, 3), router = MatrixRM::Identity(3, 3);
  for (int t = 0; t < 3; ++t) x.row(t) << 2.0f, 0.0f, 3.0f;
  const Routing r = moe_route(x, router, 2, 1.0);  // capacity ceil(3*2/3) = 2
  REQUIRE(r.expert.size() == 6);
  CHECK(r.expert[0] == 2);
  CHECK(r.expert[1] == 0);
  CHECK(r.gate[0] == doctest::Approx(r.probs(0, 2)));
  mgpu_test::check_close("kept (token t's j-th copy at t k + j)",
                         std::vector<int>(r.kept.begin(), r.kept.end()),
                         std::vector<int>{1, 1, 1, 1, 0, 0});
  CHECK(r.dropped == 2);
  CHECK(r.probs.row(0).sum() == doctest::Approx(1.0));
}

TEST_CASE("the expert-parallel forward alone equals the dense single-rank MoE's output") {
  // The core of the layer, before any backward: route, dispatch, experts, combine.
  struct Point {
    int n;
    std::int64_t k;
    double factor;
  };
  for (const Point pt : {Point{2, 1, 1.0}, Point{2, 2, 1.0}, Point{4, 1, 1.0}, Point{4, 2, 1.25},
                         Point{4, 2, 8.0}}) {
    const MoeConfig cfg{6, 8, pt.k, pt.factor};
    const Eigen::Index T = 7;
    const MatrixRM x = random_matrix(pt.n * T, cfg.hidden, 11),
                   dy = random_matrix(pt.n * T, cfg.hidden, 12);
    const Run run = run_moe(pt.n, cfg, 5, x, dy, MatrixRM(), false);
    const Dense ref =
        dense_moe(full_moe_weights(cfg.hidden, cfg.experts, 5), x, dy, T, pt.k, pt.factor);
    const std::string at = "n = " + std::to_string(pt.n) + ", k = " + std::to_string(pt.k) +
                           ", capacity factor " + std::to_string(pt.factor);
    const auto rows = static_cast<std::size_t>(T * cfg.hidden);
    for (int r = 0; r < pt.n; ++r) {
      const auto first = static_cast<std::size_t>(r) * rows;
      mgpu_test::check_close("moe_forward output y of rank " + std::to_string(r) + "'s " +
                                 std::to_string(T) + " tokens (" + at + ")",
                             std::span<const float>(run.y.data() + first, rows),
                             std::span<const float>(ref.y.data() + first, rows), {kTol, 0});
    }
    CHECK_MESSAGE(run.dropped == ref.dropped, at << ": " << run.dropped
                                                 << " copies dropped over all ranks, the dense "
                                                    "layer drops "
                                                 << ref.dropped);
  }
}

TEST_CASE(
    "the expert-parallel layer equals the dense single-rank MoE: output, dx, router and expert "
    "gradients") {
  struct Point {
    int n;
    std::int64_t k;
    double factor;
  };
  // factor 1.0 with random routing drops copies; 8.0 gives every expert T*k slots, so none.
  for (const Point pt : {Point{2, 1, 1.0}, Point{2, 2, 1.0}, Point{4, 1, 1.0}, Point{4, 2, 1.25},
                         Point{4, 2, 8.0}, Point{2, 1, 8.0}}) {
    CAPTURE(pt.n);
    CAPTURE(pt.k);
    CAPTURE(pt.factor);
    const MoeConfig cfg{6, 8, pt.k, pt.factor};
    const Eigen::Index T = 7;
    const MatrixRM x = random_matrix(pt.n * T, cfg.hidden, 11),
                   dy = random_matrix(pt.n * T, cfg.hidden, 12);
    const Run run = run_moe(pt.n, cfg, 5, x, dy);
    const Dense ref =
        dense_moe(full_moe_weights(cfg.hidden, cfg.experts, 5), x, dy, T, pt.k, pt.factor);
    check_layer(run, ref, pt.n, T, true);
    CHECK(run.dropped == ref.dropped);
    if (pt.factor >= 8.0) CHECK(run.dropped == 0);
  }
}

TEST_CASE("dropped copies equal the count over capacity when every token wants experts 0 and 1") {
  const MoeConfig cfg{4, 4, 2, 1.0};
  const int n = 2;
  const Eigen::Index T = 6;
  // An identity router makes a token's logits its own row: every token ranks expert 0 first
  // and expert 1 second.
  FullMoe f = full_moe_weights(cfg.hidden, cfg.experts, 3);
  f.router = MatrixRM::Identity(4, 4);
  MatrixRM x = random_matrix(n * T, cfg.hidden, 7) * 0.1f;
  x.col(0).array() += 3.0f;
  x.col(1).array() += 2.0f;
  const MatrixRM dy = random_matrix(n * T, cfg.hidden, 4);
  const Dense ref = dense_moe(f, x, dy, T, cfg.top_k, cfg.capacity_factor);
  const Run run = run_moe(n, cfg, 3, x, dy, f.router);
  // capacity ceil(6*2/4) = 3 per rank: 3 of the 6 copies to each favourite fit, on each rank.
  const std::int64_t capacity = expert_capacity(T, cfg.top_k, cfg.experts, cfg.capacity_factor);
  CHECK(ref.dropped == n * 2 * (T - capacity));
  CHECK(run.dropped == ref.dropped);
  check_layer(run, ref, n, T, false);
}

TEST_CASE(
    "all_to_all_v bytes per rank of an evenly routed batch equal "
    "expert_all_to_all_bytes_per_rank") {
  for (int n : {2, 4})
    for (std::int64_t k : {1, 2}) {
      CAPTURE(n);
      CAPTURE(k);
      const MoeConfig cfg{8, 8, k, 1.0};
      const Eigen::Index T = 16;  // a multiple of E: each expert gets T*k/E copies from each rank
      // With an identity router, token t's logits are its own row: make expert t mod E the best
      // and (t+1) mod E the second, so the copies spread exactly evenly and none is dropped.
      MatrixRM x = MatrixRM::Zero(n * T, cfg.hidden);
      for (Eigen::Index t = 0; t < n * T; ++t) {
        x(t, t % cfg.experts) = 4.0f;
        x(t, (t + 1) % cfg.experts) = 2.0f;
      }
      const MatrixRM dy = random_matrix(n * T, cfg.hidden, 6);
      // seed-independent routing needs an identity router: build the layer, then overwrite it.
      std::vector<std::uint64_t> bytes(static_cast<std::size_t>(n));
      std::vector<std::int64_t> dropped(static_cast<std::size_t>(n));
      Cluster cluster(n);
      cluster.run([&](Rank& r) {
        MoeLayer layer = make_moe_layer(r, r.world(), cfg, 1);
        as_matrix(layer.router, 8, 8) = MatrixRM::Identity(8, 8);
        MatrixRM y(T, cfg.hidden);
        MoeCache cache = moe_forward(r, r.world(), layer, x.middleRows(r.id() * T, T), y);
        bytes[static_cast<std::size_t>(r.id())] = r.traffic().op(OpKind::all_to_all_v).bytes_sent;
        dropped[static_cast<std::size_t>(r.id())] = cache.routing.dropped;
      });
      const double expected =
          layout::expert_all_to_all_bytes_per_rank(T, cfg.hidden, k, cfg.experts, n, 4.0);
      for (int i = 0; i < n; ++i) {
        CHECK(dropped[static_cast<std::size_t>(i)] == 0);
        CHECK(double(bytes[static_cast<std::size_t>(i)]) == expected);
      }
    }
}

TEST_CASE("each rank holds E/n experts and the whole router, and a pass keeps it that way") {
  const MoeConfig cfg{6, 8, 2, 1.0};
  Cluster cluster(4);
  cluster.run([&](Rank& r) {
    MoeLayer layer = make_moe_layer(r, r.world(), cfg, 2);
    CHECK(layer.local_experts == 2);
    const std::size_t weights = sizeof(float) * (6 * 8 + 2 * 6 * 6);
    CHECK(r.memory().current(Category::weights) == weights);
    // Expert parallelism never gathers another rank's experts: the weights stay E/n per rank.
    const MatrixRM x = random_matrix(5, 6, 20 + static_cast<std::uint64_t>(r.id()));
    MatrixRM y(5, 6), dx(5, 6);
    {
      MoeCache cache = moe_forward(r, r.world(), layer, x, y);
      moe_backward(r, r.world(), layer, x, cache, x, dx);
    }
    CHECK(r.memory().peak(Category::weights) == weights);
    CHECK(r.memory().current(Category::activations) == 0);  // the cache released what it held
  });
}
