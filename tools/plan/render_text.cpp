// The terminal report of `mgpu plan`: memory per GPU by category with a text bar against the
// capacity, whether it fits and the fewest GPUs that would, traffic per step, bubble, FLOPs, time.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "plan/categories.hpp"
#include "plan/render.hpp"

namespace mgpu::planner {

std::string format_gb(double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); }

namespace {

constexpr int kBarWidth = 56;

// Traffic spans bytes (a small pipeline) to terabytes (ZeRO on a huge model): pick the unit.
std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  double v = bytes;
  while (std::abs(v) >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", v) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_duration(double s) {
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 2 * 3600) return fmt::format("{:.1f} min", s / 60);
  if (s < 2 * 86400) return fmt::format("{:.1f} h", s / 3600);
  if (s < 2 * 365.25 * 86400) return fmt::format("{:.1f} days", s / 86400);
  return fmt::format("{:.1f} years", s / (365.25 * 86400));
}

std::string gpus_text(std::int64_t n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); }

std::string layout(const Options& o, std::int64_t gpus) {
  return fmt::format("{} = tp {} x pp {} x dp {}", gpus_text(gpus), o.tp, o.pp,
                     gpus / (o.tp * o.pp));
}

// Why it can never fit, and the way out, for the "no GPU count fits" case.
std::string never_fits_hint(const Plan& p) {
  if (p.options.zero_stage == 0)
    return "ZeRO stage 0 keeps the whole training state on every data-parallel GPU, so adding GPUs "
           "never shrinks it; shard it with --zero 1, 2 or 3, or split the model with --tp/--pp";
  if (p.options.zero_stage < 3)
    return fmt::format(
        "ZeRO stage {} still keeps full bf16 weights{} on every GPU; try --zero 3, "
        "or split the model with --tp/--pp",
        p.options.zero_stage, p.options.zero_stage == 1 ? " and gradients" : "");
  return "activations do not shrink with more data-parallel GPUs; split the model with --tp/--pp, "
         "use --recompute, or a smaller --micro-batch";
}

void append_memory(std::string& out, const Plan& p) {
  const Options& o = p.options;
  const double cap = o.gpu_memory_bytes;
  out += "\nMemory per GPU\n";
  for (const auto& c : kMemoryCategories) {
    out += fmt::format("  {:<24}{:>14}", c.label, format_gb(p.memory.*c.bytes));
    if (c.bytes == &MemoryBytes::activations && !o.shape)
      out += "   (no model shape: add --layers --hidden --heads --seq)";
    out += '\n';
  }
  out += fmt::format("  {:<24}{:>14}   of {} capacity\n\n", "total", format_gb(p.memory.total()),
                     format_gb(cap));

  const bool second = !p.fits && p.min_gpus && *p.min_gpus != o.gpus;
  double scale = std::max(cap, p.memory.total());
  if (second) scale = std::max(scale, p.memory_at_min.total());
  const std::string first_label = gpus_text(o.gpus);
  const std::string second_label = second ? gpus_text(*p.min_gpus) : "";
  const std::size_t w = std::max(first_label.size(), second_label.size());
  out += fmt::format("  {:<{}} [{}] {}\n", first_label, w,
                     memory_bar(p.memory, cap, scale, kBarWidth), format_gb(p.memory.total()));
  if (second)
    out += fmt::format("  {:<{}} [{}] {}\n", second_label, w,
                       memory_bar(p.memory_at_min, cap, scale, kBarWidth),
                       format_gb(p.memory_at_min.total()));
  out += fmt::format(
      "  {:<{}}  W weights  G grads  M master  O optimizer  A activations  . free  | {}\n\n", "", w,
      format_gb(cap));

  if (p.fits)
    out += fmt::format("  Fits: {} <= {} ({:.0f}% of capacity).\n", format_gb(p.memory.total()),
                       format_gb(cap), 100 * p.memory.total() / cap);
  else
    out += fmt::format("  Does not fit: {} > {} ({:.2f}x capacity).\n", format_gb(p.memory.total()),
                       format_gb(cap), p.memory.total() / cap);
  if (!p.fits && p.min_gpus) {
    out += fmt::format(
        "  Fewest GPUs that fit with tp {} and pp {}, in whole {}-GPU nodes: {} -> {} per GPU.\n",
        o.tp, o.pp, o.gpus_per_node, layout(o, *p.min_gpus), format_gb(p.memory_at_min.total()));
    if (p.min_gpus_any && *p.min_gpus_any < *p.min_gpus)
      out += fmt::format("  Allowing a partial node: {} -> {} per GPU.\n",
                         gpus_text(*p.min_gpus_any), format_gb(p.memory_at_min_any.total()));
  }
  if (p.fits && p.min_gpus_any && *p.min_gpus_any < o.gpus)
    out +=
        fmt::format("  It would fit on as few as {} with tp {} and pp {} ({} per GPU).\n",
                    gpus_text(*p.min_gpus_any), o.tp, o.pp, format_gb(p.memory_at_min_any.total()));
  if (!p.min_gpus_any)
    out += fmt::format("  Never fits with tp {} and pp {} (searched up to {} GPUs): {}.\n", o.tp,
                       o.pp, kMaxSearchGpus, never_fits_hint(p));
}

