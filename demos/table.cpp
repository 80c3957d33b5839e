// The shared table and verdict of the chapter demos; see table.hpp.
#include "table.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

namespace mgpu::demo {

namespace {

std::string pad(const std::string& text, const Column& c) {
  const std::string gap(static_cast<std::size_t>(c.gap), ' ');
  return c.left ? fmt::format("{}{:<{}}", gap, text, c.width)
                : fmt::format("{}{:>{}}", gap, text, c.width);
}

void print_line(std::string text) {
  text.erase(text.find_last_not_of(' ') + 1);
  fmt::print("{}\n", text);
}

}  // namespace

Table::Table(const std::string& title, std::vector<Column> columns) : columns_(std::move(columns)) {
  if (!title.empty()) fmt::print("{}\n", title);
  std::vector<std::string> headers;
  bool any = false;
  for (const Column& c : columns_) {
    headers.push_back(c.header);
    any = any || !c.header.empty();
  }
  if (any) row(headers);
}

void Table::row(const std::vector<std::string>& cells) const {
  std::string text = "  ";
  for (std::size_t i = 0; i < cells.size() && i < columns_.size(); ++i)
    text += pad(cells[i], columns_[i]);
  print_line(text);
}

void Table::line(const std::string& label, const std::string& text) const {
  print_line("  " + pad(label, columns_.front()) + "  " + text);
}

std::string cell(const std::optional<double>& value,
                 const std::function<std::string(double)>& show) {
  return value ? show(*value) : std::string("TODO");
}

Checks::Checks(std::string claim) : claim_(std::move(claim)) {}

bool Checks::run(const std::function<void()>& code, std::string* error) {
  try {
    code();
    return true;
  } catch (const NotImplemented& e) {
    todo(e.what());
    if (error != nullptr) *error = e.what();
    return false;
  }
}

void Checks::todo(const std::string& message) {
  std::string_view name = message;
  constexpr std::string_view kPrefix = "not implemented: ";
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  if (std::find(todos_.begin(), todos_.end(), name) == todos_.end()) todos_.emplace_back(name);
}

bool Checks::compare(const std::string& where, double measured,
                     const std::optional<double>& formula, double tolerance) {
  if (!formula) return false;
  const bool equal = std::abs(measured - *formula) <= tolerance;
  ++compared_;
  if (!equal)
    differences_.push_back(
        fmt::format("{}: measured {:.6g}, formula {:.6g}", where, measured, *formula));
  return equal;
}

bool Checks::check(const std::string& where, bool holds) {
  ++compared_;
  if (!holds) differences_.push_back(where);
  return holds;
}

bool Checks::holds() const { return differences_.empty() && todos_.empty() && compared_ > 0; }

std::string Checks::verdict() const {
  if (!differences_.empty()) {
    constexpr std::size_t kShown = 3;
    std::string what;
    for (std::size_t i = 0; i < differences_.size() && i < kShown; ++i)
      what += (i == 0 ? "" : "; ") + differences_[i];
    if (differences_.size() > kShown)
      what += fmt::format("; and {} more", differences_.size() - kShown);
    return fmt::format("{}: NO ({})", claim_, what);
  }
  if (!todos_.empty()) {
    std::string names;
    for (const std::string& t : todos_) names += (names.empty() ? "" : ", ") + t;
    return fmt::format("{}: not yet, waiting for {}", claim_, names);
  }
  if (compared_ == 0) return fmt::format("{}: not yet, nothing was measured", claim_);
  return fmt::format("{}: yes", claim_);
}

void Checks::print_verdict() const { fmt::print("{}\n", verdict()); }

}  // namespace mgpu::demo
