// Every built-in collective against a naive computation: world sizes 1..8, lengths that do and
// do not divide by the group size (0 included), float/double/bf16, sum/avg/max. Results must be
// bitwise equal to the rank-ordered naive reduction on every rank.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <numeric>

using namespace mgpu;
using mgpu::test::max_abs_diff;
using mgpu::test::naive_reduce;
using mgpu::test::value;

namespace {

const int kWorlds[] = {1, 2, 3, 4, 7, 8};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};

template <class T>
std::vector<std::vector<T>> inputs(int n, std::size_t len) {
  std::vector<std::vector<T>> in(static_cast<std::size_t>(n), std::vector<T>(len));
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < len; ++i) in[static_cast<std::size_t>(r)][i] = value<T>(r, i);
  return in;
}

template <class T>
double check_all_reduce(int n, std::size_t len, ReduceOp op) {
  auto in = inputs<T>(n, len);
  std::vector<std::vector<T>> got(static_cast<std::size_t>(n));
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<T> v = in[static_cast<std::size_t>(r.id())];
    r.world().all_reduce(v, op);
    got[static_cast<std::size_t>(r.id())] = v;
  });
  std::vector<T> want(len);
  for (std::size_t i = 0; i < len; ++i) want[i] = naive_reduce(in, i, op);
  double err = 0;
  for (const auto& g : got) err = std::max(err, max_abs_diff(g, want));
  return err;
}

template <class T>
double check_reduce_scatter(int n, std::size_t m, ReduceOp op) {
  auto in = inputs<T>(n, m * static_cast<std::size_t>(n));
  std::vector<std::vector<T>> got(static_cast<std::size_t>(n));
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<T> out(m);
    r.world().reduce_scatter(in[static_cast<std::size_t>(r.id())], out, op);
    got[static_cast<std::size_t>(r.id())] = out;
  });
  double err = 0;
  for (int r = 0; r < n; ++r) {
    std::vector<T> want(m);
    for (std::size_t j = 0; j < m; ++j)
      want[j] = naive_reduce(in, static_cast<std::size_t>(r) * m + j, op);
    err = std::max(err, max_abs_diff(got[static_cast<std::size_t>(r)], want));
  }
  return err;
}

template <class T>
double check_all_gather(int n, std::size_t m, bool in_place) {
  auto in = inputs<T>(n, m);
  std::vector<T> want;
  for (const auto& v : in) want.insert(want.end(), v.begin(), v.end());
  std::vector<std::vector<T>> got(static_cast<std::size_t>(n));
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<T> out(m * static_cast<std::size_t>(n));
    const auto me = static_cast<std::size_t>(r.id());
    if (in_place) {
      std::copy(in[me].begin(), in[me].end(), out.begin() + static_cast<std::ptrdiff_t>(me * m));
      r.world().all_gather(std::span<const T>(out.data() + me * m, m), out);
    } else {
      r.world().all_gather(in[me], out);
    }
    got[me] = out;
  });
  double err = 0;
  for (const auto& g : got) err = std::max(err, max_abs_diff(g, want));
  return err;
}

template <class T>
double check_broadcast(int n, std::size_t len, int root) {
  auto in = inputs<T>(n, len);
  std::vector<std::vector<T>> got(static_cast<std::size_t>(n));
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<T> v = in[static_cast<std::size_t>(r.id())];
    r.world().broadcast(v, root);
    got[static_cast<std::size_t>(r.id())] = v;
  });
  double err = 0;
  for (const auto& g : got)
    err = std::max(err, max_abs_diff(g, in[static_cast<std::size_t>(root)]));
  return err;
}

template <class T>
double check_all_to_all(int n, std::size_t m) {
  const auto nn = static_cast<std::size_t>(n);
  auto in = inputs<T>(n, m * nn);
  std::vector<std::vector<T>> got(nn);
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<T> out(m * nn);
    r.world().all_to_all(in[static_cast<std::size_t>(r.id())], out);
    got[static_cast<std::size_t>(r.id())] = out;
  });
  double err = 0;
  for (std::size_t j = 0; j < nn; ++j) {
    std::vector<T> want;
    for (std::size_t i = 0; i < nn; ++i)  // block i of rank j's out = block j of rank i's in
      want.insert(want.end(), in[i].begin() + static_cast<std::ptrdiff_t>(j * m),
                  in[i].begin() + static_cast<std::ptrdiff_t>((j + 1) * m));
    err = std::max(err, max_abs_diff(got[j], want));
  }
  return err;
}

