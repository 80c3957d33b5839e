// The Chrome trace of a run is valid JSON with one process per rank, named stream lanes, and a
// complete event for every span of every timeline.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace mgpu;

TEST_CASE("write_chrome_trace writes valid JSON with the expected events") {
  Cluster cluster(3);
  cluster.run([](Rank& r) {
    std::vector<float> v(1000);
    r.compute(1e9, "forward");
    Request q = r.world().iall_reduce(v);
    r.compute(1e9, "backward");
    q.wait();
    if (r.id() == 0) r.world().send(v, 1, 0);
    if (r.id() == 1) r.world().recv(v, 0, 0);
  });
  const auto path = std::filesystem::temp_directory_path() / "mgpu_runtime_trace_test.json";
  cluster.write_chrome_trace(path.string());
  std::ifstream f(path);
  const auto trace = nlohmann::json::parse(f);
  std::filesystem::remove(path);

  std::size_t spans = 0;
  for (const auto& rep : cluster.reports()) spans += rep.clock.timeline().size();
  std::size_t complete = 0, named_ranks = 0, collectives = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") {
      ++complete;
      CHECK(e.at("dur").get<double>() >= 0.0);
      CHECK(e.at("pid").get<int>() < 3);
      if (e.at("cat") == "collective") ++collectives;
      if (e.at("name") == "forward") CHECK(e.at("tid") == 0);
    }
    if (e.at("ph") == "M" && e.at("name") == "process_name") ++named_ranks;
  }
  CHECK(complete == spans);
  CHECK(named_ranks == 3);
  CHECK(collectives == 3);
  std::printf("trace: %zu complete events over 3 ranks\n", complete);
}

TEST_CASE("write_chrome_trace names the path it cannot write") {
  Cluster cluster(1);
  cluster.run([](Rank&) {});
  CHECK_THROWS_WITH_AS(cluster.write_chrome_trace("/nonexistent-dir/x.json"),
                       doctest::Contains("/nonexistent-dir/x.json"), std::runtime_error);
}
