// Checks on the planner's options. Each message names the flag, the value and a way out,
// because a layout that is wrong by one factor is the most common mistake with 3D parallelism.
#include "plan/options.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <vector>

namespace mgpu::planner {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& text) {
  if (text == "none") return Recompute::none;
  if (text == "selective") return Recompute::selective;
  if (text == "full") return Recompute::full;
  throw UsageError(fmt::format(
      "--recompute '{}' is not a policy: use --recompute none, selective or full", text));
}

namespace {

void require_positive(const char* flag, double v, const char* example) {
  if (!std::isfinite(v) || v <= 0)
    throw UsageError(
        fmt::format("{} {}: must be a positive number, e.g. {} {}", flag, v, flag, example));
}

void require_count(const char* flag, std::int64_t v, const char* example) {
  if (v < 1)
    throw UsageError(fmt::format("{} {}: must be at least 1, e.g. {} {}", flag, v, flag, example));
}

// The divisors of n up to n, as "1, 2, 4 or 8", to suggest a degree that divides.
// Only the first few are listed; a long list would not help anyone choose.
std::string divisors_of(std::int64_t n) {
  std::vector<std::int64_t> ds;
  for (std::int64_t d = 1; d <= n && d <= 4096 && ds.size() < 8; ++d)
    if (n % d == 0) ds.push_back(d);
  std::string out;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    if (i > 0) out += (i + 1 == ds.size()) ? " or " : ", ";
    out += std::to_string(ds[i]);
  }
  return out;
}

// End stages for `layers` on `pp` stages that leave the stages between an equal whole share, no
// smaller than theirs: the same count on both ends when one works (126 on 16: 7 and 7, the rest
// 8 each), else on the first alone; as flags, or empty when no such split exists.
std::string end_stage_split(std::int64_t layers, std::int64_t pp) {
  if (pp < 2 || layers < pp) return "";
  if (pp == 2) return fmt::format("--first-stage-layers {}", layers / 2);
  for (std::int64_t f = (layers - 1) / pp; f >= 1; --f) {
    const std::int64_t rest = layers - 2 * f;
    if (rest % (pp - 2) == 0 && rest / (pp - 2) >= f)
      return fmt::format("--first-stage-layers {} --last-stage-layers {}", f, f);
  }
  for (std::int64_t f = (layers - 1) / pp; f >= 1; --f) {
    const std::int64_t rest = layers - f;
    if (rest % (pp - 1) == 0 && rest / (pp - 1) >= f)
      return fmt::format("--first-stage-layers {}", f);
  }
  return "";
}

void validate_shape(const Options& o, const ModelShape& m) {
  const TransformerShape& s = m.transformer;
  require_count("--layers", s.layers, "80");
  require_count("--hidden", s.hidden, "8192");
  require_count("--heads", s.heads, "64");
  require_count("--seq", s.seq, "4096");
  require_count("--micro-batch", s.micro_batch, "1");
  // The planner looks at every stage, and pp <= layers; a bound keeps that cheap.
  if (s.layers > kMaxLayers)
    throw UsageError(
        fmt::format("--layers {}: more than {} layers is no model anyone trains; use "
                    "a realistic depth, e.g. --layers 80",
                    s.layers, kMaxLayers));
  if (m.kv_heads < 0 || m.ffn < 0 || m.first_stage_layers < 0 || m.last_stage_layers < 0 ||
      m.vocab < 0)
    throw UsageError(
        "--kv-heads, --ffn, --first-stage-layers, --last-stage-layers and --vocab are counts: "
        "give a positive one or leave the flag out");
  (void)stage_layers(s.layers, o.pp, m.first_stage_layers, m.last_stage_layers);
  if (s.heads % o.tp != 0)
    throw UsageError(fmt::format(
        "--heads {} is not divisible by --tp {}: attention splits by whole heads; use --tp {}",
        s.heads, o.tp, divisors_of(s.heads)));
  if (s.hidden % s.heads != 0)
    throw UsageError(
        fmt::format("--hidden {} is not divisible by --heads {}: each head has hidden/heads "
                    "dimensions; use --heads {}",
                    s.hidden, s.heads, divisors_of(s.hidden)));
  // Grouped-query attention: each key/value head serves heads/kv query heads, and tensor
  // parallelism gives every rank whole key/value heads (Megatron-LM's query groups).
  if (s.heads % m.kv() != 0)
    throw UsageError(fmt::format(
        "--kv-heads {} does not divide --heads {}: each key/value head serves a whole group of "
        "query heads; use --kv-heads {}",
        m.kv(), s.heads, divisors_of(s.heads)));
  if (m.kv() % o.tp != 0)
    throw UsageError(fmt::format(
        "--kv-heads {} is not divisible by --tp {}: every tensor-parallel rank holds whole "
        "key/value heads; use --tp {}",
        m.kv(), o.tp, divisors_of(m.kv())));
  if (m.ffn_size() % o.tp != 0)
    throw UsageError(fmt::format(
        "--ffn {} is not divisible by --tp {}: the FFN's first matrix splits by columns over tp; "
        "use --ffn {} or another multiple of tp",
        m.ffn_size(), o.tp, (m.ffn_size() / o.tp + 1) * o.tp));
  if (m.vocab > 0 && o.params <= static_cast<double>(m.vocab * s.hidden))
    throw UsageError(fmt::format(
        "--params {:.4g} is no more than the embedding alone, --vocab {} x --hidden {} = {:.4g}: "
        "give the whole model's parameters",
        o.params, m.vocab, s.hidden, static_cast<double>(m.vocab * s.hidden)));
  // Ring attention's zig-zag split cuts every sequence into 2 cp equal chunks.
  if (o.cp > 1 && s.seq % (2 * o.cp) != 0)
    throw UsageError(fmt::format(
        "--seq {} is not divisible by 2 x --cp = {}: the zig-zag split gives each of the cp "
        "ranks two of 2 cp equal chunks; use a --seq that 2 cp divides or --cp {}",
        s.seq, 2 * o.cp, divisors_of(s.seq / 2)));
}

}  // namespace

