// The terminal report of `mgpu plan`: memory per GPU by category with a text bar against the
// capacity, whether it fits, the fewest GPUs that would and other changes that would (each
// evaluated first), traffic per step, bubble, FLOPs, time. A row whose chapter function is not
// written yet names it, and the report ends with the list of those functions.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "plan/categories.hpp"
#include "plan/cli.hpp"
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
  if (o.cp > 1)
    return fmt::format("{} = tp {} x cp {} x pp {} x dp {}", gpus_text(gpus), o.tp, o.cp, o.pp,
                       gpus / (o.tp * o.cp * o.pp));
  return fmt::format("{} = tp {} x pp {} x dp {}", gpus_text(gpus), o.tp, o.pp,
                     gpus / (o.tp * o.pp));
}

// Where the context-parallel group runs and what it divides; empty when cp = 1.
std::string context_parallel_line(const Options& o) {
  if (o.cp == 1) return "";
  return fmt::format(
      "Context parallel: cp {} {} (each group spans tp x cp = {} consecutive GPUs, {}-GPU "
      "servers); every rank holds s/cp of each sequence's tokens; "
      "gradients are reduced over dp x cp = {}\n",
      o.cp, cp_within_server(o) ? "within one server" : "across servers", o.tp * o.cp,
      o.gpus_per_node, gradient_group(o));
}

std::string percent_of(double bytes, double capacity) {
  return fmt::format("{:.0f}% of capacity", 100 * bytes / capacity);
}

// What a row says while its chapter function is still a skeleton.
std::string finish(const std::string& function, bool several = false) {
  return fmt::format("finish {} to see {}", function, several ? "these rows" : "this row");
}

// Why no GPU count fits with this tp and pp: what every data-parallel GPU keeps whole, whatever
// their number. What to change instead is evaluated separately.
std::string never_fits_reason(const Plan& p) {
  static const char* const kept[] = {"all of its training state", "full bf16 weights and gradients",
                                     "full bf16 weights", ""};
  std::string what = kept[p.options.zero_stage];
  if (p.options.shape) what += what.empty() ? "its activations" : " and its activations";
  return fmt::format(
      "at ZeRO stage {} every data-parallel GPU keeps {} whatever their number, so adding GPUs "
      "never brings it under the capacity",
      p.options.zero_stage, what);
}

void append_fewest(std::string& out, const Plan& p) {
  const Options& o = p.options;
  const double cap = o.gpu_memory_bytes;
  if (p.min_gpus.is_pending()) {
    out += fmt::format("  Fewest GPUs that fit with tp {} and pp {}: {}.\n", o.tp, o.pp,
                       finish(p.min_gpus.missing()));
    return;
  }
  const FewestGpus& whole = *p.min_gpus;
  if (!whole.gpus) {
    out += fmt::format("  Never fits with tp {} and pp {} (searched up to {} GPUs): {}.\n", o.tp,
                       o.pp, kMaxSearchGpus, never_fits_reason(p));
    return;
  }
  if (*p.fits) {
    if (*whole.gpus < o.gpus)
      out += fmt::format(
          "  It would also fit on as few as {} with tp {} and pp {}, in whole {}-GPU nodes ({} per "
          "GPU, {}).\n",
          gpus_text(*whole.gpus), o.tp, o.pp, o.gpus_per_node,
          format_gb(whole.memory.total_bytes()), percent_of(whole.memory.total_bytes(), cap));
    return;
  }
  out += fmt::format(
      "  Fewest GPUs that fit with tp {} and pp {}, in whole {}-GPU nodes: {} -> {} per GPU "
      "({}).\n",
      o.tp, o.pp, o.gpus_per_node, layout(o, *whole.gpus), format_gb(whole.memory.total_bytes()),
      percent_of(whole.memory.total_bytes(), cap));
  if (p.min_gpus_any.is_pending())
    out += fmt::format("  Allowing a partial node: {}.\n", finish(p.min_gpus_any.missing()));
  else if (p.min_gpus_any->gpus && *p.min_gpus_any->gpus < *whole.gpus)
    out += fmt::format("  Allowing a partial node: {} -> {} per GPU ({}).\n",
                       gpus_text(*p.min_gpus_any->gpus),
                       format_gb(p.min_gpus_any->memory.total_bytes()),
                       percent_of(p.min_gpus_any->memory.total_bytes(), cap));
}

