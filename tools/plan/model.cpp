// make_plan(): the planner's numbers, each obtained from the chapter function that teaches it
// (11.1 bytes and FLOPs, 11.2/11.3 data-parallel memory and traffic, 11.5 bubble, 11.6 recompute
// cost, 11.7 memory and traffic of a layout with a model shape), so the student build shows the
// student's own numbers, and a row whose function is still a skeleton waits for it while the
// others are computed. No chapter formula is restated here; the only arithmetic is bookkeeping:
// the share Psi / (tp pp) that the ZeRO formulas are asked about, the bubble's idle time
// added to the training time, and with --cp the ring's bytes per layer (11.7's fp32 counts)
// rescaled to bf16 and multiplied by the stage's layers and micro-batches.
#include "plan/model.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <functional>
#include <numeric>

#include "11_2_data_parallel/formulas.hpp"
#include "11_3_zero/formulas.hpp"
#include "11_4_tensor_parallel/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "11_6_checkpointing/formulas.hpp"
#include "11_7_3d_and_experts/context_parallel.hpp"
#include "11_7_3d_and_experts/formulas.hpp"

namespace mgpu::planner {

namespace {

constexpr double kActivationElementBytes = 2;  // bf16 activations, as in Korthikanti et al.
constexpr double kChapterCpElementBytes = 4;   // 11.7's context-parallel formulas count fp32

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
  m.recipe = precision_preset(o.precision);
  // The cp ranks of a sequence hold the same weights, so ZeRO shards over dp x cp.
  m.layout = {o.tp, o.pp, gradient_group(o)};
  m.zero_stage = o.zero_stage;
  m.micro_batches = o.micro_batches;
  m.bytes_per_activation = kActivationElementBytes;
  if (o.shape) {
    m.shape = o.shape->transformer;
    m.activation_bytes_per_layer =
        memory::activation_bytes_per_layer(m.shape, activation_options(o));
    m.recompute = o.shape->recompute;
    if (o.cp > 1) {  // each rank keeps, and sends between tp ranks and stages, its s/cp tokens
      m.activation_bytes_per_layer *= cp_activation_share(o);
      m.shape.seq /= o.cp;
    }
  } else {
    m.shape.layers = o.pp;
    m.activation_bytes_per_layer = 0;
  }
  return m;
}

Options with_gpus(Options o, std::int64_t gpus) {
  o.gpus = gpus;
  return o;
}

layout::GpuMemory from_state(const zero::StateBytes& z) {
  layout::GpuMemory m;
  m.weights_bytes = z.weights_bytes;
  m.grads_bytes = z.grads_bytes;
  m.master_bytes = z.master_bytes;
  m.optimizer_bytes = z.optimizer_bytes;
  return m;
}

// The whole training state of `params` parameters by kind, from 11.1's training_state_bytes:
// each kind is what adding it to the recipe adds to the total, so every row runs the chapter's
// own function (a recipe without weights is invalid, so the kinds are added one at a time).
layout::GpuMemory whole_state_by_kind(double params, const PrecisionRecipe& r) {
  PrecisionRecipe upto{r.bytes_weights, 0, 0, 0};
  const double w = memory::training_state_bytes(params, upto);
  upto.bytes_grads = r.bytes_grads;
  const double wg = memory::training_state_bytes(params, upto);
  upto.bytes_master = r.bytes_master;
  const double wgm = memory::training_state_bytes(params, upto);
  upto.bytes_optimizer = r.bytes_optimizer;
  const double all = memory::training_state_bytes(params, upto);
  layout::GpuMemory m;
  m.weights_bytes = w;
  m.grads_bytes = wg - w;
  m.master_bytes = wgm - wg;
  m.optimizer_bytes = all - wgm;
  return m;
}

enum class MemoryRoute { whole_state, zero_shards, layout };

// Which chapter teaches the memory of this layout: the training state alone is 11.1's when
// nothing is sharded and 11.3's when ZeRO shards it; activations need 11.7's layout model.
MemoryRoute memory_route(const Options& o) {
  if (o.shape) return MemoryRoute::layout;
  if (o.zero_stage == 0 || gradient_group(o) == 1) return MemoryRoute::whole_state;
  return MemoryRoute::zero_shards;
}

// The first pending function among rows, empty when none is pending.
template <class... R>
std::string first_missing(const R&... rows) {
  std::string out;
  ((out.empty() && rows.is_pending() ? (void)(out = rows.missing()) : void()), ...);
  return out;
}

// A part of a computed structure as a row of its own, pending while the whole is.
template <class S>
Row<double> part(const Row<S>& whole, double S::*field) {
  if (whole.has_value()) return Row<double>((*whole).*field);
  return whole.is_pending() ? Row<double>::pending(whole.missing()) : Row<double>();
}

// ------------------------------------------------------------------ traffic

// Data-parallel traffic by collective: the plain all-reduce from 11.2 at stage 0, ZeRO's
// reduce-scatter and all-gathers from 11.3 at stages 1..3, on this GPU's share of the model.
void add_data_parallel_traffic(Plan& p, const PrecisionRecipe& recipe) {
  const Options& o = p.options;
  if (p.grad_group == 1) return;
  if (o.zero_stage == 0) {
    p.traffic.push_back(
        {"dp_all_reduce", "gradient all-reduce (plain data parallel)", "dp", compute_row([&] {
           return data_parallel::gradient_all_reduce_bytes_per_rank(p.grad_group, p.params_per_gpu,
                                                                    recipe.bytes_grads);
         })});
    return;
  }
  const Row<zero::TrafficBytes> z = compute_row([&] {
    return zero::zero_traffic_per_gpu(p.params_per_gpu, recipe, o.zero_stage, p.grad_group);
  });
  p.traffic.push_back({"zero_reduce_scatter", "ZeRO gradient reduce-scatter", "dp",
                       part(z, &zero::TrafficBytes::reduce_scatter_bytes)});
  p.traffic.push_back({"zero_all_gather_forward",
                       o.zero_stage == 3 ? "ZeRO weight all-gather before forward"
                                         : "ZeRO all-gather of updated weights",
                       "dp", part(z, &zero::TrafficBytes::all_gather_forward_bytes)});
  if (o.zero_stage == 3)
    p.traffic.push_back({"zero_all_gather_backward", "ZeRO weight all-gather before backward", "dp",
                         part(z, &zero::TrafficBytes::all_gather_backward_bytes)});
  if (z.has_value() && z->all_reduce_bytes > 0)
    p.traffic.push_back({"dp_all_reduce", "gradient all-reduce", "dp", z->all_reduce_bytes});
}

// 11.3 counts one micro-batch's ZeRO collectives. With m micro-batches, stage 2 keeps no whole
// gradient to accumulate into, so it reduce-scatters after every micro-batch's backward; stage 3
// also gathers the weights before every forward and every backward (zero_repeats). The dp rows
// and their ratio to plain data parallelism are scaled here; a pending row stays pending.
void repeat_zero_collectives(Plan& p) {
  const Options& o = p.options;
  if (o.zero_stage < 2) return;
  const double m = static_cast<double>(zero_repeats(o));
  double before = 0, after = 0;
  bool all_known = true;
  for (auto& t : p.traffic) {
    if (t.group != "dp") continue;
    if (!t.bytes.has_value()) {
      all_known = false;
      continue;
    }
    const bool repeated = t.kind == "zero_reduce_scatter" ||
                          (o.zero_stage == 3 && t.kind.rfind("zero_all_gather", 0) == 0);
    before += *t.bytes;
    if (repeated) t.bytes = *t.bytes * m;
    after += *t.bytes;
  }
  if (all_known && before > 0 && p.dp_traffic_vs_plain.has_value())
    p.dp_traffic_vs_plain = *p.dp_traffic_vs_plain * after / before;
  if (o.pp > 1)
    p.notes.push_back(fmt::format(
        "ZeRO stage {} with --pp {}: every one of the {} micro-batches repeats the stage's "
        "reduce-scatter{}, {} times the traffic of one; pipeline frameworks refuse this "
        "combination for that reason (use --zero 1 with pipelines)",
        o.zero_stage, o.pp, o.micro_batches, o.zero_stage == 3 ? " and weight all-gathers" : "",
        o.micro_batches));
}

// Tensor- and pipeline-parallel traffic of the busiest GPU, from the 11.7 layout model.
void add_model_parallel_traffic(Plan& p) {
  if (!p.options.shape || (p.options.tp == 1 && p.options.pp == 1)) return;
  const Row<layout::GpuTraffic> t =
      compute_row([&] { return layout::per_gpu_traffic(layout_model(p.options)); });
  if (p.options.tp > 1) {
    // 11.7 counts 4 all-reduces per layer (6 with full recompute). Sequence parallelism turns
    // each into a reduce-scatter plus an all-gather (the same bytes) and adds one all-reduce's
    // worth: the backward all-gathers again the input shard it saved (two all-gathers), as 11.4's
    // sequence-parallel layer does.
    Row<double> bytes = part(t, &layout::GpuTraffic::tensor_parallel_bytes);
    if (bytes.has_value() && p.options.shape->sequence_parallel) {
      const double plain = tp_all_reduces_per_layer(p.options.shape->recompute, false);
      bytes = *bytes * tp_all_reduces_per_layer(p.options.shape->recompute, true) / plain;
    }
    p.traffic.push_back({"tp_all_reduce",
                         p.options.shape->sequence_parallel
                             ? "tensor-parallel reduce-scatter + all-gather"
                             : "tensor-parallel activation all-reduces",
                         "tp", bytes});
  }
  if (p.options.pp > 1)
    p.traffic.push_back({"pp_boundary", "pipeline sends at stage boundaries", "pp",
                         part(t, &layout::GpuTraffic::pipeline_bytes)});
}

// Ring attention's keys and values (and, backward, their gradients) round the cp group.
void add_context_parallel_traffic(Plan& p) {
  if (!p.options.shape || p.options.cp == 1) return;
  p.traffic.push_back({"cp_ring", "ring-attention keys and values (+ grads)", "cp",
                       compute_row([&] { return cp_ring_bytes_per_step(p.options); })});
}

// ------------------------------------------------------------------ advice

// Divisors of n above `above`, ascending, found in O(sqrt n) (n can be 2^31).
std::vector<std::int64_t> divisors_above(std::int64_t n, std::int64_t above) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d) large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  std::vector<std::int64_t> out;
  for (std::int64_t d : small)
    if (d > above) out.push_back(d);
  return out;
}

