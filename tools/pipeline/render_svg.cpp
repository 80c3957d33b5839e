// The pipeline timeline as SVG text, written by hand like the planner's bars (no dependency):
// a lane per stage, a box per forward or backward action where it ran on the virtual clock, so
// the bubble is the empty space of each lane.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "pipeline/figure.hpp"
#include "svg.hpp"

namespace mgpu::pipeline_figure {

namespace {

constexpr double kLeft = 80, kRight = 30, kTop = 64, kLane = 34, kBoxHeight = 26, kPlotWidth = 960;

// Forward in blues, backward and its input half in oranges, the weight half in greens, lighter
// for the first chunk and darker for later ones, so a chunk's round reads as one shade.
std::size_t colour_of(pipeline::Pass pass) {
  switch (pass) {
    case pipeline::Pass::forward:
      return 0;
    case pipeline::Pass::backward:
    case pipeline::Pass::backward_input:
      return 1;
    case pipeline::Pass::backward_weight:
      return 2;
  }
  return 0;
}

// The box's class and the words of its tooltip.
std::pair<const char*, const char*> names_of(pipeline::Pass pass) {
  switch (pass) {
    case pipeline::Pass::forward:
      return {"fwd", "forward"};
    case pipeline::Pass::backward:
      return {"bwd", "backward"};
    case pipeline::Pass::backward_input:
      return {"bwd-in", "input half of the backward"};
    case pipeline::Pass::backward_weight:
      return {"bwd-w", "weight half of the backward"};
  }
  return {"", ""};
}

std::string fill(pipeline::Pass pass, int chunk, int chunks) {
  constexpr std::array<std::array<int, 3>, 3> light{
      {{158, 202, 225}, {253, 190, 133}, {161, 217, 155}}};
  constexpr std::array<std::array<int, 3>, 3> dark{{{33, 113, 181}, {217, 72, 1}, {35, 139, 69}}};
  const auto& a = light[colour_of(pass)];
  const auto& b = dark[colour_of(pass)];
  const double t = chunks > 1 ? static_cast<double>(chunk) / (chunks - 1) : 0.5;
  const auto mix = [t](int x, int y) { return static_cast<int>(std::lround(x + (y - x) * t)); };
  return fmt::format("rgb({},{},{})", mix(a[0], b[0]), mix(a[1], b[1]), mix(a[2], b[2]));
}

// A tick spacing of 1, 2 or 5 times a power of ten giving about eight ticks over `span`.
double tick_step(double span) {
  const double raw = span / 8;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double k : {1.0, 2.0, 5.0})
    if (k * decade >= raw) return k * decade;
  return 10 * decade;
}

// ZB-H2's title adds the wait inside a stage and the micro-batches each stage holds at its peak.
std::string zb_h2_title(const Figure& f) {
  std::string held;
  for (const StageResult& st : f.stages)
    held += (held.empty() ? "" : " ") + fmt::format("{:.2f}", st.in_flight_measured);
  return fmt::format("; inner wait {:.1f} us measured, formula {}; in flight {}",
                     f.inner_wait_measured * 1e6,
                     f.inner_wait.value ? fmt::format("{:.1f} us", *f.inner_wait.value * 1e6)
                                        : "finish " + f.inner_wait.pending,
                     held);
}

// The title: the schedule, its numbers, the bubble measured and by formula.
std::string svg_title(const Figure& f) {
  const FigureOptions& o = f.options;
  const int p = o.stages, v = o.chunks;
  std::string title = fmt::format(
      "{}, p = {}, m = {}{}: bubble {:.4f} measured, {} = ", schedule_title(o.schedule), p,
      o.micro_batches, v > 1 ? fmt::format(", v = {}", v) : "", f.bubble, f.formula_text);
  title +=
      f.formula.value ? fmt::format("{:.4f}", *f.formula.value) : "finish " + f.formula.pending;
  if (o.schedule == ScheduleKind::zb_h2) title += zb_h2_title(f);
  if (o.latency > 0) title += fmt::format(" (latency {:g} us)", o.latency * 1e6);
  return title;
}

// The document's opening: size, background, title and legend.
std::string svg_opening(const Figure& f, double width, double height) {
  const FigureOptions& o = f.options;
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 "
      "0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "fill=\"white\"/>\n"
      "<text class=\"title\" x=\"{2:.0f}\" y=\"24\" font-size=\"15\" "
      "font-weight=\"bold\">{3}</text>\n"
      "<text x=\"{2:.0f}\" y=\"44\" fill=\"#555\">one row per stage; boxes are forward (blue) and "
      "{5} "
      "passes numbered by micro-batch{4}; empty space is the bubble</text>\n",
      width, height, kLeft, tools::escape_xml(svg_title(f)),
      o.chunks > 1 ? ".chunk, darker for later chunks" : "",
      o.schedule == ScheduleKind::zb_h1 || o.schedule == ScheduleKind::zb_h2
          ? "backward input (orange) and weight (green)"
          : "backward (orange)");
}