void validate(const Options& o) {
  if (!std::isfinite(o.params) || o.params < 1)
    throw UsageError(
        fmt::format("--params {}: must be at least 1 parameter, e.g. --params 70e9", o.params));
  require_count("--gpus", o.gpus, "64");
  require_positive("--gpu-memory", o.gpu_memory_bytes, "80e9");
  try {
    (void)mgpu::precision_preset(o.precision);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--precision: {}", e.what()));
  }
  if (o.zero_stage < 0 || o.zero_stage > 3)
    throw UsageError(fmt::format(
        "--zero {}: ZeRO has stages 0 (none) to 3; use --zero 0, 1, 2 or 3", o.zero_stage));
  require_count("--tp", o.tp, "8");
  require_count("--pp", o.pp, "4");
  require_count("--cp", o.cp, "2");
  require_count("--micro-batches", o.micro_batches, "8");
  require_count("--interleave", o.interleave, "2");
  require_count("--gpus-per-node", o.gpus_per_node, "8");
  // Overflow guard before multiplying the degrees.
  if (o.gpus > kMaxGpus || o.tp > kMaxGpus || o.pp > kMaxGpus || o.cp > kMaxGpus)
    throw UsageError(fmt::format(
        "--gpus/--tp/--pp/--cp larger than {}: use a realistic cluster size", kMaxGpus));
  if (o.gpus_per_node % o.tp != 0)
    throw UsageError(
        fmt::format("--tp {} does not divide --gpus-per-node {}: tensor parallelism stays inside "
                    "one node's fast "
                    "links; use --tp {}",
                    o.tp, o.gpus_per_node, divisors_of(o.gpus_per_node)));
  const std::int64_t model_parallel = o.tp * o.pp;
  if (o.gpus % model_parallel != 0) {
    const std::int64_t down = o.gpus / model_parallel * model_parallel;
    const std::int64_t up = down + model_parallel;
    throw UsageError(fmt::format(
        "--gpus {} is not a multiple of tp*pp = {}*{} = {}: dp = gpus/(tp*pp) must be whole; use "
        "--gpus {}{}, or change --tp/--pp",
        o.gpus, o.tp, o.pp, model_parallel, down > 0 ? fmt::format("{} or ", down) : "", up));
  }
  if (o.cp > 1 && o.gpus % (model_parallel * o.cp) != 0) {
    const std::int64_t ways = model_parallel * o.cp;
    const std::int64_t down = o.gpus / ways * ways;
    throw UsageError(fmt::format(
        "--gpus {} is not a multiple of tp*cp*pp = {}*{}*{} = {}: dp = gpus/(tp*cp*pp) must be "
        "whole; use --gpus {}{}, or change --cp (one that divides {})",
        o.gpus, o.tp, o.cp, o.pp, ways, down > 0 ? fmt::format("{} or ", down) : "", down + ways,
        o.gpus / model_parallel));
  }
  if (o.interleave > 1 && o.pp == 1)
    throw UsageError(fmt::format(
        "--interleave {} needs a pipeline: model chunks per stage mean nothing with --pp 1; add "
        "--pp, or drop --interleave",
        o.interleave));
  // Megatron-LM's interleaved schedule takes the micro-batches through the chunks in groups of
  // pp (11.5's interleaved_one_f_one_b_schedule has the same requirement).
  if (o.interleave > 1 && o.micro_batches % o.pp != 0)
    throw UsageError(fmt::format(
        "--micro-batches {} is not a multiple of --pp {}: the interleaved schedule runs the "
        "micro-batches through the chunks in groups of pp; use --micro-batches {} or {}",
        o.micro_batches, o.pp, std::max<std::int64_t>(o.pp, o.micro_batches / o.pp * o.pp),
        (o.micro_batches / o.pp + 1) * o.pp));
  // The planner builds the interleaved schedule to count what each stage holds (11.5).
  if (o.interleave > 1 && (o.pp > 4096 || o.micro_batches > (1 << 20) / o.interleave))
    throw UsageError(fmt::format(
        "--interleave {} with --pp {} and --micro-batches {}: more than the planner schedules "
        "(pp up to 4096, m x v up to {}); use fewer micro-batches or chunks",
        o.interleave, o.pp, o.micro_batches, 1 << 20));
  if (o.shape) validate_shape(o, *o.shape);
  if (o.tokens) require_positive("--tokens", *o.tokens, "15e12");
  if (o.gpu_flops) require_positive("--gpu-flops", *o.gpu_flops, "4e14");
  if (!std::isfinite(o.mfu) || o.mfu <= 0 || o.mfu > 1)
    throw UsageError(fmt::format(
        "--mfu {}: the achieved fraction of --gpu-flops is in (0, 1], e.g. --mfu 0.4", o.mfu));
}

