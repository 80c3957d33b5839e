// `--hardware` and its companions: the options become a RunModel and a RunLayout, and the step's
// breakdown is printed as a short table.
#include "plan/step_cli.hpp"

#include <fmt/format.h>
#include <cmath>

#include "plan/step_time.hpp"

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
}

std::string step_time_text(const CLI::App& app, const StepFlags& f, const Options& o) {
  if (f.hardware.empty()) {
    for (const char* flag :
         {"--vocab", "--interleave", "--ffn", "--kv-heads", "--swiglu", "--flash-attention",
          "--dp-overlap", "--first-stage-layers", "--last-stage-layers"})
      if (app.get_option(flag)->count() > 0)
        throw UsageError(
            fmt::format("{} prices a step: add --hardware a100-80gb (or h100-sxm, "
                        "h200-sxm, or a file)",
                        flag));
    return "";
  }
  if (o.cp > 1)
    throw UsageError(
        "--hardware prices tp x pp x dp layouts; its step model has no context parallelism yet: "
        "drop --cp, or drop --hardware to see --cp's memory and traffic");
  if (!o.shape)
    throw UsageError("--hardware needs the model shape: add --layers, --hidden, --heads and --seq");
  if (f.vocab <= 0) throw UsageError("--hardware needs the vocabulary: add --vocab, e.g. 51200");
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
  std::string out =
      fmt::format("\nOne step on {} ({}), global batch {} = m {} x b {} x dp {}:\n", hw.name,
                  hw.description, md.global_batch, o.micro_batches, s.micro_batch, l.dp);
  const auto line = [&](const char* what, double seconds, const char* how) {
    out += fmt::format("  {:<22}{:>10.3f} s {:>5.1f}%  {}\n", what, seconds,
                       100 * seconds / st.seconds, how);
  };
  line("compute", st.compute, "GEMMs, attention, memory-bound ops of the busiest stage");
  line("exposed tp", st.exposed_tp, "tensor-parallel collectives on NVLink");
  line("bubble", st.bubble, "pipeline fill and drain, (p-1)/v of a stage's micro-batch");
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

}  // namespace mgpu::planner