// For a layout that does not fit, one suggestion per lever (ZeRO stage, tp, pp, recompute,
// sequence parallelism), each evaluated on the same GPU count before it is shown: the smallest
// change of that lever that fits, or, when none does, the one that comes closest. A change the
// options would refuse (a tp that does not divide the heads, say), or one that needs no less
// memory than the layout as it is, is never suggested.
// A candidate change: what it does to the options, and the flag that says so.
struct Change {
  std::function<void(Options&)> apply;
  std::string flag;
};

std::vector<Advice> evaluate_advice(const Plan& p) {
  const Options& o = p.options;
  const double now = p.memory->total_bytes();
  std::vector<Advice> out;
  std::vector<Change> chosen;  // the change behind each entry of `out`
  // The candidates are valid options that need less memory than now, evaluated.
  const auto evaluate = [&](const Options& changed) -> std::optional<Row<layout::GpuMemory>> {
    try {
      validate(changed);
    } catch (const UsageError&) {
      return std::nullopt;
    }
    return compute_row([&] { return memory_per_gpu(changed); });
  };
  // For a change that does not fit here: from how many GPUs on it would.
  const auto fits_from = [&](const Change& change) {
    Options changed = o;
    change.apply(changed);
    return compute_row([&] { return min_gpus_that_fit(changed, true); });
  };
  const auto lever = [&](const std::vector<Change>& candidates) {
    std::optional<std::pair<Advice, Change>> best;
    for (const Change& change : candidates) {
      Options changed = o;
      change.apply(changed);
      const auto memory = evaluate(changed);
      if (!memory) continue;
      Advice a;
      a.change = change.flag;
      a.memory = *memory;
      if (a.memory.is_pending()) {  // cannot be judged yet: say so, and what it waits for
        out.push_back(a);
        chosen.push_back(change);
        return;
      }
      if (a.memory->total_bytes() >= now) continue;  // no better than the layout as it is
      a.fits = fits_capacity(*a.memory, changed);
      if (a.fits || !best || a.memory->total_bytes() < best->first.memory->total_bytes())
        best = {a, change};
      if (a.fits) break;
    }
    if (best) {
      if (!best->first.fits) best->first.fits_from = fits_from(best->second);
      out.push_back(best->first);
      chosen.push_back(best->second);
    }
  };

  std::vector<Change> zero;
  if (p.grad_group > 1)
    for (int s = o.zero_stage + 1; s <= 3; ++s)
      zero.push_back({[s](Options& c) { c.zero_stage = s; }, fmt::format("--zero {}", s)});
  lever(zero);

  std::vector<Change> tp;
  for (std::int64_t t : divisors_above(o.gpus_per_node, o.tp))
    if (o.gpus % (t * o.cp * o.pp) == 0)
      tp.push_back({[t](Options& c) { c.tp = t; }, fmt::format("--tp {}", t)});
  lever(tp);

  std::vector<Change> pp;
  for (std::int64_t q : divisors_above(o.gpus / (o.tp * o.cp), o.pp))
    pp.push_back({[q](Options& c) { c.pp = q; }, fmt::format("--pp {}", q)});
  lever(pp);

  if (o.shape) {
    std::vector<Change> recompute;
    for (Recompute r : {Recompute::selective, Recompute::full})
      if (static_cast<int>(r) > static_cast<int>(o.shape->recompute))
        recompute.push_back({[r](Options& c) { c.shape->recompute = r; },
                             fmt::format("--recompute {}", to_string(r))});
    lever(recompute);
    if (o.tp > 1 && !o.shape->sequence_parallel)
      lever({{[](Options& c) { c.shape->sequence_parallel = true; }, "--sequence-parallel"}});
  }

  // No single change fits: the changes above together, each kept only when the options still
  // make sense with it and it lowers the memory further, evaluated like the others.
  const bool any_fits_or_pending = std::any_of(
      out.begin(), out.end(), [](const Advice& a) { return a.fits || a.memory.is_pending(); });
  if (out.size() > 1 && !any_fits_or_pending) {
    Options together = o;
    double lowest = now;
    Advice combined;
    int used = 0;
    for (const Change& change : chosen) {
      Options next = together;
      change.apply(next);
      const auto memory = evaluate(next);
      if (!memory || !memory->has_value() || (*memory)->total_bytes() >= lowest) continue;
      together = next;
      lowest = (*memory)->total_bytes();
      combined.change += (used++ ? " " : "") + change.flag;
      combined.memory = *memory;
      combined.fits = fits_capacity(**memory, together);
    }
    if (used > 1) {
      if (!combined.fits)
        combined.fits_from = compute_row([&] { return min_gpus_that_fit(together, true); });
      out.push_back(combined);
    }
  }
  return out;
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

void add_factors(Plan& p, const PrecisionRecipe& recipe) {
  const Options& o = p.options;
  const auto add = [&](std::string name, Row<double> value, std::string formula,
                       std::string source) {
    p.factors.push_back({std::move(name), std::move(value), std::move(formula), std::move(source)});
  };
  const auto memory_part = [&](double layout::GpuMemory::*field) { return part(p.memory, field); };
  const std::string preset = fmt::format("mgpu::precision_preset(\"{}\") (11.1)", o.precision);
  add("w: weight bytes per parameter", recipe.bytes_weights, "recipe field bytes_weights", preset);
  add("g: gradient bytes per parameter", recipe.bytes_grads, "recipe field bytes_grads", preset);
  add("m: master bytes per parameter", recipe.bytes_master, "recipe field bytes_master", preset);
  add("o: optimizer bytes per parameter", recipe.bytes_optimizer, "recipe field bytes_optimizer",
      preset);
  add("bytes per parameter", compute_row([&] { return memory::bytes_per_parameter(recipe); }),
      "w + g + m + o", "mgpu::memory::bytes_per_parameter (11.1)");
  add("training state of the whole model, B",
      compute_row([&] { return memory::training_state_bytes(o.params, recipe); }),
      "Psi (w + g + m + o)", "mgpu::memory::training_state_bytes (11.1)");
  add("Psi': parameters per GPU before ZeRO", p.params_per_gpu, "Psi / (tp pp)",
      "tp and pp each hold 1/degree of every parameter (mgpu::layout::per_gpu_memory, 11.7)");
  add("N_d: data-parallel degree", static_cast<double>(p.grad_group), "gpus / (tp pp)",
      o.cp > 1 ? "dp x cp: the cp ranks of a sequence hold the same weights (11.7)"
               : "mgpu::layout::Layout (11.7)");
  add("weights per GPU, bytes", memory_part(&layout::GpuMemory::weights_bytes),
      state_formula(o.zero_stage, "w"), p.memory_source);
  add("gradients per GPU, bytes", memory_part(&layout::GpuMemory::grads_bytes),
      state_formula(o.zero_stage, "g"), p.memory_source);
  add("master weights per GPU, bytes", memory_part(&layout::GpuMemory::master_bytes),
      state_formula(o.zero_stage, "m"), p.memory_source);
  add("optimizer state per GPU, bytes", memory_part(&layout::GpuMemory::optimizer_bytes),
      state_formula(o.zero_stage, "o"), p.memory_source);
  if (o.shape) {
    const ModelShape& s = *o.shape;
    add("activations per layer, one micro-batch, B", compute_row([&] {
          return memory::activation_bytes_per_layer(s.transformer, activation_options(o));
        }),
        activation_formula(s, o.tp),
        fmt::format("mgpu::memory::activation_bytes_per_layer, recompute {}{} (11.1, Korthikanti "
                    "et al. 2022)",
                    to_string(s.recompute), s.sequence_parallel ? ", sequence parallel" : ""));
    add("layers per stage", compute_row([&] {
          return static_cast<double>(pipeline::layers_per_stage(s.transformer.layers, o.pp));
        }),
        "L / p", "mgpu::pipeline::layers_per_stage (11.5)");
    add("micro-batches in flight, first stage", compute_row([&] {
          return static_cast<double>(pipeline::in_flight_micro_batches(
              pipeline::Schedule::one_f_one_b, o.pp, o.micro_batches, 0));
        }),
        "min(m, p) for 1F1B", "mgpu::pipeline::in_flight_micro_batches (11.5)");
    add("activations per GPU, bytes", memory_part(&layout::GpuMemory::activation_bytes),
        o.cp > 1 ? "per layer / c x L/p x min(m, p)" : "per layer x L/p x min(m, p)",
        "mgpu::layout::per_gpu_memory (11.7)");
  }
  if (p.grad_group > 1) {
    add("ring all-reduce bytes per byte of buffer", compute_row([&] {
          return data_parallel::ring_all_reduce_bytes_per_rank(p.grad_group, 1.0);
        }),
        "2 (N_d - 1) / N_d", "mgpu::data_parallel::ring_all_reduce_bytes_per_rank (11.2)");
    if (p.dp_traffic_vs_plain.shown())
      add("dp traffic relative to stage 0", p.dp_traffic_vs_plain,
          o.zero_stage == 0   ? "1"
          : o.zero_stage == 1 ? "(w + g) / 2g"
          : o.zero_stage == 2 ? "(w + m g) / 2g, the reduce-scatter every micro-batch"
                              : "m (2w + g) / 2g, every collective every micro-batch",
          "mgpu::zero::zero_traffic_bytes_per_gpu (11.3)");
  }
  if (o.shape && o.tp > 1) {
    const bool sp = o.shape->sequence_parallel;
    add("tp all-reduces per layer per micro-batch", compute_row([&] {
          using tensor_parallel::Pass;
          return static_cast<double>(tensor_parallel::all_reduces_per_block(Pass::both)) +
                 (o.shape->recompute == Recompute::full
                      ? static_cast<double>(tensor_parallel::all_reduces_per_block(Pass::forward))
                      : 0.0) +
                 (sp ? 1.0 : 0.0);
        }),
        std::string(o.shape->recompute == Recompute::full
                        ? "2 forward + 2 backward + 2 recomputed forward"
                        : "2 forward + 2 backward") +
            (sp ? " + 1 (the backward re-gathers its 2 saved input shards)" : ""),
        "mgpu::tensor_parallel::all_reduces_per_block (11.4)");
    add("tp all-reduce payload A, bytes", compute_row([&] {
          return tensor_parallel::all_reduce_payload_bytes(layout_model(o).shape,
                                                           kActivationElementBytes);
        }),
        o.cp > 1 ? "(s/c) b h x 2: this rank's tokens" : "s b h x 2",
        "mgpu::tensor_parallel::all_reduce_payload_bytes (11.4)");
  }
  if (o.shape && o.pp > 1) {
    const std::int64_t middle = o.pp > 2 ? 1 : 0;
    add("pipeline bytes sent by the busiest stage", compute_row([&] {
          return pipeline::boundary_bytes_sent_per_stage(
              layout_model(o).shape, o.pp, o.micro_batches, middle, kActivationElementBytes);
        }),
        o.pp > 2 ? "2 m A (a middle stage)" : "m A (two stages)",
        "mgpu::pipeline::boundary_bytes_sent_per_stage (11.5)");
    // The stage's tp GPUs split each boundary tensor, so one GPU sends 1/tp of the stage's bytes.
    add("pipeline bytes sent per GPU",
        compute_row([&] { return layout::per_gpu_traffic(layout_model(o)).pipeline_bytes; }),
        "stage bytes / tp (each tp GPU sends its slice)", "mgpu::layout::per_gpu_traffic (11.7)");
  }
  if (o.shape && o.cp > 1) {
    const TransformerShape& t = o.shape->transformer;
    add("cp: activations per rank / unsplit layer's",
        compute_row([&] { return cp_activation_share(o); }), "1 / c (each rank keeps s/c tokens)",
        "mgpu::context::cp_saved_activation_bytes_per_rank at c over at 1 (11.7)");
    add("cp ring bytes per layer forward, fp32", compute_row([&] {
          return context::cp_forward_bytes_per_rank(t.micro_batch, t.seq, t.hidden / o.tp,
                                                    static_cast<int>(o.cp), context::Split::zigzag);
        }),
        "(c - 1) 2 (s/c) b (h/t) x 4", "mgpu::context::cp_forward_bytes_per_rank (11.7)");
    add("cp ring bytes per layer backward, fp32", compute_row([&] {
          return context::cp_backward_bytes_per_rank(t.micro_batch, t.seq, t.hidden / o.tp,
                                                     static_cast<int>(o.cp),
                                                     context::Split::zigzag);
        }),
        "(c - 1) 4 (s/c) b (h/t) x 4", "mgpu::context::cp_backward_bytes_per_rank (11.7)");
    add("cp ring bytes per GPU per step", compute_row([&] { return cp_ring_bytes_per_step(o); }),
        o.shape->recompute == Recompute::full ? "(2 fwd + bwd) x L/p x m x 2/4"
                                              : "(fwd + bwd) x L/p x m x 2/4 (bf16, not fp32)",
        fmt::format("cp group {} ({} x {} consecutive GPUs)",
                    cp_within_server(o) ? "within one server" : "across servers", o.tp, o.cp));
  }
  add("pipeline bubble", p.bubble, "(p - 1) / (m + p - 1)",
      o.pp == 1 ? "one stage: no pipeline, no bubble"
                : "mgpu::pipeline::gpipe_bubble_fraction (11.5)");
  add("capacity per GPU, bytes", o.gpu_memory_bytes, "--gpu-memory", "option");
}

// ------------------------------------------------------------------ time

void add_time(Plan& p) {
  const Options& o = p.options;
  if (!o.tokens) return;
  p.flops = compute_row([&] { return memory::training_flops(o.params, *o.tokens); });
  p.factors.push_back(
      {"training FLOPs", p.flops, "6 Psi D", "mgpu::memory::training_flops (11.1)"});
  if (!o.gpu_flops) return;
  // Full recompute reruns every layer's forward; selective recompute reruns the attention core.
  Row<double> extra = 0.0;
  if (o.shape && o.shape->recompute == Recompute::full)
    extra = compute_row([&] {
      return checkpointing::recompute_extra_flops_fraction(o.shape->transformer.layers,
                                                           o.shape->transformer.layers);
    });
  if (o.shape && o.shape->recompute == Recompute::selective)
    extra = selective_recompute_extra_fraction(o.shape->transformer);
  if (extra.has_value()) p.recompute_extra_fraction = *extra;
  p.seconds_ideal = p.flops.has_value() ? compute_row([&] {
    return memory::training_seconds(*p.flops, o.gpus, *o.gpu_flops, o.mfu);
  })
                                        : Row<double>::pending(p.flops.missing());
  // The bubble is idle time on top of the busy time: busy = (1 - bubble) x wall.
  const std::string waits = first_missing(p.flops, extra, p.bubble);
  p.seconds = !waits.empty() ? Row<double>::pending(waits) : compute_row([&] {
    return memory::training_seconds(*p.flops * (1 + *extra), o.gpus, *o.gpu_flops, o.mfu) /
           (1 - *p.bubble);
  });
  p.factors.push_back({"recompute extra compute fraction", extra,
                       !o.shape || o.shape->recompute == Recompute::none ? "0 (no recompute)"
                       : o.shape->recompute == Recompute::full
                           ? "(L / L) / (1 + 2): one more forward"
                           : "4 s / (3 (24 h + 4 s)): the attention core's forward again",
                       "mgpu::checkpointing::recompute_extra_flops_fraction (11.6)"});
  p.factors.push_back({"seconds, perfect scaling", p.seconds_ideal, "6 Psi D / (G x rate x mfu)",
                       "mgpu::memory::training_seconds (11.1)"});
  p.factors.push_back({"seconds with recompute and bubble", p.seconds,
                       "training_seconds(6 Psi D (1 + extra)) / (1 - bubble)",
                       "mgpu::memory::training_seconds (11.1), bubble from 11.5"});
}

}  // namespace