template <class T>
double check_all_to_all_v(int n) {
  const auto nn = static_cast<std::size_t>(n);
  auto count = [](std::size_t i, std::size_t j) { return (i * 3 + j * 5) % 4; };  // 0 included
  std::vector<std::vector<T>> sent(nn), got(nn);
  for (std::size_t i = 0; i < nn; ++i) {
    std::size_t total = 0;
    for (std::size_t j = 0; j < nn; ++j) total += count(i, j);
    for (std::size_t k = 0; k < total; ++k) sent[i].push_back(value<T>(static_cast<int>(i), k));
  }
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    const auto me = static_cast<std::size_t>(r.id());
    std::vector<std::size_t> sc(nn), rc(nn);
    for (std::size_t j = 0; j < nn; ++j) {
      sc[j] = count(me, j);
      rc[j] = count(j, me);
    }
    std::vector<T> out(std::accumulate(rc.begin(), rc.end(), std::size_t(0)));
    r.world().all_to_all_v(sent[me], sc, out, rc);
    got[me] = out;
  });
  double err = 0;
  for (std::size_t j = 0; j < nn; ++j) {
    std::vector<T> want;
    for (std::size_t i = 0; i < nn; ++i) {
      std::size_t off = 0;
      for (std::size_t k = 0; k < j; ++k) off += count(i, k);
      for (std::size_t k = 0; k < count(i, j); ++k) want.push_back(sent[i][off + k]);
    }
    err = std::max(err, max_abs_diff(got[j], want));
  }
  return err;
}

template <class T>
void all_collectives_match_naive() {
  double worst = 0;
  for (int n : kWorlds) {
    const auto nn = static_cast<std::size_t>(n);
    for (std::size_t len :
         {std::size_t(0), std::size_t(1), nn + 1, 5 * nn, std::size_t(1000), std::size_t(70001)}) {
      for (ReduceOp op : kOps) {
        CAPTURE(n);
        CAPTURE(len);
        double e = check_all_reduce<T>(n, len, op);
        CHECK(e == 0.0);
        worst = std::max(worst, e);
      }
      CHECK(check_broadcast<T>(n, len, 0) == 0.0);
      CHECK(check_broadcast<T>(n, len, n - 1) == 0.0);
    }
    for (std::size_t m : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(40000)}) {
      CAPTURE(n);
      CAPTURE(m);
      for (ReduceOp op : kOps) CHECK(check_reduce_scatter<T>(n, m, op) == 0.0);
      CHECK(check_all_gather<T>(n, m, false) == 0.0);
      CHECK(check_all_gather<T>(n, m, true) == 0.0);
      CHECK(check_all_to_all<T>(n, m) == 0.0);
    }
    CHECK(check_all_to_all_v<T>(n) == 0.0);
  }
  std::printf("max error vs naive rank-ordered reduction: %g\n", worst);
}

}  // namespace

TEST_CASE("float collectives equal the naive rank-ordered computation bit for bit") {
  all_collectives_match_naive<float>();
}

TEST_CASE("double collectives equal the naive rank-ordered computation bit for bit") {
  all_collectives_match_naive<double>();
}

TEST_CASE("bf16 collectives accumulate in float and round once, like the naive computation") {
  all_collectives_match_naive<bf16>();
}

TEST_CASE("bf16 sum differs from summing in bf16, proving float accumulation") {
  // 1 + 8 * 2^-8: each bf16 partial sum would round back to 1, the float sum does not.
  Cluster cluster(9);
  cluster.run([](Rank& r) {
    std::vector<bf16> v{r.id() == 0 ? bf16(1.0f) : bf16(1.0f / 256.0f)};
    r.world().all_reduce(v);
    CHECK(float(v[0]) == doctest::Approx(1.03125f));
  });
}

TEST_CASE("results are identical across runs and ranks (deterministic reduction order)") {
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    std::vector<std::vector<float>> got(7);
    Cluster cluster(7);
    cluster.run([&](Rank& r) {
      std::vector<float> v(10007);
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = 1.0f / float(1 + i + 13 * static_cast<std::size_t>(r.id()));
      r.world().all_reduce(v);
      got[static_cast<std::size_t>(r.id())] = v;
    });
    for (const auto& g : got) CHECK(g == got[0]);
    if (run == 0) first = got[0];
    CHECK(got[0] == first);
  }
}

TEST_CASE("64 ranks all-reduce 1M floats correctly") {
  const std::size_t len = 1 << 20;
  const int n = 64;
  std::vector<int> ok(n, 0);
  auto t0 = std::chrono::steady_clock::now();
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    std::vector<float> v(len);
    for (std::size_t i = 0; i < len; ++i) v[i] = value<float>(r.id(), i);
    r.world().all_reduce(v);
    bool good = true;
    for (std::size_t i = 0; i < len; i += 997) {
      float want = value<float>(0, i);
      for (int s = 1; s < n; ++s) want += value<float>(s, i);
      good = good && v[i] == want;
    }
    ok[static_cast<std::size_t>(r.id())] = good;
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("64 ranks x 1M floats all_reduce: %.3f s wall\n", secs);
  CHECK(std::count(ok.begin(), ok.end(), 1) == n);
}

TEST_CASE(
    "non-blocking collectives complete in any wait order, and unwaited requests wait in their "
    "destructor") {
  Cluster cluster(4);
  cluster.run([](Rank& r) {
    std::vector<double> a(1000, 1.0), b(333, 2.0), c(10, double(r.id()));
    Request ra = r.world().iall_reduce(a);
    Request rb = r.world().iall_reduce(b, ReduceOp::max);
    { Request rc = r.world().iall_reduce(c, ReduceOp::avg); }  // destructor waits
    CHECK(c[9] == 1.5);
    rb.wait();
    ra.wait();
    CHECK(a[999] == 4.0);
    CHECK(b[0] == 2.0);
  });
}
