// `mgpu plan --svg FILE`: the planner figure as a standalone SVG, written as text (no library):
// one stacked bar per GPU count shown, on a shared scale, against a dashed capacity line.
#include <fmt/format.h>
#include <algorithm>
#include <vector>

#include "plan/categories.hpp"
#include "plan/render.hpp"
#include "svg.hpp"

namespace mgpu::planner {

namespace {

constexpr double kWidth = 780, kLeft = 110, kPlot = 480, kBarHeight = 34, kBarGap = 26, kTop = 58;

struct Bar {
  std::int64_t gpus;
  const layout::GpuMemory* memory;
};

void draw_bar(std::string& out, const Bar& bar, double y, double scale, double capacity) {
  out += fmt::format(
      R"(  <text x="{:.2f}" y="{:.2f}" text-anchor="end" dominant-baseline="middle">{} GPU{}</text>)"
      "\n",
      kLeft - 8, y + kBarHeight / 2, bar.gpus, bar.gpus == 1 ? "" : "s");
  double x = kLeft;
  for (const auto& c : kMemoryCategories) {
    const double bytes = bar.memory->*c.bytes;
    if (bytes <= 0) continue;
    const double w = bytes / scale * kPlot;
    out += fmt::format(
        R"(  <rect data-category="{}" data-bytes="{:.17g}" x="{:.4f}" y="{:.2f}" width="{:.4f}" height="{:.2f}" fill="{}">)"
        "<title>{}: {}</title></rect>\n",
        c.key, bytes, x, y, w, kBarHeight, c.color, tools::escape_xml(c.label), format_gb(bytes));
    x += w;
  }
  const bool fits =
      bar.memory->total_bytes() <= capacity;  // fits_capacity, on the bar's own numbers
  out += fmt::format(R"(  <text x="{:.2f}" y="{:.2f}" dominant-baseline="middle">{} {}</text>)"
                     "\n",
                     std::max(x, kLeft + capacity / scale * kPlot) + 8, y + kBarHeight / 2,
                     format_gb(bar.memory->total_bytes()), fits ? "fits" : "does not fit");
}

// The opening of every figure: the svg element, a white background and the title line.
std::string svg_head(const Options& o, double height) {
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" )"
      R"(font-family="sans-serif" font-size="13">)"
      "\n",
      kWidth, height, kWidth, height);
  out += fmt::format(R"(  <rect x="0" y="0" width="{:.0f}" height="{:.0f}" fill="white"/>)"
                     "\n",
                     kWidth, height);
  out += fmt::format(
      R"(  <text x="{:.2f}" y="22" font-size="15" font-weight="bold">{}</text>)"
      "\n",
      kLeft,
      tools::escape_xml(
          o.cp > 1 ? fmt::format("Memory per GPU: {} parameters, ZeRO stage {}, tp {} x cp {} ({}) "
                                 "x pp {}",
                                 format_count(o.params), o.zero_stage, o.tp, o.cp,
                                 cp_within_server(o) ? "within a server" : "across servers", o.pp)
                   : fmt::format("Memory per GPU: {} parameters, ZeRO stage {}, tp {} x pp {}",
                                 format_count(o.params), o.zero_stage, o.tp, o.pp)));
  return out;
}

// The figure for a student build whose memory function is still a skeleton: the title and the
// function to write, so the file exists and says why it has no bars.
std::string pending_svg(const Plan& p) {
  const Options& o = p.options;
  std::string out = svg_head(o, 90);
  out += fmt::format(
      R"(  <text x="{:.2f}" y="56" font-style="italic">{}</text>)"
      "\n",
      kLeft, tools::escape_xml(fmt::format("finish {} to see this figure", p.memory.missing())));
  out += "</svg>\n";
  return out;
}

}  // namespace

std::string render_svg(const Plan& p) {
  if (!p.memory.has_value()) return pending_svg(p);
  const Options& o = p.options;
  const double cap = o.gpu_memory_bytes;
  std::vector<Bar> bars{{o.gpus, &*p.memory}};
  const bool second =
      !*p.fits && p.min_gpus.has_value() && p.min_gpus->gpus && *p.min_gpus->gpus != o.gpus;
  if (second) bars.push_back({*p.min_gpus->gpus, &p.min_gpus->memory});
  double scale = cap;
  for (const auto& b : bars) scale = std::max(scale, b.memory->total_bytes());
  scale *= 1.02;  // a little room so a bar that exactly fills the plot does not touch the edge

  const double bars_bottom =
      kTop + static_cast<double>(bars.size()) * (kBarHeight + kBarGap) - kBarGap;
  const double height = bars_bottom + 104;
  std::string out = svg_head(o, height);
  for (std::size_t i = 0; i < bars.size(); ++i)
    draw_bar(out, bars[i], kTop + static_cast<double>(i) * (kBarHeight + kBarGap), scale, cap);

  const double cap_x = kLeft + cap / scale * kPlot;
  out += fmt::format(
      R"(  <line data-capacity-bytes="{:.17g}" x1="{:.4f}" y1="{:.2f}" x2="{:.4f}" y2="{:.2f}" stroke="#c00" stroke-width="2" stroke-dasharray="6 4"/>)"
      "\n",
      cap, cap_x, kTop - 14, cap_x, bars_bottom + 8);
  out += fmt::format(
      R"(  <text x="{:.4f}" y="{:.2f}" text-anchor="middle" fill="#c00">capacity {}</text>)"
      "\n",
      cap_x, kTop - 18, format_gb(cap));

  // Legend in rows of three, fixed slots wide enough for the longest label.
  for (std::size_t i = 0; i < kMemoryCategories.size(); ++i) {
    const auto& c = kMemoryCategories[i];
    const double lx = kLeft + static_cast<double>(i % 3) * 200;
    const double ly = bars_bottom + 34 + static_cast<double>(i / 3) * 20;
    out += fmt::format(R"(  <rect x="{:.2f}" y="{:.2f}" width="12" height="12" fill="{}"/>)"
                       "\n",
                       lx, ly - 10, c.color);
    out += fmt::format(R"(  <text x="{:.2f}" y="{:.2f}">{}</text>)"
                       "\n",
                       lx + 16, ly, tools::escape_xml(c.label));
  }
  // The verdict in words, under the legend.
  std::string verdict;
  if (*p.fits)
    verdict = fmt::format("Fits on {} GPU{}.", o.gpus, o.gpus == 1 ? "" : "s");
  else if (p.min_gpus.is_pending())
    verdict = fmt::format("Does not fit on {} GPU(s); finish {} to see the fewest that fit.",
                          o.gpus, p.min_gpus.missing());
  else if (p.min_gpus->gpus)
    verdict = fmt::format("Does not fit on {} GPU(s); fewest that fit in whole {}-GPU nodes: {}.",
                          o.gpus, o.gpus_per_node, *p.min_gpus->gpus);
  else
    verdict = fmt::format("Does not fit on {} GPU(s), nor on any count with tp {} and pp {}.",
                          o.gpus, o.tp, o.pp);
  out += fmt::format(R"(  <text x="{:.2f}" y="{:.2f}" font-style="italic">{}</text>)"
                     "\n",
                     kLeft, height - 12, tools::escape_xml(verdict));
  out += "</svg>\n";
  return out;
}

}  // namespace mgpu::planner
