// The measured-beside-formula table every chapter demo prints, and the verdict that closes it:
// a formula still a skeleton prints TODO in its cell, and the verdict names what it waits for.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "mgpu/not_implemented.hpp"

namespace mgpu::demo {

/// One column of a Table: its header, its width in characters, whether its text is aligned left
/// (names, explanations) or right (numbers), and the spaces printed before it.
struct Column {
  std::string header;
  int width = 12;
  bool left = false;
  int gap = 0;
};

/// A table of fixed-width columns under a title, indented two spaces, printed as it is filled.
class Table {
 public:
  /// Prints `title` (one or more lines; none when empty) and the header row. A table whose
  /// headers are all empty prints no header row.
  Table(const std::string& title, std::vector<Column> columns);
  /// Prints one row, a cell per column; fewer cells leave the last columns out. A cell wider than
  /// its column pushes the rest to the right rather than being cut.
  void row(const std::vector<std::string>& cells) const;
  /// Prints `label` in the first column and `text` after it as one line: a run that could not be
  /// measured ("not implemented: 11.2 ring_all_reduce"), or a note under the rows.
  void line(const std::string& label, const std::string& text) const;

 private:
  std::vector<Column> columns_;
};

/// The formula cell: `show(*value)`, or "TODO" while the formula is a skeleton (no value).
std::string cell(const std::optional<double>& value,
                 const std::function<std::string(double)>& show);

/// The record of one claim's comparisons (every measured value against its formula, every other
/// check) and of the TODOs met on the way; `verdict` says in the same words in every demo
/// whether the claim holds.
class Checks {
 public:
  /// `claim` is what the verdict says yes or NO to, e.g. "weights equal the formulas at every t".
  explicit Checks(std::string claim);

  /// `formula()`, or no value when it throws NotImplemented; the TODO is kept for the verdict.
  template <class F>
  auto formula(F&& f) -> std::optional<std::decay_t<decltype(f())>> {
    try {
      return f();
    } catch (const NotImplemented& e) {
      todo(e.what());
      return std::nullopt;
    }
  }
  /// Runs chapter code: true when it ran, false when it threw NotImplemented (the TODO is kept,
  /// and written to `*error` when given).
  bool run(const std::function<void()>& code, std::string* error = nullptr);
  /// Keeps a TODO met elsewhere: a NotImplemented message ("not implemented: 11.4 tp_ffn_forward")
  /// or the function it names ("11.4 tp_ffn_forward").
  void todo(const std::string& message);

  /// Compares one measured value with its formula's; equal when they differ by at most
  /// `tolerance`. No formula value (a TODO, already kept) compares as neither equal nor not.
  /// `where` names the value in a NO verdict, e.g. "t = 2 weights".
  bool compare(const std::string& where, double measured, const std::optional<double>& formula,
               double tolerance = 0);
  /// Records a check that is not one number against another; `where` names it if it fails.
  bool check(const std::string& where, bool holds);

  /// True when every comparison held and there is no TODO, nor a claim with nothing checked.
  bool holds() const;
  /// "<claim>: yes"; "<claim>: NO (<what differs>)"; or "<claim>: not yet, waiting for <TODOs>"
  /// while a TODO stands and nothing differs (or nothing could be compared).
  std::string verdict() const;
  /// Prints the verdict as one line.
  void print_verdict() const;

 private:
  std::string claim_;
  std::vector<std::string> todos_;        // "11.4 block_bytes_sent_per_rank", each once
  std::vector<std::string> differences_;  // "t = 2 weights: measured 1024, formula 2048"
  int compared_ = 0;
};

}  // namespace mgpu::demo
