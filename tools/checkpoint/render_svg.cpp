// The checkpoint-memory figure as SVG text, written by hand like the pipeline timeline (no
// dependency): the peak against k for one depth, and the best peak against the depth.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "11_6_checkpointing/formulas.hpp"
#include "checkpoint/figure.hpp"

namespace mgpu::checkpoint_figure {

namespace {

constexpr double kLeft = 80, kWidth = 720, kRight = 200, kPanelHeight = 280, kGap = 110, kTop = 84;
constexpr double kLegendX = kLeft + kWidth + 14;  // where both panels' legends start

// A tick spacing of 1, 2 or 5 times a power of ten giving at most about eight ticks over `span`.
double tick_step(double span) {
  const double raw = std::max(span, 1e-9) / 8;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double k : {1.0, 2.0, 5.0})
    if (k * decade >= raw) return k * decade;
  return 10 * decade;
}

// Maps data to pixels in one panel: x from x_min to x_max, y from 0 to y_max (up).
struct Panel {
  double top, x_min, x_max, y_max;
  double x(double v) const {
    return kLeft + (x_max > x_min ? (v - x_min) / (x_max - x_min) : 0.5) * kWidth;
  }
  double y(double v) const { return top + kPanelHeight * (1 - v / y_max); }
};

std::string axes(const Panel& p, const std::string& x_label, const std::string& y_label,
                 const std::string& title) {
  const double bottom = p.top + kPanelHeight;
  std::string svg = fmt::format(
      "<text class=\"panel-title\" x=\"{0:.0f}\" y=\"{1:.2f}\" font-size=\"14\" "
      "font-weight=\"bold\">{2}</text>\n"
      "<rect class=\"plot\" x=\"{0:.0f}\" y=\"{3:.2f}\" width=\"{4:.0f}\" height=\"{5:.0f}\" "
      "fill=\"#fafafa\" stroke=\"#999\"/>\n",
      kLeft, p.top - 14, title, p.top, kWidth, kPanelHeight);
  const double xs = std::max(1.0, std::round(tick_step(p.x_max - p.x_min)));
  for (double t = std::ceil(p.x_min / xs) * xs; t <= p.x_max + 1e-9; t += xs)
    svg += fmt::format(
        "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"black\"/>\n"
        "<text x=\"{0:.2f}\" y=\"{3:.2f}\" text-anchor=\"middle\" font-size=\"11\">{4:g}</text>\n",
        p.x(t), bottom, bottom + 5, bottom + 18, t);
  const double ys = tick_step(p.y_max);
  for (double t = 0; t <= p.y_max + 1e-9; t += ys)
    svg += fmt::format(
        "<line x1=\"{0:.0f}\" y1=\"{1:.2f}\" x2=\"{2:.0f}\" y2=\"{1:.2f}\" stroke=\"#e2e2e2\"/>\n"
        "<text x=\"{3:.0f}\" y=\"{4:.2f}\" text-anchor=\"end\" font-size=\"11\">{5:g}</text>\n",
        kLeft, p.y(t), kLeft + kWidth, kLeft - 6, p.y(t) + 4, t);
  svg += fmt::format(
      "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}</text>\n"
      "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" transform=\"rotate(-90 {:.2f} "
      "{:.2f})\">{}</text>\n",
      kLeft + kWidth / 2, bottom + 36, x_label, kLeft - 50, p.top + kPanelHeight / 2, kLeft - 50,
      p.top + kPanelHeight / 2, y_label);
  return svg;
}

std::string polyline(const Panel& p, const std::vector<std::pair<double, double>>& pts,
                     const std::string& cls, const std::string& style) {
  std::string points;
  for (const auto& [x, y] : pts) points += fmt::format("{:.2f},{:.2f} ", p.x(x), p.y(y));
  if (!points.empty()) points.pop_back();
  return fmt::format("<polyline class=\"{}\" points=\"{}\" fill=\"none\" {}/>\n", cls, points,
                     style);
}

// A legend entry at (x, y): a swatch, then its label.
std::string legend(double x, double y, const std::string& swatch, const std::string& text) {
  return fmt::format("{}<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"11\">{}</text>\n", swatch,
                     x + 26, y + 4, text);
}

// A legend entry whose swatch is a short line drawn with `style` (stroke attributes).
std::string line_legend(double x, double y, const std::string& style, const std::string& text) {
  return legend(
      x, y,
      fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{2:.2f}\" y2=\"{1:.2f}\" {3}/>", x, y,
                  x + 20, style),
      text);
}

// A legend entry whose swatch is a dot of radius r, in the measured points' colour.
std::string dot_legend(double x, double y, double r, const std::string& text) {
  return legend(
      x, y,
      fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{}\" fill=\"#d94801\"/>", x + 10, y, r),
      text);
}

