// `mgpu plan --hardware`: the layout flags reach the step-time model unchanged, a user's copy of
// a preset is read like the preset, and the flags that need each other say so.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan/cli.hpp"
#include "plan/hardware.hpp"
#include "plan/step_time.hpp"

using namespace mgpu::planner;

namespace {

std::vector<std::string> layout_145b(const std::string& hardware) {
  return {"--params",      "145.6e9", "--gpus",          "1536",  "--tp",     "8",
          "--pp",          "8",       "--micro-batches", "48",    "--layers", "80",
          "--hidden",      "12288",   "--heads",         "96",    "--seq",    "2048",
          "--micro-batch", "2",       "--recompute",     "full",  "--vocab",  "51200",
          "--interleave",  "2",       "--hardware",      hardware};
}

/// The step the model computes for layout_145b's run, built here without the command line,
/// which passes --params on as the parameters the stages share.
StepTime step_145b(const std::string& hardware) {
  return step_time(
      {.layers = 80,
       .hidden = 12288,
       .heads = 96,
       .seq = 2048,
       .vocab = 51200,
       .global_batch = 2304,
       .params = 145.6e9},
      {.tp = 8, .pp = 8, .dp = 24, .micro_batch = 2, .interleave = 2, .recompute = Recompute::full},
      load_hardware(hardware));
}

int run(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::ostringstream o, e;
  const int status = run_plan_cli(args, o, e);
  out = o.str();
  err = e.str();
  return status;
}

}  // namespace

TEST_CASE("--hardware prints the step the model computes for the same run") {
  std::string out, err;
  REQUIRE(run(layout_145b("a100-80gb"), out, err) == 0);
  const StepTime st = step_145b("a100-80gb");
  CHECK(out.find(fmt::format("{:.3f} s", st.seconds)) != std::string::npos);
  CHECK(out.find("global batch 2304") != std::string::npos);
  CHECK(out.find("MFU") != std::string::npos);
}

TEST_CASE("with --tokens the run takes D / (B s) steps of the step time") {
  std::vector<std::string> args = layout_145b("a100-80gb");
  args.insert(args.end(), {"--tokens", "300e9"});
  std::string out, err;
  REQUIRE(run(args, out, err) == 0);
  const StepTime st = step_145b("a100-80gb");
  const double days = 300e9 / (2304.0 * 2048) * st.seconds / 86400;
  CHECK(out.find(fmt::format("{:.1f} days at this step time", days)) != std::string::npos);
}

TEST_CASE("a copy of a preset with a slower network is read as a file and predicts a slower step") {
  nlohmann::json j = hardware_to_json(load_hardware("a100-80gb"));
  j["name"] = "my-cluster";
  j["network_bytes_per_s"]["value"] = 2.5e9;
  j["network_bytes_per_s"]["source"] = "our cluster: one 20 Gb/s link per GPU";
  const std::string path =
      (std::filesystem::temp_directory_path() / "mgpu-test-my-cluster.json").string();
  std::ofstream(path) << j.dump(2);
  std::string fast, slow, err;
  REQUIRE(run(layout_145b("a100-80gb"), fast, err) == 0);
  REQUIRE(run(layout_145b(path), slow, err) == 0);
  CHECK(slow.find("my-cluster") != std::string::npos);
  const auto step_of = [](const std::string& text) {
    const std::string label = "seconds per step";
    return std::stod(text.substr(text.find(label) + label.size()));
  };
  CHECK(step_of(slow) > step_of(fast));
  std::filesystem::remove(path);
}

TEST_CASE("--hardware needs the shape and --vocab, the step flags need --hardware") {
  std::string out, err;
  CHECK(run({"--params", "7e9", "--gpus", "8", "--hardware", "a100-80gb"}, out, err) == 2);
  CHECK(err.find("model shape") != std::string::npos);
  CHECK(run({"--params", "7e9", "--gpus", "8", "--layers", "32", "--hidden", "4096", "--heads",
             "32", "--seq", "4096", "--hardware", "h100-sxm"},
            out, err) == 2);
  CHECK(err.find("--vocab") != std::string::npos);
  CHECK(run({"--params", "7e9", "--gpus", "8", "--dp-overlap"}, out, err) == 2);
  CHECK(err.find("--hardware") != std::string::npos);
  // The model's flags belong to the shape, which both halves read.
  CHECK(run({"--params", "7e9", "--gpus", "8", "--vocab", "32000"}, out, err) == 2);
  CHECK(err.find("needs the model shape") != std::string::npos);
  CHECK(run({"--params", "7e9", "--gpus", "8", "--layers", "32", "--hidden", "4096", "--heads",
             "32", "--seq", "4096", "--vocab", "32000", "--hardware", "tpu-v9"},
            out, err) == 2);
  CHECK(err.find("h100-sxm") != std::string::npos);
}

