// Checks on the planner's options. Each message names the flag, the value and a way out,
// because a layout that is wrong by one factor is the most common mistake with 3D parallelism.
#include "plan/options.hpp"

#include <fmt/format.h>
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

void validate_shape(const Options& o, const ModelShape& m) {
  const TransformerShape& s = m.transformer;
  require_count("--layers", s.layers, "80");
  require_count("--hidden", s.hidden, "8192");
  require_count("--heads", s.heads, "64");
  require_count("--seq", s.seq, "4096");
  require_count("--micro-batch", s.micro_batch, "1");
  if (s.layers % o.pp != 0)
    throw UsageError(fmt::format(
        "--layers {} is not divisible by --pp {}: each stage holds layers/pp whole layers; "
        "use --pp {}",
        s.layers, o.pp, divisors_of(s.layers)));
  if (s.heads % o.tp != 0)
    throw UsageError(fmt::format(
        "--heads {} is not divisible by --tp {}: attention splits by whole heads; use --tp {}",
        s.heads, o.tp, divisors_of(s.heads)));
  if (s.hidden % s.heads != 0)
    throw UsageError(
        fmt::format("--hidden {} is not divisible by --heads {}: each head has hidden/heads "
                    "dimensions; use --heads {}",
                    s.hidden, s.heads, divisors_of(s.hidden)));
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

}  // namespace mgpu::planner