// Panel 1: the peak against k, measured, by the exact formula and by the units model.
std::string panel_peak_against_k(const Figure& f) {
  const std::int64_t L = f.options.layers;
  const double B = f.block_bytes;
  std::vector<std::pair<double, double>> predicted, units;
  double y_max = 1;
  for (std::int64_t k = 1; k <= L; ++k) {
    const double pb = predicted_peak_bytes(L, k, f.checkpoint_bytes, B, f.embed_bytes) / B;
    const auto u = static_cast<double>(checkpointing::checkpointed_peak_units(L, k));
    predicted.emplace_back(static_cast<double>(k), pb);
    units.emplace_back(static_cast<double>(k), u);
    y_max = std::max({y_max, pb, u});
  }
  for (const Row& r : f.rows) y_max = std::max(y_max, static_cast<double>(r.peak_bytes) / B);
  const Panel one{kTop, 1, static_cast<double>(std::max<std::int64_t>(L, 2)), y_max * 1.08};

  std::string svg = axes(one, "k, blocks per checkpoint segment", "peak (block units)",
                         fmt::format("(1) peak against k for L = {}", L));
  svg += polyline(one, units, "units-model",
                  "stroke=\"#999\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\"");
  svg += polyline(one, predicted, "predicted", "stroke=\"#2171b5\" stroke-width=\"1.5\"");
  for (const Row& r : f.rows)
    svg += fmt::format(
        "<circle class=\"measured\" data-k=\"{0}\" data-peak-bytes=\"{1}\" cx=\"{2:.2f}\" "
        "cy=\"{3:.2f}\" r=\"3.5\" fill=\"#d94801\"><title>k = {0}: {1} bytes = {4:.3f} "
        "units</title></circle>\n",
        r.k, r.peak_bytes, one.x(static_cast<double>(r.k)),
        one.y(static_cast<double>(r.peak_bytes) / B), static_cast<double>(r.peak_bytes) / B);
  for (std::int64_t k : f.best_measured)
    svg += fmt::format(
        "<line class=\"best\" data-k=\"{0}\" x1=\"{1:.2f}\" y1=\"{2:.2f}\" x2=\"{1:.2f}\" "
        "y2=\"{3:.2f}\" stroke=\"#238b45\" stroke-width=\"1.5\"/>\n",
        k, one.x(static_cast<double>(k)), kTop, kTop + kPanelHeight);
  std::string best;
  for (std::int64_t k : f.best_measured) best += (best.empty() ? "" : ", ") + std::to_string(k);
  svg += dot_legend(kLegendX, kTop + 10, 3.5, "measured (ledger)");
  svg += line_legend(kLegendX, kTop + 30, "stroke=\"#2171b5\" stroke-width=\"1.5\"",
                     "predicted (exact)");
  svg +=
      line_legend(kLegendX, kTop + 50, "stroke=\"#999\" stroke-dasharray=\"5,4\"", "ceil(L/k) + k");
  svg += line_legend(kLegendX, kTop + 70, "stroke=\"#238b45\" stroke-width=\"1.5\"",
                     fmt::format("best k measured: {}", best));
  return svg;
}

// Panel 2: the best peak against L, with the units model's minimum and 2 sqrt(L).
std::string panel_sweep(const Figure& f) {
  const double top = kTop + kPanelHeight + kGap;
  const auto L_max = static_cast<double>(f.sweep.back().layers);
  double y2 = 2 * std::sqrt(L_max);
  std::vector<std::pair<double, double>> minimum, root;
  for (const SweepPoint& s : f.sweep) {
    y2 = std::max({y2, s.measured_units, static_cast<double>(s.units_model)});
    minimum.emplace_back(static_cast<double>(s.layers), static_cast<double>(s.units_model));
  }
  for (int i = 0; i <= 200; ++i) {
    const double l = 1 + (L_max - 1) * i / 200.0;
    root.emplace_back(l, 2 * std::sqrt(l));
  }
  const Panel two{top, 1, std::max(L_max, 2.0), y2 * 1.08};
  std::string svg = axes(two, "L, blocks in the model", "best peak (block units)",
                         "(2) the best peak against L, at the k the exact formula picks");
  svg += polyline(two, root, "two-sqrt",
                  "stroke=\"#999\" stroke-width=\"1.5\" "
                  "stroke-dasharray=\"5,4\"");
  svg += polyline(two, minimum, "units-min", "stroke=\"#2171b5\" stroke-width=\"1.5\"");
  for (const SweepPoint& s : f.sweep)
    svg += fmt::format(
        "<circle class=\"sweep\" data-layers=\"{0}\" data-k=\"{1}\" cx=\"{2:.2f}\" "
        "cy=\"{3:.2f}\" r=\"3\" fill=\"#d94801\"><title>L = {0}, k = {1}: {4:.3f} "
        "units</title></circle>\n",
        s.layers, s.k, two.x(static_cast<double>(s.layers)), two.y(s.measured_units),
        s.measured_units);
  svg += dot_legend(kLegendX, top + 10, 3, "measured best");
  svg += line_legend(kLegendX, top + 30, "stroke=\"#2171b5\" stroke-width=\"1.5\"",
                     "min over k of ceil(L/k)+k");
  svg += line_legend(kLegendX, top + 50, "stroke=\"#999\" stroke-dasharray=\"5,4\"", "2 sqrt(L)");
  return svg;
}

}  // namespace

std::string render_svg(const Figure& f) {
  const std::int64_t L = f.options.layers;
  const double B = f.block_bytes;
  const bool sweep = !f.sweep.empty();
  const double width = kLeft + kWidth + kRight;
  const double height = kTop + kPanelHeight + 60 + (sweep ? kGap + kPanelHeight : 0);
  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 "
      "0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "fill=\"white\"/>\n"
      "<text class=\"title\" x=\"{2:.0f}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">"
      "Activation checkpointing, L = {3} blocks: peak activations measured on the ledger</text>\n"
      "<text x=\"{2:.0f}\" y=\"42\" fill=\"#555\">one block unit = B = {4:.0f} bytes, what a "
      "block saves for its backward; a checkpoint is C = {5:.0f} bytes</text>\n",
      width, height, kLeft, L, B, f.checkpoint_bytes);
  svg += panel_peak_against_k(f);
  if (sweep) svg += panel_sweep(f);
  svg += "</svg>\n";
  return svg;
}

}  // namespace mgpu::checkpoint_figure