// One pass of one micro-batch: its box, and its number where that fits; `scale` in px per us,
// v the chunks per stage.
std::string svg_box(const Box& b, double scale, int v) {
  const double x = kLeft + b.start * 1e6 * scale,
               w = std::max((b.end - b.start) * 1e6 * scale, 0.5);
  const double y = kTop + b.stage * kLane;
  const auto [css, words] = names_of(b.pass);
  const std::string label =
      v > 1 ? fmt::format("{}.{}", b.micro_batch, b.chunk) : std::to_string(b.micro_batch);
  std::string svg = fmt::format(
      "<rect class=\"{0}\" data-stage=\"{1}\" data-micro-batch=\"{2}\" data-chunk=\"{3}\" "
      "x=\"{4:.2f}\" "
      "y=\"{5:.2f}\" width=\"{6:.2f}\" height=\"{7:.0f}\" fill=\"{8}\" stroke=\"white\" "
      "stroke-width=\"0.5\">"
      "<title>stage {1}: {9} of micro-batch {2} chunk {3}, {10:.1f} to {11:.1f} "
      "us</title></rect>\n",
      css, b.stage, b.micro_batch, b.chunk, x, y, w, kBoxHeight, fill(b.pass, b.chunk, v), words,
      b.start * 1e6, b.end * 1e6);
  // A number only where it fits, smaller in narrow boxes: a digit is about 0.6 em wide.
  const double chars = static_cast<double>(label.size());
  const int font = w >= 6.6 * chars + 2 ? 11 : w >= 5.0 * chars + 1 ? 9 : 0;
  if (font > 0)
    svg += fmt::format(
        "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"{}\" "
        "fill=\"{}\">{}</text>\n",
        x + w / 2, y + kBoxHeight / 2 + 4, font, v > 1 && b.chunk * 2 >= v ? "white" : "black",
        label);
  return svg;
}

// The time axis in microseconds, at height axis_y; `scale` in px per us.
std::string svg_time_axis(double span_us, double scale, double axis_y) {
  std::string svg = fmt::format(
      "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{2:.2f}\" y2=\"{1:.2f}\" stroke=\"black\"/>\n",
      kLeft, axis_y, kLeft + kPlotWidth);
  const double step = tick_step(span_us);
  for (double t = 0; t <= span_us * (1 + 1e-9); t += step) {
    const double x = kLeft + t * scale;
    svg += fmt::format(
        "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"black\"/>\n"
        "<text x=\"{0:.2f}\" y=\"{3:.2f}\" text-anchor=\"middle\" font-size=\"11\">{4:g}</text>\n",
        x, axis_y, axis_y + 5, axis_y + 18, t);
  }
  svg += fmt::format(
      "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">virtual time (us); step {:.1f} "
      "us</text>\n",
      kLeft + kPlotWidth / 2, axis_y + 36, span_us);
  return svg;
}

}  // namespace

std::string render_svg(const Figure& f) {
  const int p = f.options.stages;
  const double span_us = std::max(f.step_seconds * 1e6, 1e-9);
  const double scale = kPlotWidth / span_us;  // px per microsecond
  const double width = kLeft + kPlotWidth + kRight;
  const double axis_y = kTop + p * kLane + 6;
  const double height = axis_y + 70;

  std::string svg = svg_opening(f, width, height);
  // Lanes: a thin outline shows where a stage could have been busy.
  for (int s = 0; s < p; ++s) {
    const double y = kTop + s * kLane;
    svg += fmt::format(
        "<rect class=\"lane\" data-lane=\"{0}\" x=\"{1:.2f}\" y=\"{2:.2f}\" width=\"{3:.2f}\" "
        "height=\"{4:.0f}\" "
        "fill=\"#f4f4f4\" stroke=\"#ccc\"/>\n"
        "<text x=\"{5:.0f}\" y=\"{6:.2f}\" text-anchor=\"end\">stage {0}</text>\n",
        s, kLeft, y, kPlotWidth, kBoxHeight, kLeft - 8, y + kBoxHeight / 2 + 4);
  }
  for (const Box& b : f.boxes) svg += svg_box(b, scale, f.options.chunks);
  svg += svg_time_axis(span_us, scale, axis_y);
  svg += "</svg>\n";
  return svg;
}

}  // namespace mgpu::pipeline_figure
