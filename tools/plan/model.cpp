// make_plan(): the planner's numbers, each obtained from the chapter function that teaches it
// (11.1 bytes and FLOPs, 11.2/11.3 data-parallel traffic, 11.5 bubble, 11.6 recompute cost,
// 11.7 memory and traffic of a layout), so the student build shows the student's own numbers.
// No chapter formula is restated here; the only arithmetic is bookkeeping: the share
// Psi / (tp pp) that the ZeRO traffic is asked about, and the bubble's idle time added to time.
#include "plan/model.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <numeric>

#include "11_2_data_parallel/formulas.hpp"
#include "11_3_zero/formulas.hpp"
#include "11_4_tensor_parallel/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "11_6_checkpointing/formulas.hpp"
#include "11_7_3d_and_experts/formulas.hpp"

namespace mgpu::planner {

namespace {

constexpr double kActivationElementBytes = 2;  // bf16 activations, as in Korthikanti et al.

memory::TransformerShape transformer_shape(const ModelShape& s) {
  memory::TransformerShape t;
  t.seq = s.seq;
  t.micro_batch = s.micro_batch;
  t.hidden = s.hidden;
  t.heads = s.heads;
  t.layers = s.layers;
  return t;
}

memory::ActivationOptions activation_options(const Options& o) {
  memory::ActivationOptions a;
  a.tensor_parallel = o.tp;
  a.sequence_parallel = o.shape->sequence_parallel;
  a.recompute = o.shape->recompute;
  return a;
}

// The chapter 11.7 description of this layout. Without a model shape, activations are zero and
// the shape is a placeholder with one layer per stage (so pp divides it); callers then ignore
// the tensor and pipeline traffic, which would describe that placeholder.
layout::LayoutModel layout_model(const Options& o) {
  layout::LayoutModel m;
  m.params = o.params;
  m.recipe = memory::precision_preset(o.precision);
  m.layout = {o.tp, o.pp, data_parallel_degree(o)};
  m.zero_stage = o.zero_stage;
  m.micro_batches = o.micro_batches;
  m.bytes_per_activation = kActivationElementBytes;
  if (o.shape) {
    m.shape = transformer_shape(*o.shape);
    m.activation_bytes_per_layer =
        memory::activation_bytes_per_layer(m.shape, activation_options(o));
    m.recompute = o.shape->recompute;
  } else {
    m.shape.layers = o.pp;
    m.activation_bytes_per_layer = 0;
  }
  return m;
}

MemoryBytes to_memory(const layout::GpuMemory& g) {
  MemoryBytes m;
  m.weights = g.weights_bytes;
  m.grads = g.grads_bytes;
  m.master = g.master_bytes;
  m.optimizer = g.optimizer_bytes;
  m.activations = g.activation_bytes;
  return m;
}

Options with_gpus(Options o, std::int64_t gpus) {
  o.gpus = gpus;
  return o;
}

// ------------------------------------------------------------------ traffic

// Data-parallel traffic by collective: the plain all-reduce from 11.2 at stage 0, ZeRO's
// reduce-scatter and all-gathers from 11.3 at stages 1..3, on this GPU's share of the model.
void add_data_parallel_traffic(Plan& p, const memory::PrecisionRecipe& recipe) {
  const Options& o = p.options;
  if (p.dp == 1) return;
  if (o.zero_stage == 0) {
    p.traffic.push_back({"dp_all_reduce", "gradient all-reduce (plain data parallel)", "dp",
                         data_parallel::gradient_all_reduce_bytes_per_rank(p.dp, p.params_per_gpu,
                                                                           recipe.bytes_grads)});
    return;
  }
  const zero::TrafficBytes z =
      zero::zero_traffic_per_gpu(p.params_per_gpu, recipe, o.zero_stage, p.dp);
  p.traffic.push_back(
      {"zero_reduce_scatter", "ZeRO gradient reduce-scatter", "dp", z.reduce_scatter_bytes});
  p.traffic.push_back({"zero_all_gather_forward",
                       o.zero_stage == 3 ? "ZeRO weight all-gather before forward"
                                         : "ZeRO all-gather of updated weights",
                       "dp", z.all_gather_forward_bytes});
  if (o.zero_stage == 3)
    p.traffic.push_back({"zero_all_gather_backward", "ZeRO weight all-gather before backward", "dp",
                         z.all_gather_backward_bytes});
  if (z.all_reduce_bytes > 0)
    p.traffic.push_back({"dp_all_reduce", "gradient all-reduce", "dp", z.all_reduce_bytes});
}

// Tensor- and pipeline-parallel traffic of the busiest GPU, from the 11.7 layout model.
void add_model_parallel_traffic(Plan& p, const layout::LayoutModel& model) {
  if (!p.options.shape || (p.options.tp == 1 && p.options.pp == 1)) return;
  const layout::GpuTraffic t = layout::per_gpu_traffic(model);
  if (p.options.tp > 1)
    p.traffic.push_back({"tp_all_reduce",
                         p.options.shape->sequence_parallel
                             ? "tensor-parallel reduce-scatter + all-gather"
                             : "tensor-parallel activation all-reduces",
                         "tp", t.tensor_parallel_bytes});
  if (p.options.pp > 1)
    p.traffic.push_back(
        {"pp_boundary", "pipeline sends at stage boundaries", "pp", t.pipeline_bytes});
}

// ------------------------------------------------------------------ explain

// The ZeRO formula of one kind of state ("w", "g", "m", "o") at a stage: stage 1 shards m and o,
// stage 2 also g, stage 3 also w (section 11.3).
std::string state_formula(int stage, const std::string& kind) {
  const bool sharded =
      stage >= 3 || (stage >= 2 && kind == "g") || (stage >= 1 && (kind == "m" || kind == "o"));
  return kind + (sharded ? " Psi' / N_d" : " Psi'");
}

// The wording of the activation formula the 11.1 function applies, for --explain only.
std::string activation_formula(const ModelShape& s, std::int64_t tp) {
  const bool t = tp > 1;
  switch (s.recompute) {
    case Recompute::full:
      return s.sequence_parallel ? "2 s b h / t" : "2 s b h";
    case Recompute::selective:
      return s.sequence_parallel ? "s b h (34 / t)" : (t ? "s b h (10 + 24 / t)" : "s b h 34");
    case Recompute::none:
      return s.sequence_parallel
                 ? "s b h (34 / t + 5 a s / (h t))"
                 : (t ? "s b h (10 + 24 / t + 5 a s / (h t))" : "s b h (34 + 5 a s / h)");
  }
  return "?";
}

void add_factors(Plan& p, const memory::PrecisionRecipe& recipe) {
  const Options& o = p.options;
  auto add = [&](std::string name, double value, std::string formula, std::string source) {
    p.factors.push_back({std::move(name), value, std::move(formula), std::move(source)});
  };
  const std::string preset =
      fmt::format("mgpu::memory::precision_preset(\"{}\") (11.1)", o.precision);
  add("w: weight bytes per parameter", recipe.bytes_weights, "recipe field bytes_weights", preset);
  add("g: gradient bytes per parameter", recipe.bytes_grads, "recipe field bytes_grads", preset);
  add("m: master bytes per parameter", recipe.bytes_master, "recipe field bytes_master", preset);
  add("o: optimizer bytes per parameter", recipe.bytes_optimizer, "recipe field bytes_optimizer",
      preset);
  add("bytes per parameter", memory::bytes_per_parameter(recipe), "w + g + m + o",
      "mgpu::memory::bytes_per_parameter (11.1)");
  add("training state of the whole model, B", memory::training_state_bytes(o.params, recipe),
      "Psi (w + g + m + o)", "mgpu::memory::training_state_bytes (11.1)");
  add("Psi': parameters per GPU before ZeRO", p.params_per_gpu, "Psi / (tp pp)",
      "tp and pp each hold 1/degree of every parameter (mgpu::layout::per_gpu_memory, 11.7)");
  add("N_d: data-parallel degree", static_cast<double>(p.dp), "gpus / (tp pp)",
      "mgpu::layout::Layout (11.7)");
  const std::string state_src = fmt::format(
      "mgpu::layout::per_gpu_memory (11.7), as mgpu::zero::zero_state_per_gpu(Psi', recipe, {}, "
      "N_d) (11.3)",
      o.zero_stage);
  add("weights per GPU, bytes", p.memory.weights, state_formula(o.zero_stage, "w"), state_src);
  add("gradients per GPU, bytes", p.memory.grads, state_formula(o.zero_stage, "g"), state_src);
  add("master weights per GPU, bytes", p.memory.master, state_formula(o.zero_stage, "m"),
      state_src);
  add("optimizer state per GPU, bytes", p.memory.optimizer, state_formula(o.zero_stage, "o"),
      state_src);
  if (o.shape) {
    const ModelShape& s = *o.shape;
    add("activations per layer, one micro-batch, B",
        memory::activation_bytes_per_layer(transformer_shape(s), activation_options(o)),
        activation_formula(s, o.tp),
        fmt::format("mgpu::memory::activation_bytes_per_layer, recompute {}{} (11.1, Korthikanti "
                    "et al. 2022)",
                    to_string(s.recompute), s.sequence_parallel ? ", sequence parallel" : ""));
    add("layers per stage", static_cast<double>(pipeline::layers_per_stage(s.layers, o.pp)),
        "L / p", "mgpu::pipeline::layers_per_stage (11.5)");
    add("micro-batches in flight, first stage",
        static_cast<double>(pipeline::in_flight_micro_batches(pipeline::Schedule::one_f_one_b, o.pp,
                                                              o.micro_batches, 0)),
        "min(m, p) for 1F1B", "mgpu::pipeline::in_flight_micro_batches (11.5)");
    add("activations per GPU, bytes", p.memory.activations, "per layer x L/p x min(m, p)",
        "mgpu::layout::per_gpu_memory (11.7)");
  }
  if (p.dp > 1) {
    add("ring all-reduce bytes per byte of buffer",
        data_parallel::ring_all_reduce_bytes_per_rank(p.dp, 1.0), "2 (N_d - 1) / N_d",
        "mgpu::data_parallel::ring_all_reduce_bytes_per_rank (11.2)");
    if (p.dp_traffic_vs_plain)
      add("dp traffic relative to stage 0", *p.dp_traffic_vs_plain,
          o.zero_stage == 0  ? "1"
          : o.zero_stage < 3 ? "(w + g) / 2g"
                             : "(2w + g) / 2g",
          "mgpu::zero::zero_traffic_bytes_per_gpu (11.3)");
  }
  if (o.shape && o.tp > 1) {
    add("tp all-reduces per layer per micro-batch",
        static_cast<double>(tensor_parallel::all_reduces_per_block(tensor_parallel::Pass::both)) +
            (o.shape->recompute == Recompute::full
                 ? static_cast<double>(
                       tensor_parallel::all_reduces_per_block(tensor_parallel::Pass::forward))
                 : 0.0),
        o.shape->recompute == Recompute::full ? "2 forward + 2 backward + 2 recomputed forward"
                                              : "2 forward + 2 backward",
        "mgpu::tensor_parallel::all_reduces_per_block (11.4)");
    add("tp all-reduce payload A, bytes",
        tensor_parallel::all_reduce_payload_bytes(transformer_shape(*o.shape),
                                                  kActivationElementBytes),
        "s b h x 2", "mgpu::tensor_parallel::all_reduce_payload_bytes (11.4)");
  }
  if (o.shape && o.pp > 1) {
    const std::int64_t middle = o.pp > 2 ? 1 : 0;
    add("pipeline bytes sent by the busiest stage",
        pipeline::boundary_bytes_sent_per_stage(transformer_shape(*o.shape), o.pp, o.micro_batches,
                                                middle, kActivationElementBytes),
        o.pp > 2 ? "2 m A (a middle stage)" : "m A (two stages)",
        "mgpu::pipeline::boundary_bytes_sent_per_stage (11.5)");
  }
  add("pipeline bubble", p.bubble, "(p - 1) / (m + p - 1)",
      "mgpu::pipeline::gpipe_bubble_fraction (11.5)");
  add("capacity per GPU, bytes", o.gpu_memory_bytes, "--gpu-memory", "option");
}

// ------------------------------------------------------------------ time

void add_time(Plan& p) {
  const Options& o = p.options;
  if (!o.tokens) return;
  p.flops = memory::training_flops(o.params, *o.tokens);
  p.factors.push_back(
      {"training FLOPs", *p.flops, "6 Psi D", "mgpu::memory::training_flops (11.1)"});
  if (!o.gpu_flops) return;
  // Full recompute reruns every layer's forward; selective recompute's cost is small and left out.
  double extra = 0;
  if (o.shape && o.shape->recompute == Recompute::full)
    extra = checkpointing::recompute_extra_flops_fraction(o.shape->layers, o.shape->layers);
  p.recompute_extra_fraction = extra;
  p.seconds_ideal = memory::training_seconds(*p.flops, o.gpus, *o.gpu_flops, o.mfu);
  // The bubble is idle time on top of the busy time: busy = (1 - bubble) x wall.
  p.seconds = memory::training_seconds(*p.flops * (1 + extra), o.gpus, *o.gpu_flops, o.mfu) /
              (1 - p.bubble);
  p.factors.push_back({"recompute extra compute fraction", extra,
                       extra > 0 ? "(L / L) / (1 + 2): one more forward" : "0 (no full recompute)",
                       "mgpu::checkpointing::recompute_extra_flops_fraction (11.6)"});
  p.factors.push_back({"seconds, perfect scaling", *p.seconds_ideal, "6 Psi D / (G x rate x mfu)",
                       "mgpu::memory::training_seconds (11.1)"});
  p.factors.push_back({"seconds with recompute and bubble", *p.seconds,
                       "training_seconds(6 Psi D (1 + extra)) / (1 - bubble)",
                       "mgpu::memory::training_seconds (11.1), bubble from 11.5"});
}

}  // namespace

std::string format_count(double n) {
  const struct {
    double scale;
    const char* suffix;
  } units[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& u : units)
    if (n >= u.scale) return fmt::format("{:.4g}{}", n / u.scale, u.suffix);
  return fmt::format("{:.4g}", n);
}

double Plan::traffic_total() const {
  double sum = 0;
  for (const auto& t : traffic) sum += t.bytes;
  return sum;
}

MemoryBytes memory_per_gpu(const Options& o) {
  return to_memory(layout::per_gpu_memory(layout_model(o)));
}

std::optional<std::int64_t> min_gpus_that_fit(const Options& o, bool whole_nodes) {
  const std::int64_t step = o.tp * o.pp;
  const auto fits = [&](std::int64_t gpus) {
    return memory_per_gpu(with_gpus(o, gpus)).total() <= o.gpu_memory_bytes;
  };
  // Within one node any multiple of tp*pp is a valid count; beyond it, with whole_nodes, only
  // multiples of both tp*pp and the node size are.
  const std::int64_t node_step = whole_nodes ? std::lcm(step, o.gpus_per_node) : step;
  if (whole_nodes)
    for (std::int64_t g = step; g < node_step && g <= o.gpus_per_node; g += step)
      if (fits(g)) return g;
  // Memory per GPU never grows with dp (ZeRO shards over dp, nothing else depends on it), so the
  // fitting counts form a range: check the largest, then bisect for the smallest.
  std::int64_t lo = 1, hi = std::max<std::int64_t>(1, kMaxSearchGpus / node_step);
  if (!fits(hi * node_step)) return std::nullopt;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid * node_step))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo * node_step;
}

