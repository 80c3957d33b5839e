// `--hardware` and its companions: the options become a RunModel and a RunLayout, and the step's
// breakdown is printed as a short table.
#include "plan/step_cli.hpp"

#include <fmt/format.h>
#include <cmath>

namespace mgpu::planner {

namespace {

std::int64_t whole(const char* flag, double v) {
  if (!std::isfinite(v) || v < 0 || v != std::floor(v) || v > 9e15)
    throw UsageError(fmt::format("{} {}: must be a whole number, e.g. {} 8", flag, v, flag));
  return static_cast<std::int64_t>(v);
}

}  // namespace

void add_step_flags(CLI::App& app, StepFlags& f) {
  auto* g = app.add_option_group("step time on hardware",
                                 "price one step of this layout (needs the model shape)");
  g->add_option("--hardware", f.hardware,
                "a preset (a100-80gb, h100-sxm, h200-sxm) or a JSON file copied from one")
      ->type_name("NAME|FILE");
  g->add_option("--vocab", f.vocab, "vocabulary size V")->type_name("V");
  g->add_option("--interleave", f.interleave, "model chunks per pipeline stage v")
      ->type_name("V")
      ->capture_default_str();
  g->add_option("--ffn", f.ffn, "FFN inner size (default 4 h)")->type_name("N");
  g->add_option("--kv-heads", f.kv_heads, "key/value heads, grouped-query attention (default a)")
      ->type_name("N");
  g->add_flag("--swiglu", f.swiglu, "gated FFN: three h x ffn matrices");
  g->add_flag("--flash-attention", f.flash_attention, "fused attention, no s x s scores in memory");
  g->add_flag("--dp-overlap", f.dp_overlap, "data-parallel collectives overlap the backward");
  g->add_option("--first-stage-layers", f.first_stage_layers, "layers on the first stage")
      ->type_name("N");
  g->add_option("--last-stage-layers", f.last_stage_layers, "layers on the last stage")
      ->type_name("N");
  g->add_flag("--simulate", f.simulate,
              "also run the step on the simulated cluster, one rank thread per stage and replica");
  g->add_option("--trace", f.trace, "with --simulate: write the step's Chrome trace to FILE")
      ->type_name("FILE");
}

std::optional<StepReport> step_report(const CLI::App& app, const StepFlags& f, const Options& o) {
  if (f.hardware.empty()) {
    for (const char* flag :
         {"--vocab", "--interleave", "--ffn", "--kv-heads", "--swiglu", "--flash-attention",
          "--dp-overlap", "--first-stage-layers", "--last-stage-layers", "--simulate", "--trace"})
      if (app.get_option(flag)->count() > 0)
        throw UsageError(
            fmt::format("{} prices a step: add --hardware a100-80gb (or h100-sxm, "
                        "h200-sxm, or a file)",
                        flag));
    return std::nullopt;
  }
  if (o.cp > 1)
    throw UsageError(
        "--hardware prices tp x pp x dp layouts; its step model has no context parallelism yet: "
        "drop --cp, or drop --hardware to see --cp's memory and traffic");
  if (!o.shape)
    throw UsageError("--hardware needs the model shape: add --layers, --hidden, --heads and --seq");
  if (f.vocab <= 0) throw UsageError("--hardware needs the vocabulary: add --vocab, e.g. 51200");
  if (!f.trace.empty() && !f.simulate)
    throw UsageError("--trace writes the simulated step: add --simulate");
  const Hardware hw = load_hardware(f.hardware);
  const TransformerShape& s = o.shape->transformer;
  RunModel md{.layers = s.layers,
              .hidden = s.hidden,
              .heads = s.heads,
              .kv_heads = whole("--kv-heads", f.kv_heads),
              .ffn = whole("--ffn", f.ffn),
              .swiglu = f.swiglu,
              .seq = s.seq,
              .vocab = whole("--vocab", f.vocab),
              .global_batch = o.micro_batches * s.micro_batch * data_parallel_degree(o)};
  RunLayout l{.tp = o.tp,
              .pp = o.pp,
              .dp = data_parallel_degree(o),
              .micro_batch = s.micro_batch,
              .interleave = whole("--interleave", f.interleave),
              .first_stage_layers = whole("--first-stage-layers", f.first_stage_layers),
              .last_stage_layers = whole("--last-stage-layers", f.last_stage_layers),
              .recompute = o.shape->recompute,
              .sequence_parallel = o.shape->sequence_parallel,
              .flash_attention = f.flash_attention,
              .zero_stage = o.zero_stage,
              .dp_overlap = f.dp_overlap};
  const StepTime st = step_time(md, l, hw);
  return StepReport{
      .hardware = hw, .model = md, .layout = l, .step = st, .micro_batches = o.micro_batches};
}

std::string step_time_text(const StepReport& r, const Options& o) {
  const Hardware& hw = r.hardware;
  const RunModel& md = r.model;
  const RunLayout& l = r.layout;
  const StepTime& st = r.step;
  std::string out =
      fmt::format("\nOne step on {} ({}), global batch {} = m {} x b {} x dp {}:\n", hw.name,
                  hw.description, md.global_batch, r.micro_batches, l.micro_batch, l.dp);
  const auto line = [&](const char* what, double seconds, const char* how) {
    out += fmt::format("  {:<22}{:>10.3f} s {:>5.1f}%  {}\n", what, seconds,
                       100 * seconds / st.seconds, how);
  };
  line("compute", st.compute, "GEMMs, attention, memory-bound ops of the busiest stage");
  line("exposed tp", st.exposed_tp, "tensor-parallel collectives on NVLink");
  // The schedule's own formula beside the model's seconds: with v = 1 it is the report's
  // "Pipeline bubble" line above; the model's share differs by the sends and uneven stages.
  const double v = static_cast<double>(l.interleave), m = static_cast<double>(st.micro_batches);
  const double p = static_cast<double>(l.pp);
  const std::string bubble_how =
      l.pp == 1 ? std::string("no pipeline")
                : fmt::format(
                      "{} 1F1B, v {}: (p-1)/v of a stage's micro-batch; (p-1)/(v m+p-1) "
                      "= {:.4f}",
                      l.interleave > 1 ? "interleaved" : "plain", l.interleave,
                      (p - 1) / (v * m + p - 1));
  line("bubble", st.bubble, bubble_how.c_str());
  line("p2p", st.p2p, "pipeline sends between stages");
  line("exposed dp", st.exposed_dp,
       st.exposed_dp > 0 || l.dp == 1 ? "data-parallel collectives" : "hidden behind the backward");
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
  j["global_batch"] = r.model.global_batch;
  j["micro_batches"] = r.micro_batches;
  j["seconds_per_component"] = {{"compute", st.compute},       {"exposed_tp", st.exposed_tp},
                                {"bubble", st.bubble},         {"p2p", st.p2p},
                                {"exposed_dp", st.exposed_dp}, {"optimizer", st.optimizer}};
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
  return j;
}

}  // namespace mgpu::planner
