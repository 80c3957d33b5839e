// add_factors(): every multiplier behind the plan's numbers, with the formula the chapter
// function applies and the function's name, for --explain and the JSON. Each value is the
// chapter function's own answer (pending while it is a skeleton); the formulas are wording only.
#include <fmt/format.h>
#include <algorithm>
#include <utility>

#include "11_2_data_parallel/formulas.hpp"
#include "11_4_tensor_parallel/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "11_7_3d_and_experts/context_parallel.hpp"
#include "plan/model_parts.hpp"

namespace mgpu::planner::detail {

namespace {

void add(Plan& p, std::string name, Row<double> value, std::string formula, std::string source) {
  p.factors.push_back({std::move(name), std::move(value), std::move(formula), std::move(source)});
}

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

// The recipe's bytes per parameter, the whole model's state, and one GPU's state by kind.
void add_state_factors(Plan& p, const PrecisionRecipe& recipe) {
  const Options& o = p.options;
  const std::string preset = fmt::format("mgpu::precision_preset(\"{}\") (11.1)", o.precision);
  add(p, "w: weight bytes per parameter", recipe.bytes_weights, "recipe field bytes_weights",
      preset);
  add(p, "g: gradient bytes per parameter", recipe.bytes_grads, "recipe field bytes_grads", preset);
  add(p, "m: master bytes per parameter", recipe.bytes_master, "recipe field bytes_master", preset);
  add(p, "o: optimizer bytes per parameter", recipe.bytes_optimizer, "recipe field bytes_optimizer",
      preset);
  add(p, "bytes per parameter", compute_row([&] { return memory::bytes_per_parameter(recipe); }),
      "w + g + m + o", "mgpu::memory::bytes_per_parameter (11.1)");
  add(p, "training state of the whole model, B",
      compute_row([&] { return memory::training_state_bytes(o.params, recipe); }),
      "Psi (w + g + m + o)", "mgpu::memory::training_state_bytes (11.1)");
  add(p, "Psi': parameters per GPU before ZeRO", p.params_per_gpu,
      embedding_params(o) > 0 ? "((Psi - V h) x stage layers / L + V h) / tp, the largest stage"
      : !std::all_of(p.stage_layers.begin(), p.stage_layers.end(),
                     [&](std::int64_t n) { return n == p.stage_layers.front(); })
          ? "Psi x stage layers / L / tp, the largest stage"
          : "Psi / (tp pp)",
      "tp and pp each hold 1/degree of every parameter (mgpu::layout::per_gpu_memory, 11.7)");
  add(p, "N_d: data-parallel degree", static_cast<double>(p.grad_group), "gpus / (tp pp)",
      o.cp > 1 ? "dp x cp: the cp ranks of a sequence hold the same weights (11.7)"
               : "mgpu::layout::Layout (11.7)");
  using M = layout::GpuMemory;
  add(p, "weights per GPU, bytes", part(p.memory, &M::weights_bytes),
      state_formula(o.zero_stage, "w"), p.memory_source);
  add(p, "gradients per GPU, bytes", part(p.memory, &M::grads_bytes),
      state_formula(o.zero_stage, "g"), p.memory_source);
  add(p, "master weights per GPU, bytes", part(p.memory, &M::master_bytes),
      state_formula(o.zero_stage, "m"), p.memory_source);
  add(p, "optimizer state per GPU, bytes", part(p.memory, &M::optimizer_bytes),
      state_formula(o.zero_stage, "o"), p.memory_source);
}

// What the shape changes in Korthikanti's GPT, in words, for the activation formula's line.
std::string shape_changes(const ModelShape& s) {
  std::string out;
  const auto add = [&](const std::string& what) { out += (out.empty() ? "; " : ", ") + what; };
  if (s.recompute != Recompute::full) {
    if (s.kv() != s.transformer.heads) add("+ 4 (kv dh - h) / t for grouped K and V");
    if (s.ffn_size() != 4 * s.transformer.hidden || s.swiglu)
      add(fmt::format("+ ({} ffn - 16 h) / t for the FFN", s.swiglu ? 6 : 4));
    if (s.flash_attention) add("fused attention: 4 a / t of fp32 log-sum-exp instead of 5 a s / t");
  }
  return out.empty() ? out : out + ", per token";
}

// With a model shape: a layer's activations, the stage's layers and micro-batches in flight.
void add_activation_factors(Plan& p) {
  const Options& o = p.options;
  const ModelShape& s = *o.shape;
  add(p, "activations per layer, one micro-batch, B",
      compute_row([&] { return layer_activation_bytes(o) / cp_activation_share(o); }),
      activation_formula(s, o.tp) + shape_changes(s),
      fmt::format("mgpu::memory::activation_bytes_per_layer, recompute {}{} (11.1, Korthikanti "
                  "et al. 2022), with the shape's attention and FFN",
                  to_string(s.recompute), s.sequence_parallel ? ", sequence parallel" : ""));
  const std::vector<std::int64_t>& layers = p.stage_layers;
  const bool even = std::all_of(layers.begin(), layers.end(),
                                [&](std::int64_t n) { return n == layers.front(); });
  const auto busiest = static_cast<std::size_t>(p.memory_stage);
  if (even)
    add(p, "layers per stage", compute_row([&] {
          return static_cast<double>(pipeline::layers_per_stage(s.transformer.layers, o.pp));
        }),
        "L / p", "mgpu::pipeline::layers_per_stage (11.5)");
  else
    add(p, fmt::format("layers on stage {}, the busiest", busiest),
        static_cast<double>(layers.at(busiest)),
        fmt::format("first {}, last {}, (L - first - last) / (p - 2) = {} between", layers.front(),
                    layers.back(), layers.size() > 2 ? layers[1] : 0),
        "--first-stage-layers and --last-stage-layers (mgpu::planner::stage_layers)");
  add(p, fmt::format("micro-batches in flight, stage {}", busiest),
      compute_row([&] { return in_flight_micro_batches(o, p.memory_stage); }),
      o.interleave > 1 ? "chunks held / v, interleaved 1F1B" : "min(m, p - stage) for 1F1B",
      o.interleave > 1 ? "mgpu::pipeline::schedule_in_flight of interleaved_one_f_one_b_schedule "
                         "(11.5)"
                       : "mgpu::pipeline::in_flight_micro_batches (11.5)");
  add(p, "activations per GPU, bytes", part(p.memory, &layout::GpuMemory::activation_bytes),
      o.cp > 1 ? "per layer / c x layers x in flight" : "per layer x layers x in flight",
      "mgpu::layout::per_gpu_memory (11.7) for that stage");
}

// With more than one GPU reducing gradients: the ring's cost and ZeRO's against stage 0.
void add_data_parallel_factors(Plan& p) {
  const Options& o = p.options;
  add(p, "ring all-reduce bytes per byte of buffer",
      compute_row([&] { return data_parallel::ring_all_reduce_bytes_per_rank(p.grad_group, 1.0); }),
      "2 (N_d - 1) / N_d", "mgpu::data_parallel::ring_all_reduce_bytes_per_rank (11.2)");
  if (!p.dp_traffic_vs_plain.shown()) return;
  add(p, "dp traffic relative to stage 0", p.dp_traffic_vs_plain,
      o.zero_stage == 0   ? "1"
      : o.zero_stage == 1 ? "(w + g) / 2g"
      : o.zero_stage == 2 ? "(w + m g) / 2g, the reduce-scatter every micro-batch"
                          : "m (2w + g) / 2g, every collective every micro-batch",
      "mgpu::zero::zero_traffic_bytes_per_gpu (11.3)");
}

// With a shape and tp > 1: the all-reduces per layer and the bytes of each.
void add_tensor_parallel_factors(Plan& p) {
  const Options& o = p.options;
  const bool sp = o.shape->sequence_parallel;
  const bool full = o.shape->recompute == Recompute::full;
  add(p, "tp all-reduces per layer per micro-batch", compute_row([&] {
        using tensor_parallel::Pass;
        return static_cast<double>(tensor_parallel::all_reduces_per_block(Pass::both)) +
               (full ? static_cast<double>(tensor_parallel::all_reduces_per_block(Pass::forward))
                     : 0.0) +
               (sp ? 1.0 : 0.0);
      }),
      std::string(full ? "2 forward + 2 backward + 2 recomputed forward"
                       : "2 forward + 2 backward") +
          (sp ? " + 1 (the backward re-gathers its 2 saved input shards)" : ""),
      "mgpu::tensor_parallel::all_reduces_per_block (11.4)");
  add(p, "tp all-reduce payload A, bytes", compute_row([&] {
        return tensor_parallel::all_reduce_payload_bytes(layout_model(o).shape,
                                                         kActivationElementBytes);
      }),
      o.cp > 1 ? "(s/c) b h x 2: this rank's tokens" : "s b h x 2",
      "mgpu::tensor_parallel::all_reduce_payload_bytes (11.4)");
}

// With a shape and pp > 1: the bytes the busiest stage sends, and one GPU's share of them.
void add_pipeline_factors(Plan& p) {
  const Options& o = p.options;
  const std::int64_t middle = o.pp > 2 ? 1 : 0;
  add(p, "pipeline bytes sent by the busiest stage", compute_row([&] {
        return pipeline::boundary_bytes_sent_per_stage(layout_model(o).shape, o.pp, o.micro_batches,
                                                       middle, kActivationElementBytes);
      }),
      o.pp > 2 ? "2 m A (a middle stage)" : "m A (two stages)",
      "mgpu::pipeline::boundary_bytes_sent_per_stage (11.5)");
  // The stage's tp GPUs split each boundary tensor, so one GPU sends 1/tp of the stage's bytes.
  add(p, "pipeline bytes sent per GPU",
      compute_row([&] { return layout::per_gpu_traffic(layout_model(o)).pipeline_bytes; }),
      "stage bytes / tp (each tp GPU sends its slice)", "mgpu::layout::per_gpu_traffic (11.7)");
  if (o.interleave > 1)
    add(p, "pipeline sends, v chunks over one chunk",
        pipeline_sends_per_micro_batch(o.pp, o.interleave) /
            pipeline_sends_per_micro_batch(o.pp, 1),
        o.pp > 2 ? "2 v / 2" : "(2 v - 1) / 1", "mgpu::planner::pipeline_sends_per_micro_batch");
}

// With a shape and cp > 1: each rank's share of the activations and the ring's bytes.
void add_context_parallel_factors(Plan& p) {
  const Options& o = p.options;
  const TransformerShape& t = o.shape->transformer;
  const int c = static_cast<int>(o.cp);
  add(p, "cp: activations per rank / unsplit layer's",
      compute_row([&] { return cp_activation_share(o); }), "1 / c (each rank keeps s/c tokens)",
      "mgpu::context::cp_saved_activation_bytes_per_rank at c over at 1 (11.7)");
  const std::int64_t width = kv_width_per_rank(*o.shape, o.tp);
  add(p, "cp ring bytes per layer forward, fp32", compute_row([&] {
        return context::cp_forward_bytes_per_rank(t.micro_batch, t.seq, width, c,
                                                  context::Split::zigzag);
      }),
      "(c - 1) 2 (s/c) b (kv dh / t) x 4: keys and values",
      "mgpu::context::cp_forward_bytes_per_rank (11.7)");
  add(p, "cp ring bytes per layer backward, fp32", compute_row([&] {
        return context::cp_backward_bytes_per_rank(t.micro_batch, t.seq, width, c,
                                                   context::Split::zigzag);
      }),
      "(c - 1) 4 (s/c) b (kv dh / t) x 4: and their gradients",
      "mgpu::context::cp_backward_bytes_per_rank (11.7)");
  add(p, "cp ring bytes per GPU per step", compute_row([&] { return cp_ring_bytes_per_step(o); }),
      o.shape->recompute == Recompute::full
          ? "(2 fwd + bwd) x stage layers x m x 2/4"
          : "(fwd + bwd) x stage layers x m x 2/4 (bf16, not fp32)",
      fmt::format("cp group {} ({} x {} consecutive GPUs)",
                  cp_within_server(o) ? "within one server" : "across servers", o.tp, o.cp));
}

}  // namespace

void add_factors(Plan& p, const PrecisionRecipe& recipe) {
  const Options& o = p.options;
  add_state_factors(p, recipe);
  if (o.shape) add_activation_factors(p);
  if (p.grad_group > 1) add_data_parallel_factors(p);
  if (o.shape && o.tp > 1) add_tensor_parallel_factors(p);
  if (o.shape && o.pp > 1) add_pipeline_factors(p);
  if (o.shape && o.cp > 1) add_context_parallel_factors(p);
  const bool even = o.shape == std::nullopt ||
                    std::all_of(p.stage_layers.begin(), p.stage_layers.end(),
                                [&](std::int64_t n) { return n == p.stage_layers.front(); });
  add(p, "pipeline bubble", p.bubble,
      !even              ? "((sum L - max L) / v) / (m max L + (sum L - max L) / v)"
      : o.interleave > 1 ? "(p - 1) / (v m + p - 1)"
                         : "(p - 1) / (m + p - 1)",
      o.pp == 1          ? "one stage: no pipeline, no bubble"
      : !even            ? "uneven stages: the busiest waits for the others' layers"
      : o.interleave > 1 ? "mgpu::pipeline::interleaved_bubble_fraction (11.5)"
                         : "mgpu::pipeline::gpipe_bubble_fraction (11.5)");
  add(p, "capacity per GPU, bytes", o.gpu_memory_bytes, "--gpu-memory", "option");
}

}  // namespace mgpu::planner::detail
