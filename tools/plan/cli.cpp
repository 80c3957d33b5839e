// Flag parsing for `mgpu plan` with CLI11. Counts are read as numbers so that "70e9" and "64"
// both work, then checked to be whole; every inconsistency becomes exit status 2 with the fix.
#include "plan/cli.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <mgpu/not_implemented.hpp>
#include <optional>

#include "command_line.hpp"
#include "plan/calibrate.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"
#include "plan/reproduce.hpp"
#include "plan/simulate.hpp"
#include "plan/step_cli.hpp"

namespace mgpu::planner {

namespace {

// Raw flag values as CLI11 fills them; to_options() turns them into checked Options.
struct RawFlags {
  double params = 0, gpus = 0, gpu_memory = 80e9, zero = 0, tp = 1, pp = 1, micro_batches = 1;
  double cp = 1;
  double gpus_per_node = 8;
  std::string precision = "bf16-mixed-adam";
  double interleave = 1;
  double layers = 0, hidden = 0, heads = 0, seq = 0, micro_batch = 1;
  std::string recompute = "none";
  bool sequence_parallel = false;
  double kv_heads = 0, ffn = 0, first_stage_layers = 0, last_stage_layers = 0, vocab = 0;
  bool swiglu = false, flash_attention = false;
  double tokens = 0, gpu_flops = 0, mfu = 1.0;
  bool explain = false;
  std::string json_path, svg_path;
};

std::int64_t to_count(const char* flag, double v) {
  if (!std::isfinite(v) || v != std::floor(v) || std::abs(v) > 9e15)
    throw UsageError(fmt::format("{} {}: must be a whole number, e.g. {} 8", flag, v, flag));
  return static_cast<std::int64_t>(v);
}

void add_flags(CLI::App& app, RawFlags& f) {
  app.add_option("--params", f.params, "parameters of the model, e.g. 70e9")
      ->type_name("N")
      ->required();
  app.add_option("--gpus", f.gpus, "total GPUs = tp * cp * pp * dp")->type_name("N")->required();
  app.add_option("--gpu-memory", f.gpu_memory,
                 "bytes of memory per GPU (default 80e9, or the --hardware preset's)")
      ->type_name("BYTES");
  app.add_option("--precision", f.precision, "bytes-per-parameter recipe (mgpu::kPrecisionPresets)")
      ->type_name("NAME")
      ->capture_default_str();
  app.add_option("--zero", f.zero, "ZeRO stage 0..3 over the data-parallel group")
      ->type_name("0..3")
      ->capture_default_str();
  app.add_option("--tp", f.tp, "tensor-parallel degree (divides --gpus-per-node)")
      ->type_name("N")
      ->capture_default_str();
  app.add_option("--pp", f.pp, "pipeline stages")->type_name("N")->capture_default_str();
  app.add_option("--cp", f.cp, "context-parallel degree: ranks sharing each sequence (11.7)")
      ->type_name("N")
      ->capture_default_str();
  app.add_option("--micro-batches", f.micro_batches, "micro-batches per step (m)")
      ->type_name("M")
      ->capture_default_str();
  app.add_option("--interleave", f.interleave,
                 "model chunks per pipeline stage v (interleaved 1F1B; m a multiple of pp)")
      ->type_name("V")
      ->capture_default_str();
  app.add_option("--gpus-per-node", f.gpus_per_node,
                 "GPUs per server (default 8, or the --hardware preset's)")
      ->type_name("N");
  auto* shape =
      app.add_option_group("model shape", "for activation memory and tensor/pipeline traffic");
  shape->add_option("--layers", f.layers, "transformer layers L")->type_name("L");
  shape->add_option("--hidden", f.hidden, "hidden size h")->type_name("H");
  shape->add_option("--heads", f.heads, "attention heads a")->type_name("A");
  shape->add_option("--seq", f.seq, "sequence length s")->type_name("S");
  shape->add_option("--micro-batch", f.micro_batch, "sequences per micro-batch b")
      ->type_name("B")
      ->capture_default_str();
  shape->add_option("--recompute", f.recompute, "none, selective or full")
      ->type_name("none|selective|full")
      ->capture_default_str();
  shape->add_flag("--sequence-parallel", f.sequence_parallel,
                  "shard the rest of the activations over tp");
  shape
      ->add_option("--kv-heads", f.kv_heads,
                   "key/value heads, grouped-query attention (default: --heads)")
      ->type_name("N");
  shape->add_option("--ffn", f.ffn, "FFN inner size (default 4 h)")->type_name("N");
  shape->add_flag("--swiglu", f.swiglu, "gated FFN: three h x ffn matrices");
  shape->add_flag("--flash-attention", f.flash_attention,
                  "fused attention: no s x s scores kept or written");
  shape
      ->add_option("--first-stage-layers", f.first_stage_layers,
                   "layers on the first pipeline stage (default: as the others)")
      ->type_name("N");
  shape
      ->add_option("--last-stage-layers", f.last_stage_layers,
                   "layers on the last pipeline stage (default: as the others)")
      ->type_name("N");
  shape
      ->add_option("--vocab", f.vocab,
                   "vocabulary V: the embedding on the first stage, the output layer on the last")
      ->type_name("V");
  auto* time = app.add_option_group("compute and time");
  time->add_option("--tokens", f.tokens, "training tokens D, for 6 * params * D FLOPs")
      ->type_name("D");
  time->add_option("--gpu-flops", f.gpu_flops, "FLOP/s of one GPU (needs --tokens)")
      ->type_name("FLOP/S");
  time->add_option("--mfu", f.mfu, "achieved fraction of --gpu-flops, (0, 1]")
      ->type_name("FRACTION")
      ->capture_default_str();
  app.add_flag("--explain", f.explain,
               "list every multiplier and the chapter function it comes from");
  app.add_option("--json", f.json_path,
                 "write the numbers as JSON to FILE ('-': stdout, no text report)")
      ->type_name("FILE");
  app.add_option("--svg", f.svg_path, "write the memory bar chart as SVG to FILE")
      ->type_name("FILE");
}

bool given(const CLI::App& app, const char* flag) { return app.get_option(flag)->count() > 0; }

Options to_options(const CLI::App& app, const RawFlags& f) {
  Options o;
  o.params = f.params;
  o.gpus = to_count("--gpus", f.gpus);
  o.gpu_memory_bytes = f.gpu_memory;
  o.precision = f.precision;
  const std::int64_t zero = to_count("--zero", f.zero);
  if (zero < 0 || zero > 3)  // checked here too: the value may not fit the int validate() sees
    throw UsageError(
        fmt::format("--zero {}: ZeRO has stages 0 (none) to 3; use --zero 0, 1, 2 or 3", zero));
  o.zero_stage = static_cast<int>(zero);
  o.tp = to_count("--tp", f.tp);
  o.pp = to_count("--pp", f.pp);
  o.cp = to_count("--cp", f.cp);
  o.micro_batches = to_count("--micro-batches", f.micro_batches);
  o.interleave = to_count("--interleave", f.interleave);
  o.gpus_per_node = to_count("--gpus-per-node", f.gpus_per_node);

  const std::array<const char*, 4> core{"--layers", "--hidden", "--heads", "--seq"};
  bool any_core = false;
  for (const char* flag : core) any_core = any_core || given(app, flag);
  if (any_core) {
    for (const char* flag : core)
      if (!given(app, flag))
        throw UsageError(
            fmt::format("{} is missing: the model shape needs --layers, --hidden, --heads and "
                        "--seq together",
                        flag));
    ModelShape s;
    s.transformer.layers = to_count("--layers", f.layers);
    s.transformer.hidden = to_count("--hidden", f.hidden);
    s.transformer.heads = to_count("--heads", f.heads);
    s.transformer.seq = to_count("--seq", f.seq);
    s.transformer.micro_batch = to_count("--micro-batch", f.micro_batch);
    s.recompute = parse_recompute(f.recompute);
    s.sequence_parallel = f.sequence_parallel;
    // A count flag given as 0 would silently mean "not given": refuse it instead.
    const auto positive = [&](const char* flag, double v) {
      const std::int64_t n = to_count(flag, v);
      if (given(app, flag) && n < 1)
        throw UsageError(fmt::format("{} {}: must be at least 1, or leave the flag out", flag, v));
      return n;
    };
    s.kv_heads = positive("--kv-heads", f.kv_heads);
    s.ffn = positive("--ffn", f.ffn);
    s.swiglu = f.swiglu;
    s.flash_attention = f.flash_attention;
    s.first_stage_layers = positive("--first-stage-layers", f.first_stage_layers);
    s.last_stage_layers = positive("--last-stage-layers", f.last_stage_layers);
    s.vocab = positive("--vocab", f.vocab);
    o.shape = s;
  } else {
    for (const char* flag :
         {"--micro-batch", "--recompute", "--sequence-parallel", "--kv-heads", "--ffn", "--swiglu",
          "--flash-attention", "--first-stage-layers", "--last-stage-layers", "--vocab"})
      if (given(app, flag))
        throw UsageError(fmt::format(
            "{} needs the model shape: add --layers, --hidden, --heads and --seq", flag));
    (void)parse_recompute(f.recompute);
  }
  if (given(app, "--tokens")) o.tokens = f.tokens;
  if (given(app, "--gpu-flops")) {
    if (!o.tokens)
      throw UsageError("--gpu-flops needs --tokens: time is FLOPs (6 * params * tokens) / rate");
    o.gpu_flops = f.gpu_flops;
  }
  if (given(app, "--mfu") && !o.gpu_flops)
    throw UsageError("--mfu needs --gpu-flops (and --tokens)");
  o.mfu = f.mfu;
  return o;
}

// What a plan prints and writes: the JSON alone on stdout (--json -), or the text report with the
// step time and the simulated step when asked for; then the JSON and SVG files named.
void write_outputs(const Plan& plan, const std::optional<StepReport>& step,
                   const std::optional<SimulatedStep>& simulated,
                   const nlohmann::ordered_json& json, const RawFlags& flags,
                   const std::string& trace_path, std::ostream& out) {
  if (flags.json_path == "-") {
    out << json.dump(2) << '\n';
  } else {
    out << render_text(plan, flags.explain);
    if (step) out << step_time_text(*step, plan.options);
    if (simulated) out << simulate_text(*simulated);
    if (simulated && !trace_path.empty()) out << "\nwrote " << trace_path << '\n';
    if (!flags.json_path.empty()) {
      tools::write_file(flags.json_path, json.dump(2) + "\n");
      out << "\nwrote " << flags.json_path << '\n';
    }
  }
  if (!flags.svg_path.empty()) {
    tools::write_file(flags.svg_path, render_svg(plan));
    if (flags.json_path != "-") out << "wrote " << flags.svg_path << '\n';
  }
}

}  // namespace

std::string chapter_folder_for(const std::string& message) {
  static const std::array<const char*, 8> chapters{
      "11_1_memory",   "11_2_data_parallel", "11_3_zero",           "11_4_tensor_parallel",
      "11_5_pipeline", "11_6_checkpointing", "11_7_3d_and_experts", "exercises"};
  const std::string prefix = "not implemented: ";
  const auto at = message.find(prefix);
  if (at == std::string::npos) return "chapters/";
  std::string section = message.substr(at + prefix.size());
  section = section.substr(0, section.find(' '));
  for (char& c : section)
    if (c == '.') c = '_';
  for (const char* ch : chapters)
    if (!section.empty() && std::string(ch).rfind(section + "_", 0) == 0)
      return std::string("chapters/") + ch;
  return "chapters/";
}

int run_plan_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Published runs against the step-time model (plan/reproduce.hpp): no layout flags needed.
  // With --simulate, the same rows run on the simulated cluster (plan/simulate.hpp).
  if (!args.empty() && args[0] == "--reproduce") {
    if (std::find(args.begin(), args.end(), "--simulate") != args.end())
      return run_simulate_reproduce_cli(args, out, err);
    return run_reproduce_cli(args, out, err);
  }
  // A hardware file from measurements (plan/calibrate.hpp).
  if (!args.empty() && args[0] == "--calibrate") return run_calibrate_cli(args, out, err);
  CLI::App app{
      "mgpu plan: memory per GPU, traffic, bubble and time of a tp x cp x pp x dp layout (section "
      "11.7)",
      "mgpu plan"};
  RawFlags flags;
  add_flags(app, flags);
  StepFlags step_flags;  // --hardware (plan/step_cli.hpp)
  add_step_flags(app, step_flags);
  if (const auto status = tools::parse_flags(app, args, out, err)) return *status;
  try {
    Options options = to_options(app, flags);
    // The hardware is read first: its GPU memory and server size are the memory report's too.
    const std::optional<Hardware> hardware = step_hardware(app, step_flags);
    if (hardware) apply_hardware(app, *hardware, options);
    const Plan plan = make_plan(options);
    const auto step = step_report(step_flags, plan, hardware);
    nlohmann::ordered_json json = to_json(plan);
    if (step) json["step"] = step_time_json(*step, plan.options);
    std::optional<SimulatedStep> simulated;
    if (step && step->priced && step_flags.simulate) {
      simulated = simulate_step(step->model, step->layout, step->hardware,
                                SimulateOptions{.trace_path = step_flags.trace});
      json["step"]["simulated_seconds_per_step"] = simulated->seconds;
    }
    write_outputs(plan, step, simulated, json, flags, step_flags.trace, out);
    return kExitOk;
  } catch (const mgpu::NotImplemented& e) {
    // Rows wait for unwritten functions; reaching here means a view read one of them.
    err << fmt::format(
        "mgpu plan: internal error: a row waiting for a chapter function was read ({}); please "
        "report it. Implementing that function in {}/ makes it go away.\n",
        e.what(), chapter_folder_for(e.what()));
    return kExitNotImplemented;
  } catch (const std::invalid_argument& e) {  // UsageError, and a chapter function's own checks
    err << "mgpu plan: " << e.what() << '\n';
    return kExitUsage;
  } catch (const std::exception& e) {
    err << "mgpu plan: " << e.what() << '\n';
    return kExitIoError;
  }
}

}  // namespace mgpu::planner
