// --json: the file the command line writes parses back to the same numbers as the Plan, with
// every documented field present (null where a quantity was not asked for).
#include <doctest/doctest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan/categories.hpp"
#include "plan/cli.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"

using namespace mgpu::planner;
namespace fs = std::filesystem;

namespace {

nlohmann::json run_to_json(const std::vector<std::string>& flags) {
  const fs::path path =
      fs::temp_directory_path() / ("mgpu_plan_test_" + std::to_string(::getpid()) + ".json");
  std::vector<std::string> args = flags;
  args.insert(args.end(), {"--json", path.string()});
  std::ostringstream out, err;
  REQUIRE(run_plan_cli(args, out, err) == kExitOk);
  std::ifstream in(path);
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  fs::remove(path);
  // These tests check computed numbers: on a build where a chapter function is still a skeleton,
  // they fail as the chapter tests do, naming it, instead of on a null.
  if (!j.at("pending").empty())
    FAIL("not implemented: " << j.at("pending").begin().value().get<std::string>());
  return j;
}

void check_memory(const nlohmann::json& j, const mgpu::layout::GpuMemory& m) {
  for (const auto& c : kMemoryCategories)
    CHECK(j.at(c.key).get<double>() == doctest::Approx(m.*c.bytes));
  CHECK(j.at("total").get<double>() == doctest::Approx(m.total_bytes()));
}

}  // namespace

TEST_CASE("JSON round trip: the Try at stage 3 reads back bytes, fits and min_gpus") {
  const nlohmann::json j = run_to_json({"--params", "70e9", "--gpus", "8", "--zero", "3"});
  Options o;
  o.params = 70e9;
  o.gpus = 8;
  o.zero_stage = 3;
  const Plan p = make_plan(o);
  check_memory(j.at("memory_bytes"), *p.memory);
  CHECK(j.at("capacity_bytes").get<double>() == doctest::Approx(80e9));
  CHECK(j.at("fits").get<bool>() == *p.fits);
  CHECK(j.at("min_gpus").get<std::int64_t>() == *p.min_gpus->gpus);
  check_memory(j.at("memory_bytes_at_min_gpus"), p.min_gpus->memory);
  CHECK(j.at("min_gpus_partial_node").get<std::int64_t>() == *p.min_gpus_any->gpus);
  CHECK(j.at("bubble_fraction").get<double>() == doctest::Approx(*p.bubble));
  CHECK(j.at("inputs").at("dp").get<std::int64_t>() == 8);
  CHECK(j.at("inputs").at("shape").is_null());
  CHECK(j.at("flops").is_null());
  CHECK(j.at("seconds").is_null());
  double sum = 0;
  for (const auto& t : p.traffic) {
    CHECK(j.at("traffic_bytes_per_step").at(t.kind).get<double>() == doctest::Approx(*t.bytes));
    sum += *t.bytes;
  }
  CHECK(j.at("traffic_bytes_per_step").at("total").get<double>() == doctest::Approx(sum));
  CHECK(j.at("traffic").size() == p.traffic.size());
  CHECK(j.at("factors").size() == p.factors.size());
}

TEST_CASE(
    "JSON round trip: never fitting gives min_gpus null, time and shape are filled in when asked") {
  const nlohmann::json j = run_to_json(
      {"--params",        "70e9", "--gpus",      "64",   "--tp",     "8",    "--pp",        "4",
       "--micro-batches", "16",   "--layers",    "80",   "--hidden", "8192", "--heads",     "64",
       "--seq",           "4096", "--recompute", "full", "--tokens", "2e12", "--gpu-flops", "1e15",
       "--mfu",           "0.5"});
  CHECK(j.at("inputs").at("shape").at("recompute") == "full");
  CHECK(j.at("inputs").at("dp").get<std::int64_t>() == 2);
  CHECK(j.at("flops").get<double>() > 0);
  CHECK(j.at("seconds").get<double>() >
        j.at("seconds_ideal").get<double>());  // bubble and recompute cost
  CHECK(j.at("recompute_extra_fraction").get<double>() > 0);
  CHECK(j.at("memory_bytes").at("activations").get<double>() > 0);
  CHECK(j.at("traffic_bytes_per_step").contains("tp_all_reduce"));
  CHECK(j.at("traffic_bytes_per_step").contains("pp_boundary"));

  const nlohmann::json never = run_to_json({"--params", "70e9", "--gpus", "8"});
  CHECK_FALSE(never.at("fits").get<bool>());
  CHECK(never.at("min_gpus").is_null());
  CHECK(never.at("memory_bytes_at_min_gpus").is_null());
}

TEST_CASE("--json - prints the JSON alone on stdout") {
  std::ostringstream out, err;
  REQUIRE(run_plan_cli({"--params", "7e9", "--gpus", "8", "--zero", "1", "--json", "-"}, out,
                       err) == kExitOk);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  CHECK(j.at("memory_bytes").at("total").get<double>() == doctest::Approx(38.5e9));
}