Plan make_plan(const Options& o) {
  validate(o);
  Plan p;
  p.options = o;
  p.dp = data_parallel_degree(o);
  p.params_per_gpu = o.params / static_cast<double>(o.tp * o.pp);
  const memory::PrecisionRecipe recipe = memory::precision_preset(o.precision);
  const layout::LayoutModel model = layout_model(o);
  p.memory = to_memory(layout::per_gpu_memory(model));
  p.fits = p.memory.total() <= o.gpu_memory_bytes;
  p.min_gpus = min_gpus_that_fit(o, true);
  if (p.min_gpus) p.memory_at_min = memory_per_gpu(with_gpus(o, *p.min_gpus));
  p.min_gpus_any = min_gpus_that_fit(o, false);
  if (p.min_gpus_any) p.memory_at_min_any = memory_per_gpu(with_gpus(o, *p.min_gpus_any));
  add_data_parallel_traffic(p, recipe);
  if (p.dp > 1) {
    const double plain = zero::zero_traffic_bytes_per_gpu(p.params_per_gpu, recipe, 0, p.dp);
    if (plain > 0)
      p.dp_traffic_vs_plain =
          zero::zero_traffic_bytes_per_gpu(p.params_per_gpu, recipe, o.zero_stage, p.dp) / plain;
  }
  add_model_parallel_traffic(p, model);
  p.bubble = pipeline::gpipe_bubble_fraction(o.pp, o.micro_batches);
  add_factors(p, recipe);
  add_time(p);
  return p;
}

}  // namespace mgpu::planner