std::int64_t data_parallel_degree(const Options& o) { return o.gpus / (o.tp * o.cp * o.pp); }

std::int64_t gradient_group(const Options& o) { return o.gpus / (o.tp * o.pp); }

bool cp_within_server(const Options& o) { return o.gpus_per_node % (o.tp * o.cp) == 0; }

std::vector<std::int64_t> stage_layers(std::int64_t layers, std::int64_t pp, std::int64_t first,
                                       std::int64_t last) {
  if (first == 0 && last == 0) {
    if (layers % pp == 0 && layers >= pp)
      return std::vector<std::int64_t>(static_cast<std::size_t>(pp), layers / pp);
    const std::string ends = end_stage_split(layers, pp);
    throw UsageError(fmt::format(
        "--layers {} does not split into --pp {} equal stages: each stage holds layers/pp whole "
        "layers; use --pp {}{}",
        layers, pp, divisors_of(layers),
        ends.empty() ? "" : ", or give the end stages fewer layers: " + ends));
  }
  if (pp == 1)
    throw UsageError(
        "--first-stage-layers and --last-stage-layers shape a pipeline: add --pp 2 or more, or "
        "drop them");
  // The stages whose count is not given share what the given ones leave.
  const std::int64_t others = pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const std::int64_t rest = layers - first - last;
  const bool splits = rest >= others && (others == 0 ? rest == 0 : rest % others == 0);
  if (!splits) {
    const std::string ends = end_stage_split(layers, pp);
    throw UsageError(fmt::format(
        "--layers {} less {}{}{} leaves {} for the other {} stage{}, {}: every stage holds a "
        "whole number of layers, at least one; {}",
        layers, first > 0 ? fmt::format("--first-stage-layers {}", first) : "",
        first > 0 && last > 0 ? " and " : "",
        last > 0 ? fmt::format("--last-stage-layers {}", last) : "", rest, others,
        others == 1 ? "" : "s", others == 0 ? "which no stage holds" : "not an even split",
        ends.empty() ? "change --pp" : "use " + ends));
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(pp), others > 0 ? rest / others : 0);
  if (first > 0) out.front() = first;
  if (last > 0) out.back() = last;
  return out;
}

std::vector<std::int64_t> stage_layers(const Options& o) {
  if (!o.shape) return {};
  return stage_layers(o.shape->transformer.layers, o.pp, o.shape->first_stage_layers,
                      o.shape->last_stage_layers);
}

std::vector<double> stage_params_per_gpu(double params, const std::vector<std::int64_t>& layers,
                                         double embedding, std::int64_t tp) {
  double total_layers = 0;
  for (std::int64_t n : layers) total_layers += static_cast<double>(n);
  const std::size_t p = layers.size();
  std::vector<double> out(p, 0.0);
  for (std::size_t i = 0; i < p; ++i) {
    // Without a shape the stages count no layers: each holds an equal share.
    const double share = total_layers > 0 ? static_cast<double>(layers[i]) / total_layers
                                          : 1.0 / static_cast<double>(p);
    const bool ends = i == 0 || i + 1 == p;
    out[i] = ((params - embedding) * share + (ends ? embedding : 0.0)) / static_cast<double>(tp);
  }
  return out;
}

double pipeline_sends_per_micro_batch(std::int64_t pp, std::int64_t interleave) {
  const double v = static_cast<double>(interleave);
  return pp == 1 ? 0.0 : pp == 2 ? 2 * v - 1 : 2 * v;
}

}  // namespace mgpu::planner
