// A student works through the chapters in order, and the planner is used from 11.1 on. A row
// whose chapter function is still a skeleton waits for it ("finish 11.7 per_gpu_memory to see
// these rows") while every other row is computed, and the command still exits 0. These tests
// check the mechanism with rows made pending by hand, which any build can do, and run the
// activities of the chapter READMEs on whatever build they are compiled in.
#include <doctest/doctest.h>

#include <sstream>

#include <mgpu/not_implemented.hpp>
#include <nlohmann/json.hpp>

#include "plan/cli.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"

using namespace mgpu::planner;

namespace {

// A plan put together by hand, the same on every build: 70e9 at ZeRO stage 3 on 8 GPUs with
// the memory, the bubble and one traffic row waiting, and two traffic rows computed.
Plan waiting_plan() {
  Plan p;
  p.options.params = 70e9;
  p.options.gpus = 8;
  p.options.zero_stage = 3;
  p.dp = 8;
  p.params_per_gpu = 70e9;
  p.memory = Row<mgpu::layout::GpuMemory>::pending("11.7 per_gpu_memory");
  p.fits = Row<bool>::pending("11.7 per_gpu_memory");
  // The search waits for another function, but its line is not shown without the memory, so
  // the closing list must not name it either.
  p.min_gpus = Row<FewestGpus>::pending("11.1 training_state_bytes");
  p.min_gpus_any = Row<FewestGpus>::pending("11.7 per_gpu_memory");
  p.traffic = {
      {"zero_reduce_scatter", "ZeRO gradient reduce-scatter", "dp",
       Row<double>::pending("11.3 zero_traffic_per_gpu")},
      {"zero_all_gather_forward", "ZeRO weight all-gather before forward", "dp", 122.5e9},
      {"zero_all_gather_backward", "ZeRO weight all-gather before backward", "dp", 122.5e9},
  };
  p.dp_traffic_vs_plain = 1.5;
  p.bubble = Row<double>::pending("11.5 gpipe_bubble_fraction");
  p.factors = {{"bytes per parameter", Row<double>::pending("11.1 bytes_per_parameter"),
                "w + g + m + o", "mgpu::memory::bytes_per_parameter (11.1)"}};
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The "predict, then run" commands of chapters 11.1 to 11.3 (their READMEs), in order.
const std::vector<std::vector<std::string>> kEarlyActivities{
    {"--params", "70e9", "--gpus", "1"},
    {"--params", "175e9", "--gpus", "64", "--tp", "8", "--pp", "8", "--layers", "96", "--hidden",
     "12288", "--heads", "96", "--seq", "2048", "--recompute", "selective", "--explain"},
    {"--params", "8e9", "--gpus", "1024", "--tokens", "15e12", "--gpu-flops", "4e14", "--mfu",
     "0.4"},
    {"--params", "7e9", "--gpus", "8"},
    {"--params", "7e9", "--gpus", "512"},
    {"--params", "70e9", "--gpus", "8", "--zero", "0"},
    {"--params", "70e9", "--gpus", "8", "--zero", "3"},
    {"--params", "70e9", "--gpus", "16", "--zero", "3"},
    {"--params", "70e9", "--gpus", "64", "--zero", "3"},
};

}  // namespace

TEST_CASE("compute_row keeps a value, names the function a skeleton throws, passes other errors") {
  const Row<double> done = compute_row([] { return 2.5; });
  CHECK(done.has_value());
  CHECK(*done == 2.5);
  const Row<double> waiting =
      compute_row([]() -> double { throw mgpu::NotImplemented("11.7 per_gpu_memory"); });
  CHECK_FALSE(waiting.has_value());
  CHECK(waiting.is_pending());
  CHECK(waiting.missing() == "11.7 per_gpu_memory");
  CHECK_THROWS_AS((void)*waiting, mgpu::NotImplemented);  // never a made-up number
  CHECK_THROWS_AS(compute_row([]() -> double { throw std::invalid_argument("bad"); }),
                  std::invalid_argument);
  const Row<double> not_asked;
  CHECK_FALSE(not_asked.shown());
  CHECK_THROWS_AS((void)*not_asked, std::logic_error);
}

TEST_CASE("pending rows name their function in the text, the JSON and the figure") {
  const Plan p = waiting_plan();
  const std::string text = render_text(p, false);
  CAPTURE(text);
  CHECK(contains(text, "Memory per GPU\n  finish 11.7 per_gpu_memory to see these rows"));
  CHECK(contains(text, "Pipeline bubble: finish 11.5 gpipe_bubble_fraction to see this row"));
  CHECK(contains(text, "finish 11.3 zero_traffic_per_gpu to see this row"));
  // The rows that do not wait are still there.
  CHECK(contains(text, "ZeRO weight all-gather before forward"));
  CHECK(contains(text, "122.50 GB"));
  // The closing list names each function once, with its folder and its test command.
  CHECK(contains(text, "11.7 per_gpu_memory"));
  CHECK(contains(text, "chapters/11_7_3d_and_experts"));
  CHECK(contains(text, "./mgpu test --student 11_7_3d_and_experts"));
  CHECK(contains(text, "chapters/11_5_pipeline"));
  CHECK(p.pending_functions(false).size() == 3);
  CHECK_FALSE(contains(text, "11.1 training_state_bytes"));
  // --explain shows the factors, and the list then names what they wait for too.
  CHECK_FALSE(contains(text, "11.1 bytes_per_parameter"));
  const std::string explained = render_text(p, true);
  CHECK(contains(explained, "finish 11.1 bytes_per_parameter to see this row"));
  CHECK(p.pending_functions(true).size() == 4);
  CHECK_FALSE(contains(text, "Fits:"));
  CHECK_FALSE(contains(text, "Does not fit"));

  const nlohmann::ordered_json j = to_json(p);
  CHECK(j.at("memory_bytes").is_null());
  CHECK(j.at("fits").is_null());
  CHECK(j.at("min_gpus").is_null());
  CHECK(j.at("bubble_fraction").is_null());
  CHECK(j.at("traffic_bytes_per_step").at("total").is_null());
  CHECK(j.at("pending").at("memory_bytes") == "11.7 per_gpu_memory");
  CHECK(j.at("pending").at("bubble_fraction") == "11.5 gpipe_bubble_fraction");
  CHECK(j.at("pending").at("traffic_bytes_per_step.zero_reduce_scatter") ==
        "11.3 zero_traffic_per_gpu");

  const std::string svg = render_svg(p);
  CHECK(contains(svg, "finish 11.7 per_gpu_memory to see this figure"));
  CHECK(contains(svg, "</svg>"));
}

TEST_CASE("without a model shape the memory rows need only 11.1 and 11.3, never 11.7") {
  Options o;
  o.params = 70e9;
  o.gpus = 8;
  CHECK(contains(memory_source(o), "(11.1)"));
  o.zero_stage = 3;
  CHECK(contains(memory_source(o), "(11.3)"));
  o.gpus = 1;  // one data-parallel GPU: nothing to shard
  CHECK(contains(memory_source(o), "(11.1)"));
  o.gpus = 32;
  o.tp = 8;
  o.pp = 4;
  CHECK(contains(memory_source(o), "(11.1)"));  // dp 1
  o.gpus = 64;
  CHECK(contains(memory_source(o), "(11.3)"));
  o.shape = ModelShape{{.seq = 4096, .micro_batch = 1, .hidden = 8192, .heads = 64, .layers = 80},
                       Recompute::none,
                       false};
  CHECK(contains(memory_source(o), "(11.7)"));
}

TEST_CASE("the 11.1 to 11.3 activities exit 0 on this build, what waits, waits by name") {
  for (const auto& args : kEarlyActivities) {
    std::ostringstream out, err;
    const int status = run_plan_cli(args, out, err);
    std::string line;
    for (const auto& a : args) line += a + " ";
    CAPTURE(line);
    CAPTURE(out.str());
    CAPTURE(err.str());
    CHECK(status == kExitOk);
    CHECK(err.str().empty());
    // Every "finish" row is listed at the end with its chapter.
    if (contains(out.str(), "finish "))
      CHECK(contains(out.str(), "Rows marked \"finish\" wait for chapter functions"));
  }
}
