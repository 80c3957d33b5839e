// `--hardware` and its companions: the options become a RunModel and a RunLayout, and the step's
// breakdown is printed as a short table.
#include "plan/step_cli.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <vector>

namespace mgpu::planner {

void add_step_flags(CLI::App& app, StepFlags& f) {
  auto* g = app.add_option_group("step time on hardware",
                                 "price one step of this layout (needs the model shape)");
  g->add_option("--hardware", f.hardware,
                "a preset (a100-80gb, h100-sxm, h200-sxm) or a JSON file copied from one")
      ->type_name("NAME|FILE");
  g->add_flag("--dp-overlap", f.dp_overlap,
              "data-parallel collectives overlap the compute (ZeRO-3: layer by layer)");
  g->add_flag("--simulate", f.simulate,
              "also run the step on the simulated cluster, one rank thread per cp rank, stage "
              "and replica");
  g->add_option("--trace", f.trace, "with --simulate: write the step's Chrome trace to FILE")
      ->type_name("FILE");
}

std::optional<Hardware> step_hardware(const CLI::App& app, const StepFlags& f) {
  if (f.hardware.empty()) {
    for (const char* flag : {"--dp-overlap", "--simulate", "--trace"})
      if (app.get_option(flag)->count() > 0)
        throw UsageError(
            fmt::format("{} prices a step: add --hardware a100-80gb (or h100-sxm, "
                        "h200-sxm, or a file)",
                        flag));
    return std::nullopt;
  }
  if (!f.trace.empty() && !f.simulate)
    throw UsageError("--trace writes the simulated step: add --simulate");
  return load_hardware(f.hardware);
}

void apply_hardware(const CLI::App& app, const Hardware& hw, Options& o) {
  if (app.get_option("--gpu-memory")->count() == 0) o.gpu_memory_bytes = hw.memory_bytes;
  if (app.get_option("--gpus-per-node")->count() == 0)
    o.gpus_per_node = hw.gpus_per_server;
  else if (o.gpus_per_node != hw.gpus_per_server)
    throw UsageError(fmt::format(
        "--gpus-per-node {} but {} has {} GPUs per server: the step would price links the "
        "memory report does not assume; drop --gpus-per-node, or give --hardware a file with "
        "gpus_per_server {}",
        o.gpus_per_node, hw.name, hw.gpus_per_server, o.gpus_per_node));
}

std::optional<StepReport> step_report(const StepFlags& f, const Plan& plan,
                                      const std::optional<Hardware>& hardware) {
  if (!hardware) return std::nullopt;
  const Options& o = plan.options;
  if (!o.shape)
    throw UsageError("--hardware needs the model shape: add --layers, --hidden, --heads and --seq");
  if (o.shape->vocab <= 0)
    throw UsageError("--hardware needs the vocabulary: add --vocab, e.g. 51200");
  const ModelShape& sh = *o.shape;
  const TransformerShape& s = sh.transformer;
  const PrecisionRecipe recipe = precision_preset(o.precision);
  const std::int64_t dp = data_parallel_degree(o);
  // One description: every field below is the memory report's, so the two halves price the
  // same run.
  RunModel md{.layers = s.layers,
              .hidden = s.hidden,
              .heads = s.heads,
              .kv_heads = sh.kv_heads,
              .ffn = sh.ffn,
              .swiglu = sh.swiglu,
              .seq = s.seq,
              .vocab = sh.vocab,
              .global_batch = o.micro_batches * s.micro_batch * dp,
              .params = o.params};
  RunLayout l{.tp = o.tp,
              .pp = o.pp,
              .dp = dp,
              .cp = o.cp,
              .micro_batch = s.micro_batch,
              .interleave = o.interleave,
              .first_stage_layers = sh.first_stage_layers,
              .last_stage_layers = sh.last_stage_layers,
              .recompute = sh.recompute,
              .sequence_parallel = sh.sequence_parallel,
              .flash_attention = sh.flash_attention,
              .zero_stage = o.zero_stage,
              .dp_overlap = f.dp_overlap,
              .grad_bytes = recipe.bytes_grads,
              .weight_bytes = recipe.bytes_weights};
  // A layout whose busiest GPU runs out of memory has no step time; pending memory (a student
  // build) cannot say so, and the step is priced.
  const bool priced = !(plan.fits.has_value() && !*plan.fits);
  return StepReport{.hardware = *hardware,
                    .model = md,
                    .layout = l,
                    .priced = priced,
                    .step = priced ? step_time(md, l, *hardware) : StepTime{},
                    .micro_batches = o.micro_batches,
                    .memory = plan.memory,
                    .memory_stage = plan.memory_stage,
                    .fits = plan.fits,
                    .capacity_bytes = o.gpu_memory_bytes};
}

namespace {

// The memory report's verdict on the layout, repeated where the step is read: a step that does
// not fit is priced all the same, and says so.
std::string memory_line(const StepReport& r) {
  const std::string where =
      r.layout.pp > 1 ? fmt::format(" on stage {} of {}", r.memory_stage, r.layout.pp) : "";
  if (!r.memory.has_value())
    return fmt::format("  memory: finish {} to see whether it fits\n", r.memory.missing());
  const double gb = r.memory->total_bytes() / 1e9, cap = r.capacity_bytes / 1e9;
  if (*r.fits)
    return fmt::format(
        "  memory: {:.2f} GB per GPU{}, fits in {:.2f} GB (the memory report above)\n", gb, where,
        cap);
  return fmt::format(
      "  not priced: {:.2f} GB per GPU{} does not fit in {:.2f} GB, so this layout cannot run; "
      "the memory report above lists changes that fit (or give --gpu-memory if the GPU has "
      "more)\n",
      gb, where, cap);
}

// How the data-parallel line was priced: the collectives, and what overlap hides.
std::string dp_how(const StepReport& r) {
  const RunLayout& l = r.layout;
  if (l.dp * l.cp == 1) return "no data parallelism";
  static const char* const collectives[] = {
      "gradient all-reduce once per step", "ZeRO-1: reduce-scatter + all-gather once per step",
      "ZeRO-2: reduce-scatter every micro-batch, all-gather once",
      "ZeRO-3: per layer, 2 all-gathers + reduce-scatter every micro-batch"};
  const std::string group =
      l.cp > 1 ? fmt::format(" over dp x cp = {}", l.dp * l.cp) : fmt::format(" over dp {}", l.dp);
  const std::string overlap = !l.dp_overlap       ? "; not overlapped (add --dp-overlap)"
                              : l.zero_stage == 3 ? "; prefetched behind the forward and backward"
                              : l.zero_stage == 2 ? "; behind every micro-batch's backward"
                                                  : "; behind the last backward";
  return collectives[l.zero_stage] + group + overlap;
}

}  // namespace

std::string step_time_text(const StepReport& r, const Options& o) {
  const Hardware& hw = r.hardware;
  const RunModel& md = r.model;
  const RunLayout& l = r.layout;
  const StepTime& st = r.step;
  std::string out =
      fmt::format("\nOne step on {} ({}), global batch {} = m {} x b {} x dp {}:\n", hw.name,
                  hw.description, md.global_batch, r.micro_batches, l.micro_batch, l.dp);
  out += memory_line(r);
  if (!r.priced) return out;
  const auto line = [&](const char* what, double seconds, const char* how) {
    out += fmt::format("  {:<22}{:>10.3f} s {:>5.1f}%  {}\n", what, seconds,
                       100 * seconds / st.seconds, how);
  };
  line("compute", st.compute, "GEMMs, attention, memory-bound ops of the busiest stage");
  line("exposed tp", st.exposed_tp, "tensor-parallel collectives on NVLink");
  if (l.cp > 1) {
    const std::string ring =
        fmt::format("ring attention: KV sends a block's compute does not hide, cp {} {}", l.cp,
                    hw.gpus_per_server % (l.tp * l.cp) == 0 ? "inside a server" : "across servers");
    line("exposed cp", st.exposed_cp, ring.c_str());
  }
  // The schedule's own formula beside the model's seconds: the report's "Pipeline bubble" line
  // above; the model's share differs by the sends and the last stage's logits.
  const double v = static_cast<double>(l.interleave), m = static_cast<double>(st.micro_batches);
  const double p = static_cast<double>(l.pp);
  std::int64_t fewest = st.stages.front().layers, most = fewest;
  for (const StageTime& sg : st.stages) {
    fewest = std::min(fewest, sg.layers);
    most = std::max(most, sg.layers);
  }
  const std::string schedule =
      fmt::format("{} 1F1B, v {}", l.interleave > 1 ? "interleaved" : "plain", l.interleave);
  const std::string bubble_how =
      l.pp == 1 ? std::string("no pipeline")
      : fewest != most
          ? fmt::format("{}, stages of {} to {} layers: the other stages' time / v", schedule,
                        fewest, most)
          : fmt::format("{}: (p-1)/v of a stage's micro-batch; (p-1)/(v m+p-1) = {:.4f}", schedule,
                        (p - 1) / (v * m + p - 1));
  line("bubble", st.bubble, bubble_how.c_str());
  line("p2p", st.p2p, "pipeline sends between stages");
  line("exposed dp", st.exposed_dp, dp_how(r).c_str());
  line("optimizer", st.optimizer, "Adam on this GPU's parameters");
  out += fmt::format("  {:<22}{:>10.3f} s\n", "seconds per step", st.seconds);
  out += fmt::format(
      "  per GPU: {:.0f} TFLOP/s with recompute counted; MFU {:.1f}% (model FLOPs), HFU {:.1f}% "
      "(with recompute) of {:.0f} TFLOP/s peak\n",
      st.tflops_per_gpu, 100 * st.mfu, 100 * st.hfu, hw.peak_flops / 1e12);
  if (o.tokens) {  // the whole run at this step time: D tokens in steps of B s tokens
    const double steps = *o.tokens / static_cast<double>(md.global_batch * md.seq);
    out +=
        fmt::format("  {:.3g} tokens = {:.0f} steps of {} tokens: {:.1f} days at this step time\n",
                    *o.tokens, steps, md.global_batch * md.seq, steps * st.seconds / 86400);
  }
  return out;
}

nlohmann::ordered_json step_time_json(const StepReport& r, const Options& o) {
  const StepTime& st = r.step;
  nlohmann::ordered_json j;
  j["hardware"] = r.hardware.name;
  j["priced"] = r.priced;
  j["memory_bytes_per_gpu"] =
      r.memory.has_value() ? nlohmann::ordered_json(r.memory->total_bytes()) : nullptr;
  j["memory_stage"] = r.memory_stage;
  j["capacity_bytes"] = r.capacity_bytes;
  j["fits"] = r.fits.has_value() ? nlohmann::ordered_json(*r.fits) : nullptr;
  if (!r.priced) return j;
  j["global_batch"] = r.model.global_batch;
  j["micro_batches"] = r.micro_batches;
  j["seconds_per_component"] = {{"compute", st.compute},
                                {"exposed_tp", st.exposed_tp},
                                {"exposed_cp", st.exposed_cp},
                                {"bubble", st.bubble},
                                {"p2p", st.p2p},
                                {"exposed_dp", st.exposed_dp},
                                {"optimizer", st.optimizer}};
  j["seconds_per_step"] = st.seconds;
  j["tflops_per_gpu"] = st.tflops_per_gpu;
  j["mfu"] = st.mfu;
  j["hfu"] = st.hfu;
  j["model_flops"] = st.model_flops;
  j["hardware_flops"] = st.hardware_flops;
  if (o.tokens)
    j["run_days"] =
        *o.tokens / static_cast<double>(r.model.global_batch * r.model.seq) * st.seconds / 86400;
  else
    j["run_days"] = nullptr;
  // What the step shares with the memory report, per GPU.
  std::vector<std::int64_t> layers;
  double params = 0;
  for (const StageTime& sg : st.stages) {
    layers.push_back(sg.layers);
    params = std::max(params, sg.params);
  }
  j["stage_layers"] = layers;
  j["params_per_gpu"] = params;
  j["traffic_bytes_per_step"] = {
      {"tp", st.tp_bytes}, {"pp", st.pp_bytes}, {"cp", st.cp_bytes}, {"dp", st.dp_bytes}};
  return j;
}

}  // namespace mgpu::planner