TEST_CASE("--json with --hardware carries the step the model computes, parts adding to the step") {
  std::vector<std::string> args = layout_145b("a100-80gb");
  args.insert(args.end(), {"--json", "-", "--tokens", "300e9"});
  std::string out, err;
  REQUIRE(run(args, out, err) == 0);
  const auto j = nlohmann::json::parse(out);
  REQUIRE(j.contains("step"));
  const auto& step = j["step"];
  const StepTime st = step_145b("a100-80gb");
  CHECK(step["hardware"] == "a100-80gb");
  CHECK(step["global_batch"] == 2304);
  CHECK(step["micro_batches"] == 48);
  const auto& parts = step["seconds_per_component"];
  CHECK(parts["compute"].get<double>() == doctest::Approx(st.compute));
  CHECK(parts["exposed_tp"].get<double>() == doctest::Approx(st.exposed_tp));
  CHECK(parts["bubble"].get<double>() == doctest::Approx(st.bubble));
  CHECK(parts["p2p"].get<double>() == doctest::Approx(st.p2p));
  CHECK(parts["exposed_dp"].get<double>() == doctest::Approx(st.exposed_dp));
  CHECK(parts["optimizer"].get<double>() == doctest::Approx(st.optimizer));
  double sum = 0;
  for (const auto& [name, seconds] : parts.items()) sum += seconds.get<double>();
  CHECK(step["seconds_per_step"].get<double>() == doctest::Approx(sum).epsilon(1e-12));
  CHECK(step["seconds_per_step"].get<double>() == doctest::Approx(st.seconds));
  // TFLOP/s, MFU and HFU by their definitions, from the step's own FLOPs and seconds.
  const double gpus = 1536, peak = load_hardware("a100-80gb").peak_flops;
  CHECK(step["tflops_per_gpu"].get<double>() ==
        doctest::Approx(st.hardware_flops / (st.seconds * gpus) / 1e12));
  CHECK(step["mfu"].get<double>() == doctest::Approx(st.model_flops / (st.seconds * gpus * peak)));
  CHECK(step["hfu"].get<double>() ==
        doctest::Approx(st.hardware_flops / (st.seconds * gpus * peak)));
  CHECK(step["hfu"].get<double>() > step["mfu"].get<double>());  // full recompute runs more
  CHECK(step["run_days"].get<double>() ==
        doctest::Approx(300e9 / (2304.0 * 2048) * st.seconds / 86400));
}

TEST_CASE("--json without --hardware has no step") {
  std::string out, err;
  REQUIRE(run({"--params", "7e9", "--gpus", "8", "--json", "-"}, out, err) == 0);
  CHECK_FALSE(nlohmann::json::parse(out).contains("step"));
}

TEST_CASE("--interleave means the same in both halves: the report's bubble and the step's") {
  std::vector<std::string> args = layout_145b("a100-80gb");
  std::string out, err;
  REQUIRE(run(args, out, err) == 0);
  // p 8, m 48, v 2: (p-1)/(v m+p-1) = 7/103, in the report and beside the step's seconds.
  CHECK(out.find(fmt::format("interleaved 1F1B, v 2: (p-1)/v of a stage's micro-batch; "
                             "(p-1)/(v m+p-1) = {:.4f}",
                             7.0 / 103)) != std::string::npos);
  CHECK(out.find(fmt::format("Pipeline bubble: {:.4f} of each step idle, (p-1)/(v m+p-1) with p "
                             "8, v 2 and m 48",
                             7.0 / 103)) != std::string::npos);
  args[args.size() - 3] = "1";  // --interleave 1: plain 1F1B in both
  REQUIRE(run(args, out, err) == 0);
  CHECK(out.find(fmt::format("plain 1F1B, v 1: (p-1)/v of a stage's micro-batch; "
                             "(p-1)/(v m+p-1) = {:.4f}",
                             7.0 / 55)) != std::string::npos);
  CHECK(out.find(fmt::format("Pipeline bubble: {:.4f} of each step idle, (p-1)/(m+p-1)",
                             7.0 / 55)) != std::string::npos);
}