void append_advice(std::string& out, const Plan& p) {
  if (p.advice.empty()) return;
  const Options& o = p.options;
  out += fmt::format("  On these {} instead, each change evaluated:\n", gpus_text(o.gpus));
  for (const auto& a : p.advice) {
    // Single flags line up in a column; a combination of several gets a line of its own.
    const std::string change = a.change.size() < 22 ? fmt::format("{:<22}", a.change)
                                                    : a.change + "\n" + std::string(26, ' ');
    if (a.memory.is_pending())
      out += fmt::format("    {}finish {} to evaluate it\n", change, a.memory.missing());
    else if (a.fits)
      out += fmt::format("    {}would need {} per GPU: fits ({})\n", change,
                         format_gb(a.memory->total_bytes()),
                         percent_of(a.memory->total_bytes(), o.gpu_memory_bytes));
    else
      out += fmt::format(
          "    {}would need {} per GPU: still over {}{}\n", change,
          format_gb(a.memory->total_bytes()), format_gb(o.gpu_memory_bytes),
          a.fits_from.is_pending()
              ? fmt::format("; finish {} to see from how many GPUs it fits", a.fits_from.missing())
          : !a.fits_from.has_value() ? ""
          : *a.fits_from ? fmt::format("; fits from {} in whole nodes", gpus_text(**a.fits_from))
                         : std::string("; no GPU count fits with it alone"));
  }
}

void append_memory(std::string& out, const Plan& p) {
  const Options& o = p.options;
  const double cap = o.gpu_memory_bytes;
  out += "\nMemory per GPU";
  if (o.shape && o.pp > 1 && p.memory.has_value() && p.in_flight.has_value())
    out += fmt::format(" (stage {} of {}, the busiest: {} layers, {:.4g} micro-batches in flight)",
                       p.memory_stage, o.pp,
                       p.stage_layers.at(static_cast<std::size_t>(p.memory_stage)), *p.in_flight);
  out += "\n";
  if (p.memory.is_pending()) {
    out += fmt::format("  {}\n", finish(p.memory.missing(), true));
    return;
  }
  for (const auto& c : kMemoryCategories) {
    out += fmt::format("  {:<24}{:>14}", c.label, format_gb((*p.memory).*c.bytes));
    if (c.bytes == &layout::GpuMemory::activation_bytes && !o.shape)
      out += "   (no model shape: add --layers --hidden --heads --seq)";
    out += '\n';
  }
  out += fmt::format("  {:<24}{:>14}   of {} capacity\n\n", "total",
                     format_gb(p.memory->total_bytes()), format_gb(cap));

  const bool second =
      !*p.fits && p.min_gpus.has_value() && p.min_gpus->gpus && *p.min_gpus->gpus != o.gpus;
  double scale = std::max(cap, p.memory->total_bytes());
  if (second) scale = std::max(scale, p.min_gpus->memory.total_bytes());
  const std::string first_label = gpus_text(o.gpus);
  const std::string second_label = second ? gpus_text(*p.min_gpus->gpus) : "";
  const std::size_t w = std::max(first_label.size(), second_label.size());
  out +=
      fmt::format("  {:<{}} [{}] {}\n", first_label, w,
                  memory_bar(*p.memory, cap, scale, kBarWidth), format_gb(p.memory->total_bytes()));
  if (second)
    out += fmt::format("  {:<{}} [{}] {}\n", second_label, w,
                       memory_bar(p.min_gpus->memory, cap, scale, kBarWidth),
                       format_gb(p.min_gpus->memory.total_bytes()));
  out += fmt::format(
      "  {:<{}}  W weights  G grads  M master  O optimizer  A activations  . free  | {}\n\n", "", w,
      format_gb(cap));

  if (*p.fits)
    out += fmt::format("  Fits: {} <= {} ({}).\n", format_gb(p.memory->total_bytes()),
                       format_gb(cap), percent_of(p.memory->total_bytes(), cap));
  else
    out += fmt::format("  Does not fit: {} > {} ({:.2f}x capacity).\n",
                       format_gb(p.memory->total_bytes()), format_gb(cap),
                       p.memory->total_bytes() / cap);
  append_fewest(out, p);
  append_advice(out, p);
}

void append_traffic(std::string& out, const Plan& p) {
  out += "\nTraffic per GPU per step (bytes sent)\n";
  if (p.traffic.empty())
    out += p.options.gpus == 1 ? "  none: one GPU does not communicate\n" : "  none computed\n";
  for (const auto& t : p.traffic) {
    // The weights' holders, whom the data-parallel collectives span, are dp x cp ranks.
    const std::string group = t.group == "dp" && p.options.cp > 1 ? "dp x cp" : t.group;
    if (t.bytes.is_pending())
      out += fmt::format("  {:<44}{}   {} group\n", t.label, finish(t.bytes.missing()), group);
    else
      out += fmt::format("  {:<44}{:>14}   {} group\n", t.label, format_bytes(*t.bytes), group);
  }
  const Row<double> total = p.traffic_total();
  if (!p.traffic.empty())
    out += total.has_value()
               ? fmt::format("  {:<44}{:>14}\n", "total", format_bytes(*total))
               : fmt::format("  {:<44}{}\n", "total", "(once every row above is computed)");
  if (p.options.zero_stage > 0 && p.dp_traffic_vs_plain.shown()) {
    if (p.dp_traffic_vs_plain.has_value())
      out += fmt::format(
          "  data-parallel part: {:.2f}x the traffic of plain data parallelism (ZeRO stage {})\n",
          *p.dp_traffic_vs_plain, p.options.zero_stage);
    else
      out += fmt::format("  data-parallel part against plain data parallelism: {}\n",
                         finish(p.dp_traffic_vs_plain.missing()));
  }
  for (const auto& note : p.notes) out += fmt::format("  note: {}\n", note);
  if (!p.options.shape && (p.options.tp > 1 || p.options.pp > 1))
    out +=
        "  (tensor and pipeline traffic need the model shape: --layers --hidden --heads --seq)\n";
}

