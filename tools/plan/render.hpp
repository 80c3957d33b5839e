// The three views of a Plan: terminal text, JSON and an SVG bar chart. None of them computes a
// number; they only format what make_plan() put in the Plan.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/model.hpp"

namespace mgpu::planner {

/// Bytes as decimal gigabytes with two decimals, e.g. 1.12e12 -> "1120.00 GB" (the text's unit).
std::string format_gb(double bytes);

/// A text bar of one GPU's memory: one letter per category (W weights, G grads, M master,
/// O optimizer, A activations), '.' for free memory up to the capacity, and '|' at the capacity.
/// `scale_bytes` is the memory the full `width` stands for, so several bars share one scale.
std::string memory_bar(const layout::GpuMemory& m, double capacity_bytes, double scale_bytes,
                       int width);

/// The report `mgpu plan` prints; with `explain`, followed by every factor and its source.
std::string render_text(const Plan& p, bool explain);

/// The same numbers as render_text, machine-readable: bytes, seconds, fractions, fits, min_gpus.
nlohmann::ordered_json to_json(const Plan& p);

/// A standalone SVG document: one stacked bar per GPU count shown (the asked count, and the
/// fewest that fit when that differs) against a dashed capacity line, with a legend.
std::string render_svg(const Plan& p);

}  // namespace mgpu::planner