void append_traffic(std::string& out, const Plan& p) {
  out += "\nTraffic per GPU per step (bytes sent)\n";
  if (p.traffic.empty())
    out += p.options.gpus == 1 ? "  none: one GPU does not communicate\n" : "  none computed\n";
  for (const auto& t : p.traffic)
    out += fmt::format("  {:<44}{:>14}   {} group\n", t.label, format_bytes(t.bytes), t.group);
  if (!p.traffic.empty())
    out += fmt::format("  {:<44}{:>14}\n", "total", format_bytes(p.traffic_total()));
  if (p.dp_traffic_vs_plain && p.options.zero_stage > 0)
    out += fmt::format(
        "  data-parallel part: {:.2f}x the traffic of plain data parallelism (ZeRO stage {})\n",
        *p.dp_traffic_vs_plain, p.options.zero_stage);
  if (!p.options.shape && (p.options.tp > 1 || p.options.pp > 1))
    out +=
        "  (tensor and pipeline traffic need the model shape: --layers --hidden --heads --seq)\n";
}

void append_time(std::string& out, const Plan& p) {
  const Options& o = p.options;
  out +=
      fmt::format("\nPipeline bubble: {:.4f} of each step idle, (p-1)/(m+p-1) with p {} and m {}\n",
                  p.bubble, o.pp, o.micro_batches);
  if (p.flops)
    out += fmt::format("Training compute: {:.3e} FLOPs for {} tokens (6 x params x tokens)\n",
                       *p.flops, format_count(*o.tokens));
  if (p.seconds) {
    out += fmt::format("Training time at {:.3e} FLOP/s x MFU {:.2f} per GPU on {}:\n", *o.gpu_flops,
                       o.mfu, gpus_text(o.gpus));
    out += fmt::format("  {:<40}{} ({:.3e} s)\n",
                       "perfect scaling (6ND / rate):", format_duration(*p.seconds_ideal),
                       *p.seconds_ideal);
    out += fmt::format(
        "  {:<40}{} ({:.3e} s)\n",
        fmt::format("with recompute (+{:.1f}%) and bubble:", 100 * p.recompute_extra_fraction),
        format_duration(*p.seconds), *p.seconds);
  }
}

void append_explain(std::string& out, const Plan& p) {
  out += "\nWhere every number comes from\n";
  for (const auto& f : p.factors)
    out += fmt::format("  {:<42} {:>12.6g}   = {}\n  {:<42} {:>12}     {}\n", f.name, f.value,
                       f.formula, "", "", f.source);
}

}  // namespace

std::string memory_bar(const MemoryBytes& m, double capacity_bytes, double scale_bytes, int width) {
  const auto column = [&](double bytes) {
    if (scale_bytes <= 0) return 0;
    return std::clamp(static_cast<int>(std::lround(bytes / scale_bytes * width)), 0, width);
  };
  std::string bar;
  double cumulative = 0;
  for (const auto& c : kMemoryCategories) {
    cumulative += m.*c.bytes;
    bar.append(
        static_cast<std::size_t>(std::max(0, column(cumulative) - static_cast<int>(bar.size()))),
        c.letter);
  }
  const int cap = column(capacity_bytes);
  if (static_cast<int>(bar.size()) < cap)
    bar.append(static_cast<std::size_t>(cap - static_cast<int>(bar.size())), '.');
  bar.append(static_cast<std::size_t>(width - static_cast<int>(bar.size())), ' ');
  bar.insert(static_cast<std::size_t>(cap), 1, '|');
  return bar;
}

std::string render_text(const Plan& p, bool explain) {
  const Options& o = p.options;
  std::string out = fmt::format("mgpu plan: {} parameters on {}, ZeRO stage {}, {} per GPU\n",
                                format_count(o.params), layout(o, o.gpus), o.zero_stage,
                                format_gb(o.gpu_memory_bytes));
  append_memory(out, p);
  append_traffic(out, p);
  append_time(out, p);
  if (explain) append_explain(out, p);
  return out;
}

}  // namespace mgpu::planner