void append_time(std::string& out, const Plan& p) {
  const Options& o = p.options;
  const bool even = std::all_of(p.stage_layers.begin(), p.stage_layers.end(),
                                [&](std::int64_t n) { return n == p.stage_layers.front(); });
  if (p.bubble.has_value() && !even)
    out += fmt::format(
        "\nPipeline bubble: {:.4f} of each step idle, ((sum L - max L)/v) / (m max L + (sum L - "
        "max L)/v) with stages of {} to {} layers, v {} and m {} (uneven stages: the busiest waits "
        "for the others' layers)\n",
        *p.bubble, *std::min_element(p.stage_layers.begin(), p.stage_layers.end()),
        *std::max_element(p.stage_layers.begin(), p.stage_layers.end()), o.interleave,
        o.micro_batches);
  else if (p.bubble.has_value() && o.interleave > 1)
    out += fmt::format(
        "\nPipeline bubble: {:.4f} of each step idle, (p-1)/(v m+p-1) with p {}, v {} and m {} "
        "(interleaved 1F1B, v model chunks per stage)\n",
        *p.bubble, o.pp, o.interleave, o.micro_batches);
  else if (p.bubble.has_value())
    out += fmt::format(
        "\nPipeline bubble: {:.4f} of each step idle, (p-1)/(m+p-1) with p {} and m {} (GPipe or "
        "1F1B, one model chunk per stage)\n",
        *p.bubble, o.pp, o.micro_batches);
  else
    out += fmt::format("\nPipeline bubble: {}\n", finish(p.bubble.missing()));
  if (p.flops.has_value())
    out += fmt::format("Training compute: {:.3e} FLOPs for {} tokens (6 x params x tokens)\n",
                       *p.flops, format_count(*o.tokens));
  else if (p.flops.is_pending())
    out += fmt::format("Training compute: {}\n", finish(p.flops.missing()));
  if (p.seconds.shown()) {
    out += fmt::format("Training time at {:.3e} FLOP/s x MFU {:.2f} per GPU on {}:\n", *o.gpu_flops,
                       o.mfu, gpus_text(o.gpus));
    const auto line = [&](const std::string& label, const Row<double>& s) {
      out += s.has_value() ? fmt::format("  {:<40}{} ({:.3e} s)\n", label, format_duration(*s), *s)
                           : fmt::format("  {:<40}{}\n", label, finish(s.missing()));
    };
    line("perfect scaling (6ND / rate):", p.seconds_ideal);
    line(fmt::format("with recompute (+{:.1f}%) and bubble:", 100 * p.recompute_extra_fraction),
         p.seconds);
  }
}

void append_explain(std::string& out, const Plan& p) {
  out += "\nWhere every number comes from\n";
  for (const auto& f : p.factors) {
    if (f.value.has_value())
      out += fmt::format("  {:<42} {:>12.6g}   = {}\n", f.name, *f.value, f.formula);
    else
      out += fmt::format("  {:<42} {:>12}   = {}: {}\n", f.name, "-", f.formula,
                         finish(f.value.missing()));
    out += fmt::format("  {:<42} {:>12}     {}\n", "", "", f.source);
  }
}

// The chapter functions the pending rows wait for, and where each one is written and tested.
void append_pending(std::string& out, const Plan& p, bool explain) {
  const std::vector<std::string> functions = p.pending_functions(explain);
  if (functions.empty()) return;
  out +=
      "\nRows marked \"finish\" wait for chapter functions that are not written yet; each one "
      "appears\nas soon as its function is:\n";
  std::size_t width = 0;  // the longest name, so that no name runs into its folder
  for (const auto& f : functions) width = std::max(width, f.size());
  for (const auto& f : functions) {
    const std::string folder = chapter_folder_for("not implemented: " + f);
    out += fmt::format("  {:<{}}  {:<32}./mgpu test --student {}\n", f, width, folder,
                       folder.substr(std::string("chapters/").size()));
  }
}

}  // namespace

std::string memory_bar(const layout::GpuMemory& m, double capacity_bytes, double scale_bytes,
                       int width) {
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
  out += context_parallel_line(o);
  append_memory(out, p);
  append_traffic(out, p);
  append_time(out, p);
  if (explain) append_explain(out, p);
  append_pending(out, p, explain);
  return out;
}

}  // namespace mgpu::planner
