// Ranks as programs of their own (Cluster::run_programs): each rank a fresh copy of
// programs/rank_program.cpp that is given its own input and nothing else. The values, meters and
// errors are the run's as with forked ranks; a rank's memory holds no other rank's input.
#include "helpers.hpp"
#include "programs/secret_scan.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mgpu;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // forks of a multi-threaded program: see test_isolation.cpp
#else
constexpr bool kSanitized = false;
#endif
TEST_SUITE_BEGIN("ranks as programs" * doctest::skip(kSanitized));

namespace {

RankPrograms programs(const std::string& test, std::vector<std::string> inputs) {
  return RankPrograms{MGPU_TEST_RANK_PROGRAM, {test}, std::move(inputs), {}};
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

/// n different secrets (see programs/secret_scan.hpp).
std::vector<std::string> secrets(int n) {
  std::mt19937 rng(std::random_device{}());
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    std::string s = test::kSecretPrefix;
    for (std::size_t i = 0; i < test::kSecretLetters; ++i) s += char('a' + rng() % 26);
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("ranks as programs sum their inputs, with the cluster's books kept here") {
  ClusterConfig config;
  config.world_size = 3;
  config.flops_per_second = 123e12;
  Cluster cluster(config);
  const std::vector<std::vector<float>> in{{1, 2}, {10, 20}, {100, 200}};
  cluster.run_programs(programs("sum", {bytes_of(in[0]), bytes_of(in[1]), bytes_of(in[2])}));
  // The same all-reduce with threads: the books must agree.
  config.isolation = RankIsolation::threads;
  Cluster threads(config);
  threads.run([&](Rank& r) {
    std::vector<float> data = in[static_cast<std::size_t>(r.id())];
    r.world().all_reduce(std::span<float>(data), ReduceOp::sum);
  });
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(cluster.published<float>(r, "sum") == std::vector<float>{111, 222});
    // The rank's handle answers config() with this cluster's configuration.
    CHECK(cluster.published<double>(r, "config") == std::vector<double>{123e12, 3});
    CHECK(cluster.report(r).traffic.total().bytes_sent ==
          threads.report(r).traffic.total().bytes_sent);
    CHECK(cluster.report(r).traffic.total().bytes_sent > 0);
  }
  CHECK(cluster.makespan() == doctest::Approx(threads.makespan()));
}

TEST_CASE("a rank program holds its own input and no other rank's") {
  const std::vector<std::string> given = secrets(4);
  Cluster cluster(4);
  cluster.run_programs(programs("scan", given));
  for (int r = 0; r < 4; ++r) CHECK(cluster.published<double>(r, "secrets")[0] == 1);
  // The same scan in a rank forked from this process, which holds every secret, finds them all:
  // the check above can fail.
  ClusterConfig forked;
  forked.world_size = 2;
  forked.isolation = RankIsolation::processes;
  Cluster fork_cluster(forked);
  fork_cluster.run([&](Rank& r) {
    r.publish("secrets", std::vector<double>{double(test::secrets_in_own_memory().size())});
  });
  CHECK(fork_cluster.published<double>(1, "secrets")[0] >= 4);
}

TEST_CASE("a rank program's errors end the run with their type, rank and cause") {
  Cluster cluster(3);
  const std::vector<std::string> none(3);
  CHECK_THROWS_WITH_AS(cluster.run_programs(programs("throw", none)),
                       doctest::Contains("rank 1 rejects its input"), std::invalid_argument);
  CHECK_THROWS_WITH(cluster.run_programs(programs("crash", none)), doctest::Contains("signal"));
  CHECK_THROWS_WITH_AS(cluster.run_programs(programs("deadlock", none)),
                       doctest::Contains("deadlock"), DeadlockError);
  RankPrograms missing = programs("sum", none);
  missing.program = "/nonexistent/rank_program";
  CHECK_THROWS_WITH(cluster.run_programs(missing), doctest::Contains("exited with status 127"));
  CHECK_THROWS_WITH_AS(cluster.run_programs(programs("sum", {""})),
                       doctest::Contains("1 inputs for 3 ranks"), std::invalid_argument);
}

TEST_CASE("a program not started by run_programs is told so") {
  CHECK(serve_rank([](Rank&, std::string_view) {}) == 2);
}

TEST_SUITE_END();
