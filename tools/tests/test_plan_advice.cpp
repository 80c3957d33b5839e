// What the planner suggests must be true: every change it prints for a layout that does not fit
// is run again through the command line, and the memory and verdict it printed must be what
// that run reports. The "as few as N GPUs" line follows the same fit rule and node rounding as
// the verdict and the fewest-GPUs search.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plan/cli.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"

using namespace mgpu::planner;

namespace {

using Flags = std::map<std::string, std::string>;  // flag -> value ("" for a switch)

std::vector<std::string> to_args(const Flags& flags) {
  std::vector<std::string> args;
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    if (!value.empty()) args.push_back(value);
  }
  return args;
}

nlohmann::json plan_json(const Flags& flags) {
  std::vector<std::string> args = to_args(flags);
  args.insert(args.end(), {"--json", "-"});
  std::ostringstream out, err;
  const int status = run_plan_cli(args, out, err);
  CAPTURE(err.str());
  REQUIRE(status == kExitOk);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  // These tests check computed numbers: on a build where a chapter function is still a skeleton,
  // they fail as the chapter tests do, naming it, instead of on a null.
  if (!j.at("pending").empty())
    FAIL("not implemented: " << j.at("pending").begin().value().get<std::string>());
  return j;
}

std::string plan_text(const Flags& flags) {
  std::ostringstream out, err;
  REQUIRE(run_plan_cli(to_args(flags), out, err) == kExitOk);
  return out.str();
}

// "--zero 3 --tp 8 --sequence-parallel" applied to `flags`.
Flags with_change(Flags flags, const std::string& change) {
  std::istringstream words(change);
  std::string word, flag;
  while (words >> word) {
    if (word.rfind("--", 0) == 0) {
      flag = word;
      flags[flag] = "";  // a switch until a value follows
    } else {
      flags[flag] = word;
    }
  }
  return flags;
}

const std::vector<Flags> kTooBig{
    {{"--params", "70e9"}, {"--gpus", "8"}},
    {{"--params", "70e9"}, {"--gpus", "8"}, {"--zero", "3"}},
    {{"--params", "70e9"}, {"--gpus", "16"}, {"--zero", "1"}},
    {{"--params", "175e9"}, {"--gpus", "64"}, {"--zero", "2"}, {"--tp", "2"}},
    {{"--params", "70e9"},
     {"--gpus", "64"},
     {"--zero", "1"},
     {"--tp", "2"},
     {"--pp", "2"},
     {"--micro-batches", "8"},
     {"--layers", "80"},
     {"--hidden", "8192"},
     {"--heads", "64"},
     {"--seq", "4096"}},
    {{"--params", "13e9"},
     {"--gpus", "32"},
     {"--pp", "4"},
     {"--micro-batches", "16"},
     {"--layers", "40"},
     {"--hidden", "5120"},
     {"--heads", "20"},
     {"--seq", "8192"},
     {"--micro-batch", "4"}},
};

}  // namespace

TEST_CASE("every suggested change, run again, needs the memory and gets the verdict printed") {
  int checked = 0;
  for (const Flags& flags : kTooBig) {
    const nlohmann::json j = plan_json(flags);
    const std::string text = plan_text(flags);
    CAPTURE(text);
    REQUIRE_FALSE(j.at("fits").get<bool>());
    for (const auto& advice : j.at("advice")) {
      const std::string change = advice.at("change");
      CAPTURE(change);
      REQUIRE(advice.at("pending").is_null());  // the solution build evaluates everything
      const nlohmann::json again = plan_json(with_change(flags, change));
      const double promised = advice.at("memory_bytes").at("total").get<double>();
      CHECK(again.at("memory_bytes").at("total").get<double>() == doctest::Approx(promised));
      CHECK(again.at("fits").get<bool>() == advice.at("fits").get<bool>());
      // Suggested only when it helps.
      CHECK(promised < j.at("memory_bytes").at("total").get<double>());
      // The text states the number and the verdict for it.
      const std::string said = fmt::format("would need {} per GPU: {}", format_gb(promised),
                                           advice.at("fits").get<bool>() ? "fits" : "still over");
      CHECK(text.find(said) != std::string::npos);
      // "fits from N GPUs" with the change: run it on N.
      if (!advice.at("fits_from_gpus").is_null()) {
        Flags on_more = with_change(flags, change);
        on_more["--gpus"] = std::to_string(advice.at("fits_from_gpus").get<std::int64_t>());
        CHECK(plan_json(on_more).at("fits").get<bool>());
        ++checked;
      }
      ++checked;
    }
  }
  MESSAGE("suggestions re-run: " << checked);
  CHECK(checked >= 10);
}

TEST_CASE("no suggestion is printed without its number, and none when the layout fits") {
  for (const Flags& flags : kTooBig) {
    const std::string text = plan_text(flags);
    CAPTURE(text);
    CHECK(text.find("try --") == std::string::npos);
    CHECK(text.find("shard it with") == std::string::npos);
  }
  const nlohmann::json fits = plan_json({{"--params", "70e9"}, {"--gpus", "64"}, {"--zero", "3"}});
  CHECK(fits.at("fits").get<bool>());
  CHECK(fits.at("advice").empty());
}

TEST_CASE("a change the options would refuse is never suggested") {
  // 20 heads: tp 8 does not divide them, so only tp 2 and 4 are candidates.
  const nlohmann::json j = plan_json(kTooBig.back());
  for (const auto& advice : j.at("advice")) {
    const std::string change = advice.at("change");
    CHECK(change.find("--tp 8") == std::string::npos);
    std::ostringstream out, err;
    std::vector<std::string> args = to_args(with_change(kTooBig.back(), change));
    CHECK(run_plan_cli(args, out, err) == kExitOk);
  }
}

TEST_CASE("'as few as N GPUs' counts whole nodes, like the fewest-GPUs line, and shows the fill") {
  // 70e9 at stage 3 fits 14 GPUs at exactly 80 GB, but a partial node is not what the report
  // recommends: it says 16, the whole-node count, at 88% of the capacity.
  const std::string text = plan_text({{"--params", "70e9"}, {"--gpus", "32"}, {"--zero", "3"}});
  CAPTURE(text);
  CHECK(text.find("as few as 16 GPUs") != std::string::npos);
  CHECK(text.find("88% of capacity") != std::string::npos);
  CHECK(text.find("as few as 14") == std::string::npos);

  const nlohmann::json j = plan_json({{"--params", "70e9"}, {"--gpus", "8"}, {"--zero", "3"}});
  CHECK(j.at("min_gpus").get<int>() == 16);
  CHECK(j.at("min_gpus_partial_node").get<int>() == 14);
  CHECK(j.at("fit_rule").get<std::string>().find("whole 8-GPU nodes") != std::string::npos);
}

TEST_CASE("one fit rule: the verdict, the search and the bars agree at exactly 100%") {
  Options o;
  o.params = 70e9;
  o.zero_stage = 3;
  o.gpus = 14;  // 1120 GB / 14 = 80 GB exactly
  const Plan p = make_plan(o);
  CHECK(p.memory->total_bytes() == doctest::Approx(80e9));
  CHECK(*p.fits == fits_capacity(*p.memory, o));
  CHECK(*p.fits);
  CHECK(*p.min_gpus_any->gpus == 14);
}