double tp_all_reduces_per_layer(Recompute recompute, bool sequence_parallel) {
  return (recompute == Recompute::full ? 6.0 : 4.0) + (sequence_parallel ? 1.0 : 0.0);
}

std::int64_t zero_repeats(const Options& o) { return o.zero_stage >= 2 ? o.micro_batches : 1; }

double selective_recompute_extra_fraction(const TransformerShape& s) {
  // A layer's forward is 24 b s h^2 (the GEMMs) + 4 b s^2 h (the attention core) FLOPs and a
  // step costs three forwards; selective recompute runs the attention core's 4 b s^2 h again.
  const double h = static_cast<double>(s.hidden), seq = static_cast<double>(s.seq);
  return 4 * seq / (3 * (24 * h + 4 * seq));
}

std::string format_count(double n) {
  const struct {
    double scale;
    const char* suffix;
  } units[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& u : units)
    if (n >= u.scale) return fmt::format("{:.4g}{}", n / u.scale, u.suffix);
  return fmt::format("{:.4g}", n);
}

std::string missing_function(const mgpu::NotImplemented& e) {
  const std::string what = e.what();
  const std::string prefix = "not implemented: ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

Row<double> Plan::traffic_total() const {
  double sum = 0;
  for (const auto& t : traffic) {
    if (t.bytes.is_pending()) return Row<double>::pending(t.bytes.missing());
    sum += *t.bytes;
  }
  return sum;
}

std::vector<std::string> Plan::pending_functions(bool with_factors) const {
  std::vector<std::string> out;
  const auto note = [&](const std::string& f) {
    if (!f.empty() && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  };
  note(memory.missing());
  if (memory.has_value()) {  // the verdict's lines exist only once the memory does
    note(min_gpus.missing());
    if (!*fits && min_gpus.has_value() && min_gpus->gpus) note(min_gpus_any.missing());
    for (const auto& a : advice) {
      note(a.memory.missing());
      note(a.fits_from.missing());
    }
  }
  for (const auto& t : traffic) note(t.bytes.missing());
  if (options.zero_stage > 0) note(dp_traffic_vs_plain.missing());
  note(bubble.missing());
  note(flops.missing());
  note(seconds_ideal.missing());
  note(seconds.missing());
  if (with_factors)
    for (const auto& f : factors) note(f.value.missing());
  return out;
}

double cp_activation_share(const Options& o) {
  if (o.cp == 1 || !o.shape) return 1.0;
  const TransformerShape& t = o.shape->transformer;
  const auto saved = [&](std::int64_t ranks) {
    return context::cp_saved_activation_bytes_per_rank(
        t.micro_batch, t.seq, t.hidden / o.tp, t.heads / o.tp, static_cast<int>(ranks),
        ranks == 1 ? context::Split::contiguous : context::Split::zigzag);
  };
  return saved(o.cp) / saved(1);
}

double cp_ring_bytes_per_step(const Options& o) {
  if (o.cp == 1 || !o.shape) return 0.0;
  const TransformerShape& t = o.shape->transformer;
  const int c = static_cast<int>(o.cp);
  const std::int64_t width = t.hidden / o.tp;  // this tp rank's heads
  const double forward =
      context::cp_forward_bytes_per_rank(t.micro_batch, t.seq, width, c, context::Split::zigzag);
  const double backward =
      context::cp_backward_bytes_per_rank(t.micro_batch, t.seq, width, c, context::Split::zigzag);
  const double forwards = o.shape->recompute == Recompute::full ? 2.0 : 1.0;
  const double per_layer = forwards * forward + backward;
  const double layers = static_cast<double>(pipeline::layers_per_stage(t.layers, o.pp));
  return per_layer * layers * static_cast<double>(o.micro_batches) *
         (kActivationElementBytes / kChapterCpElementBytes);
}

layout::GpuMemory memory_per_gpu(const Options& o) {
  const PrecisionRecipe recipe = precision_preset(o.precision);
  const double share = o.params / static_cast<double>(o.tp * o.pp);
  switch (memory_route(o)) {
    case MemoryRoute::whole_state:
      return whole_state_by_kind(share, recipe);
    case MemoryRoute::zero_shards:
      return from_state(zero::zero_state_per_gpu(share, recipe, o.zero_stage, gradient_group(o)));
    case MemoryRoute::layout:
      break;
  }
  return layout::per_gpu_memory(layout_model(o));
}

std::string memory_source(const Options& o) {
  switch (memory_route(o)) {
    case MemoryRoute::whole_state:
      return "nothing sharded: mgpu::memory::training_state_bytes(Psi', recipe) by kind (11.1)";
    case MemoryRoute::zero_shards:
      return fmt::format("mgpu::zero::zero_state_per_gpu(Psi', recipe, {}, N_d) (11.3)",
                         o.zero_stage);
    case MemoryRoute::layout:
      break;
  }
  return fmt::format(
      "mgpu::layout::per_gpu_memory (11.7), as mgpu::zero::zero_state_per_gpu(Psi', recipe, {}, "
      "N_d) (11.3) plus activations",
      o.zero_stage);
}

std::optional<std::int64_t> min_gpus_that_fit(const Options& o, bool whole_nodes) {
  const std::int64_t step = o.tp * o.cp * o.pp;
  const auto fits = [&](std::int64_t gpus) {
    const Options at = with_gpus(o, gpus);
    return fits_capacity(memory_per_gpu(at), at);
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
  p.grad_group = gradient_group(o);
  p.params_per_gpu = o.params / static_cast<double>(o.tp * o.pp);
  const PrecisionRecipe recipe = precision_preset(o.precision);
  p.memory = compute_row([&] { return memory_per_gpu(o); });
  p.memory_source = memory_source(o);
  if (p.memory.has_value())
    p.fits = fits_capacity(*p.memory, o);
  else
    p.fits = Row<bool>::pending(p.memory.missing());
  const auto fewest = [&](bool whole_nodes) {
    return compute_row([&] {
      FewestGpus f;
      f.gpus = min_gpus_that_fit(o, whole_nodes);
      if (f.gpus) f.memory = memory_per_gpu(with_gpus(o, *f.gpus));
      return f;
    });
  };
  p.min_gpus = fewest(true);
  p.min_gpus_any = fewest(false);
  if (p.fits.has_value() && !*p.fits) p.advice = evaluate_advice(p);
  add_data_parallel_traffic(p, recipe);
  if (p.grad_group > 1)
    p.dp_traffic_vs_plain = compute_row([&] {
      const double plain =
          zero::zero_traffic_bytes_per_gpu(p.params_per_gpu, recipe, 0, p.grad_group);
      return zero::zero_traffic_bytes_per_gpu(p.params_per_gpu, recipe, o.zero_stage,
                                              p.grad_group) /
             plain;
    });
  repeat_zero_collectives(p);
  add_model_parallel_traffic(p);
  add_context_parallel_traffic(p);
  // One stage is no pipeline: nothing waits, so there is no bubble to ask 11.5 about.
  p.bubble = o.pp == 1 ? Row<double>(0.0) : compute_row([&] {
    return pipeline::gpipe_bubble_fraction(o.pp, o.micro_batches);
  });
  add_factors(p, recipe);
  add_time(p);
  return p;
}

}  // namespace mgpu::planner
