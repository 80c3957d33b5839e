// `mgpu plan` has two halves, the memory report and, with --hardware, the step time. They read
// one description of the model and the layout, so they must agree: a layout the memory report
// says fits is priced, one it says does not fit is not, and the per-GPU numbers both compute
// (the layers of each stage, the parameters of the fullest GPU, the memory, the bytes each
// group sends) are the same number. The layouts include published runs typed as their papers
// give them (Llama 3 405B at 8K and 128K tokens, Megatron-LM's 530B); no published result is
// typed here, only the layouts, and the tests hold properties, never a throughput.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "plan/cli.hpp"
#include "plan/model.hpp"

using namespace mgpu::planner;
using tools_test::run_cli;

namespace {

using Args = std::vector<std::string>;

Args joined(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Llama 3 405B as Dubey et al. 2024 describe it: 126 layers, pipeline stages of 8 with one layer
// fewer on the first and the last (they hold the embedding and the output layer), grouped-query
// attention with 8 KV heads of 128, a SwiGLU FFN of 53248, fused attention, a 128256 vocabulary;
// tp 8 with sequence parallelism, interleaved pipeline, the gradients and optimizer states
// sharded over the data-parallel ranks (ZeRO stage 2) behind the backward, on H100s.
const Args kLlama405b = {"--params",
                         "405e9",
                         "--layers",
                         "126",
                         "--hidden",
                         "16384",
                         "--heads",
                         "128",
                         "--kv-heads",
                         "8",
                         "--ffn",
                         "53248",
                         "--swiglu",
                         "--flash-attention",
                         "--vocab",
                         "128256",
                         "--tp",
                         "8",
                         "--sequence-parallel",
                         "--pp",
                         "16",
                         "--first-stage-layers",
                         "7",
                         "--last-stage-layers",
                         "7",
                         "--interleave",
                         "2",
                         "--zero",
                         "2",
                         "--dp-overlap",
                         "--hardware",
                         "h100-sxm"};

// The layouts of the 405B run: 8K tokens on 16384 and on 8192 GPUs, 128K tokens with cp 16.
const Args kLlama8k =
    joined(kLlama405b, {"--seq", "8192", "--gpus", "16384", "--micro-batches", "16"});
const Args kLlama8kHalf =
    joined(kLlama405b, {"--seq", "8192", "--gpus", "8192", "--micro-batches", "32"});
const Args kLlama128k = joined(
    kLlama405b, {"--seq", "131072", "--cp", "16", "--gpus", "16384", "--micro-batches", "16"});

// Megatron-LM's 530B (Narayanan et al. 2021, Table 1): tp 8, 35 stages of 3 layers, 3 chunks
// each, 9 data-parallel replicas with the distributed optimizer (ZeRO stage 1), full recompute.
const Args kMegatron530b = {"--params",
                            "529.6e9",
                            "--gpus",
                            "2520",
                            "--tp",
                            "8",
                            "--pp",
                            "35",
                            "--interleave",
                            "3",
                            "--micro-batches",
                            "280",
                            "--layers",
                            "105",
                            "--hidden",
                            "20480",
                            "--heads",
                            "128",
                            "--seq",
                            "2048",
                            "--vocab",
                            "51200",
                            "--recompute",
                            "full",
                            "--zero",
                            "1",
                            "--hardware",
                            "a100-80gb"};

// The same model sharded by ZeRO-3 (FSDP) over 256 data-parallel ranks, no pipeline, the
// collectives prefetched behind the compute.
const Args kMegatron530bFsdp = {
    "--params",        "529.6e9", "--gpus",   "2048", "--tp",         "8",
    "--micro-batches", "4",       "--layers", "105",  "--hidden",     "20480",
    "--heads",         "128",     "--seq",    "2048", "--vocab",      "51200",
    "--recompute",     "full",    "--zero",   "3",    "--dp-overlap", "--hardware",
    "a100-80gb"};

// A 70B of the Llama 2 shape with context parallelism inside servers.
const Args kLong70b = {"--params",
                       "70e9",
                       "--gpus",
                       "64",
                       "--tp",
                       "2",
                       "--cp",
                       "4",
                       "--zero",
                       "1",
                       "--micro-batches",
                       "4",
                       "--pp",
                       "2",
                       "--layers",
                       "80",
                       "--hidden",
                       "8192",
                       "--heads",
                       "64",
                       "--kv-heads",
                       "8",
                       "--ffn",
                       "28672",
                       "--swiglu",
                       "--flash-attention",
                       "--seq",
                       "32768",
                       "--vocab",
                       "32000",
                       "--hardware",
                       "h100-sxm"};

nlohmann::json plan_json(const Args& args) {
  const auto r = run_cli(run_plan_cli, joined(args, {"--json", "-"}));
  CAPTURE(r.err);
  REQUIRE(r.status == kExitOk);
  return nlohmann::json::parse(r.out);
}

// Bytes per step the memory report lists for one group.
double group_bytes(const nlohmann::json& j, const std::string& group) {
  double sum = 0;
  for (const auto& t : j.at("traffic"))
    if (t.at("group") == group) sum += t.at("bytes").get<double>();
  return sum;
}

// Checks that the memory report and the step agree on everything they both say about `args`.
void check_halves_agree(const Args& args) {
  std::string line;
  for (const auto& a : args) line += a + " ";
  CAPTURE(line);
  const nlohmann::json j = plan_json(args);
  REQUIRE(j.contains("step"));
  const nlohmann::json& step = j.at("step");
  // One verdict: priced exactly when it fits, on the same memory of the same stage.
  CHECK(step.at("priced") == j.at("fits"));
  CHECK(step.at("fits") == j.at("fits"));
  CHECK(step.at("memory_bytes_per_gpu").get<double>() ==
        doctest::Approx(j.at("memory_bytes").at("total").get<double>()).epsilon(1e-12));
  CHECK(step.at("memory_stage") == j.at("memory_stage"));
  CHECK(step.at("capacity_bytes") == j.at("capacity_bytes"));
  // A layout that is priced is never declared impossible, nor one that fits refused.
  if (j.at("fits") == false) return;
  CHECK(j.at("min_gpus").is_number());
  CHECK(step.at("stage_layers") == j.at("stage_layers"));
  CHECK(step.at("params_per_gpu").get<double>() ==
        doctest::Approx(j.at("params_per_gpu").get<double>()).epsilon(1e-12));
  // Each group's bytes, counted by the step from its own operations and by the report through
  // the chapter functions.
  const nlohmann::json& traffic = step.at("traffic_bytes_per_step");
  for (const char* group : {"tp", "pp", "cp", "dp"}) {
    CAPTURE(group);
    CHECK(traffic.at(group).get<double>() == doctest::Approx(group_bytes(j, group)).epsilon(1e-9));
  }
  CHECK(step.at("seconds_per_step").get<double>() > 0);
}

}  // namespace

TEST_CASE("both halves agree on fit and on every per-GPU number they share") {
  for (const Args& args :
       {kLlama8k, kLlama8kHalf, kLlama128k, kMegatron530b, kMegatron530bFsdp, kLong70b})
    check_halves_agree(args);
  // The published layouts fit and are priced.
  for (const Args& args : {kLlama8k, kLlama128k, kMegatron530b, kMegatron530bFsdp}) {
    const nlohmann::json j = plan_json(args);
    CHECK(j.at("fits") == true);
    CHECK(j.at("step").at("priced") == true);
  }
}

TEST_CASE("a layout that does not fit is not priced, and the report says why and what fits") {
  // The 8K layout with the optimizer states alone sharded (ZeRO-1) needs more than 80 GB.
  Args zero1 = kLlama8k;
  for (std::size_t i = 0; i + 1 < zero1.size(); ++i)
    if (zero1[i] == "--zero") zero1[i + 1] = "1";
  check_halves_agree(zero1);
  const nlohmann::json j = plan_json(zero1);
  CHECK(j.at("fits") == false);
  CHECK(j.at("step").at("priced") == false);
  CHECK_FALSE(j.at("step").contains("seconds_per_step"));
  const auto text = run_cli(run_plan_cli, zero1);
  REQUIRE(text.status == kExitOk);
  CHECK(text.out.find("not priced:") != std::string::npos);
  CHECK(text.out.find("seconds per step") == std::string::npos);
  // Asking for more memory, the user gets the step.
  const nlohmann::json more = plan_json(joined(zero1, {"--gpu-memory", "96e9"}));
  CHECK(more.at("fits") == true);
  CHECK(more.at("step").at("priced") == true);
}

TEST_CASE("126 layers on 16 stages: refused evenly with the uneven split as the fix, then priced") {
  const Args even = {"--params", "405e9", "--gpus",   "128",   "--tp",    "8",   "--pp",  "16",
                     "--layers", "126",   "--hidden", "16384", "--heads", "128", "--seq", "8192"};
  tools_test::check_refused(run_plan_cli, kExitUsage, even,
                            "--first-stage-layers 7 --last-stage-layers 7");
  tools_test::check_refused(run_plan_cli, kExitUsage,
                            joined(even, {"--first-stage-layers", "6", "--last-stage-layers", "6"}),
                            "leaves 114 for the other 14 stages");
  const Plan p = make_plan([] {
    Options o;
    o.params = 405e9;
    o.gpus = 128;
    o.tp = 8;
    o.pp = 16;
    o.shape = ModelShape{.transformer = {.seq = 8192, .hidden = 16384, .heads = 128, .layers = 126},
                         .first_stage_layers = 7,
                         .last_stage_layers = 7};
    return o;
  }());
  REQUIRE(p.stage_layers.size() == 16);
  CHECK(p.stage_layers.front() == 7);
  CHECK(p.stage_layers.back() == 7);
  for (std::size_t i = 1; i + 1 < 16; ++i) CHECK(p.stage_layers[i] == 8);
  // Without the vocabulary the layers share Psi: the fullest GPU holds 8 of 126 layers' worth.
  CHECK(p.params_per_gpu == doctest::Approx(405e9 * 8 / 126 / 8));
  // The first stage holds the most micro-batches but one layer fewer; the second holds one
  // micro-batch fewer of eight layers: 8 x 15 > 7 x 16, so the second decides.
  CHECK(p.memory_stage == 1);
}

TEST_CASE("the flags of the model change the memory as the step's model has them") {
  Options o;
  o.params = 70e9;
  o.gpus = 8;
  o.tp = 8;
  o.shape = ModelShape{.transformer = {.seq = 4096, .hidden = 8192, .heads = 64, .layers = 80}};
  const double s = 4096, h = 8192, a = 64, t = 8, L = 80;
  const double gpt = make_plan(o).memory->activation_bytes;
  // The GPT defaults are 11.1's formula, Korthikanti et al.'s s b h (10 + 24/t + 5 a s/(h t)).
  CHECK(gpt == doctest::Approx(L * s * h * (10 + 24 / t + 5 * a * s / (h * t))));
  // Fused attention keeps one fp32 log-sum-exp per head instead of the 5 a s bytes of scores.
  o.shape->flash_attention = true;
  const double flash = make_plan(o).memory->activation_bytes;
  CHECK(gpt - flash == doctest::Approx(L * s * (5 * a * s - 4 * a) / t));
  // 8 KV heads of 128 instead of 64: K and V shrink from 2 h to 2 x 1024 bytes per token each.
  o.shape->kv_heads = 8;
  const double gqa = make_plan(o).memory->activation_bytes;
  CHECK(flash - gqa == doctest::Approx(L * s * 4 * (h - 8 * 128) / t));
  // A SwiGLU FFN of 28672 keeps 6 ffn bytes per token where a GeLU of 4 h keeps 16 h.
  o.shape->ffn = 28672;
  o.shape->swiglu = true;
  const double swiglu = make_plan(o).memory->activation_bytes;
  CHECK(swiglu - gqa == doctest::Approx(L * s * (6 * 28672 - 16 * h) / t));
  // Full recompute keeps the layer input only, whatever the layer.
  o.shape->recompute = Recompute::full;
  CHECK(make_plan(o).memory->activation_bytes == doctest::Approx(L * 2 * s * h));
}

TEST_CASE("cp divides the activations, and the ring's bytes scale with the KV heads") {
  const auto plan = [](std::int64_t cp, std::int64_t kv) {
    Options o;
    o.params = 70e9;
    o.gpus = 64;
    o.tp = 8;
    o.cp = cp;
    o.zero_stage = 1;
    o.shape = ModelShape{.transformer = {.seq = 65536, .hidden = 8192, .heads = 64, .layers = 80},
                         .kv_heads = kv,
                         .flash_attention = true};
    return make_plan(o);
  };
  const auto ring = [](const Plan& p) {
    for (const auto& t : p.traffic)
      if (t.kind == "cp_ring") return *t.bytes;
    return 0.0;
  };
  for (std::int64_t c : {2, 4, 8}) {
    CAPTURE(c);
    CHECK(plan(c, 64).memory->activation_bytes * static_cast<double>(c) ==
          doctest::Approx(plan(1, 64).memory->activation_bytes));
    // 8 of 64 KV heads send 8/64 of the keys and values round the ring.
    CHECK(ring(plan(c, 8)) / ring(plan(c, 64)) == doctest::Approx(8.0 / 64));
  }
}

TEST_CASE("--hardware sets the capacity and the server the memory report judges against") {
  const Args shape = {"--params", "70e9", "--gpus",  "8",  "--tp",  "4",    "--layers", "80",
                      "--hidden", "8192", "--heads", "64", "--seq", "4096", "--vocab",  "32000"};
  const nlohmann::json h200 = plan_json(joined(shape, {"--hardware", "h200-sxm"}));
  CHECK(h200.at("capacity_bytes").get<double>() == doctest::Approx(141e9));
  const nlohmann::json own =
      plan_json(joined(shape, {"--hardware", "h200-sxm", "--gpu-memory", "120e9"}));
  CHECK(own.at("capacity_bytes").get<double>() == doctest::Approx(120e9));
  tools_test::check_refused(run_plan_cli, kExitUsage,
                            joined(shape, {"--hardware", "h100-sxm", "--gpus-per-node", "4"}),
                            "drop --gpus-per-node");
}

TEST_CASE("the model's and the schedule's flags are refused with the fix, in both halves alike") {
  const Args base = {"--params", "70e9", "--gpus",  "64", "--layers", "80",
                     "--hidden", "8192", "--heads", "64", "--seq",    "4096"};
  const auto refused = [&](const Args& extra, const std::string& fix) {
    tools_test::check_refused(run_plan_cli, kExitUsage, joined(base, extra), fix);
    // The step reads the same options: adding --hardware changes nothing in the verdict.
    tools_test::check_refused(
        run_plan_cli, kExitUsage,
        joined(joined(base, extra), {"--vocab", "32000", "--hardware", "h100-sxm"}), fix);
  };
  refused({"--interleave", "2", "--pp", "4", "--micro-batches", "6"}, "use --micro-batches 4 or 8");
  refused({"--interleave", "2"}, "add --pp, or drop --interleave");
  refused({"--kv-heads", "5"}, "use --kv-heads 1, 2, 4, 8, 16, 32 or 64");
  refused({"--kv-heads", "4", "--tp", "8"}, "use --tp 1, 2 or 4");
  refused({"--ffn", "1001", "--tp", "8"}, "use --ffn 1008");
  refused({"--first-stage-layers", "7"}, "add --pp 2 or more");
  refused({"--kv-heads", "0"}, "leave the flag out");
  tools_test::check_refused(run_plan_cli, kExitUsage, joined(base, {"--vocab", "9000000"}),
                            "give the whole model's parameters");
}
