// Comparing a computed array with the one it should equal, for every test program of the project
// (runtime, chapters, tools). One place, so every test reports a mismatch the way the grader does
// (the diagnosis comes from the same core, mismatch.hpp): how many elements are off, the first
// and the worst one with both values, how many are NaN, and, when every wrong element is the
// same multiple of the right one, the likely cause ("4x the reference: summed over the 4 ranks
// instead of averaged?"), rather than a bare "false". Each wrong element is named by its rank, its
// place (index, or row and column of a matrix) and, where the array is cut into chunks (a ring's,
// a rank's share of a sequence), its chunk. One comparison is one doctest check with one message,
// never one check per element, so a wrong result reads in a screenful.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mismatch.hpp"

namespace mgpu_test {

/// Whose value is compared, for the report: the rank that computed it ("rank 2: ..."; -1 for
/// none) and the run's rank count, which names the cause when every wrong element is that many
/// times (or one over that many times) the right one. Both optional:
/// `check_close("grads", got, want, tol, {.rank = r, .ranks = 4})`.
struct Context {
  int rank = -1;  ///< the rank whose value this is; -1: not one rank's
  int ranks = 0;  ///< ranks in the run; 0: unknown
  /// Index of the first compared element in the whole array, when got and want are a part of it
  /// (one chunk of a ring's buffer): wrong elements are named by their index in the whole.
  std::size_t offset = 0;
  /// > 0: the arrays are row-major matrices of this many columns, and an element is named by
  /// [row, column]. (Matrices with rows() and cols() are named so without it.)
  std::size_t cols = 0;
  /// Where an element sits, for the report: given its index in the whole array (offset
  /// included; row * columns + column for a matrix), a few words such as "chunk 2 of 4: elements
  /// 6..8". Empty: nothing to add. Made by ring_chunks, chunks, row_chunks, column_chunks below,
  /// or model_tensors (model_where.hpp).
  std::function<std::string(std::size_t)> where = {};
};

/// A Context::where for a buffer of `length` elements cut as the ring cuts it (mgpu::ring_chunk:
/// `ranks` chunks, the first length % ranks of them one element longer): "chunk 2 of 4: elements
/// 6..8".
inline std::function<std::string(std::size_t)> ring_chunks(std::size_t length, int ranks) {
  return [length, ranks](std::size_t i) -> std::string {
    const auto n = static_cast<std::size_t>(std::max(ranks, 1));
    const std::size_t base = length / n, extra = length % n;
    // The first `extra` chunks hold base + 1 elements, the others base.
    const std::size_t c =
        i < extra * (base + 1) ? i / (base + 1) : extra + (i - extra * (base + 1)) / base;
    const std::size_t first = c * base + std::min(c, extra), count = base + (c < extra ? 1 : 0);
    return "chunk " + std::to_string(c) + " of " + std::to_string(n) + ": elements " +
           std::to_string(first) + ".." + std::to_string(first + count - 1);
  };
}

namespace detail {
// The chunk of `starts` (ascending, the first 0; the last ends at `end`) that holds position i,
// as "<word> <number>: <unit> <first>..<last>"; empty past the end.
inline std::string chunk_of(std::size_t i, const std::vector<std::size_t>& starts, std::size_t end,
                            const std::string& word, const std::vector<long long>& numbers,
                            const char* unit) {
  if (starts.empty() || i >= end) return "";
  const auto k = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), i) -
                                          starts.begin() - 1);
  const std::size_t last = (k + 1 < starts.size() ? starts[k + 1] : end) - 1;
  const long long number = k < numbers.size() ? numbers[k] : static_cast<long long>(k);
  return word + " " + std::to_string(number) + ": " + unit + " " + std::to_string(starts[k]) +
         ".." + std::to_string(last);
}
}  // namespace detail

/// A Context::where for an array cut into consecutive chunks of elements that start at `starts`
/// (ascending, the first 0) and end at `end`, chunk k going by "<word> <numbers[k]>" (numbers
/// empty: k): "rank 2: elements 24..35".
inline std::function<std::string(std::size_t)> chunks(std::vector<std::size_t> starts,
                                                      std::size_t end, std::string word = "chunk",
                                                      std::vector<long long> numbers = {}) {
  return [=](std::size_t i) { return detail::chunk_of(i, starts, end, word, numbers, "elements"); };
}

/// chunks for a matrix of `cols` columns cut into blocks of rows (`starts`, `end` in rows):
/// "rank 1: rows 4..7".
inline std::function<std::string(std::size_t)> row_chunks(std::size_t cols,
                                                          std::vector<std::size_t> starts,
                                                          std::size_t end, std::string word,
                                                          std::vector<long long> numbers = {}) {
  return
      [=](std::size_t i) { return detail::chunk_of(i / cols, starts, end, word, numbers, "rows"); };
}

/// chunks for a matrix of `cols` columns cut into blocks of columns (`starts`, `end` in
/// columns): "rank 1: columns 6..11".
inline std::function<std::string(std::size_t)> column_chunks(std::size_t cols,
                                                             std::vector<std::size_t> starts,
                                                             std::size_t end, std::string word,
                                                             std::vector<long long> numbers = {}) {
  return [=](std::size_t i) {
    return detail::chunk_of(i % cols, starts, end, word, numbers, "columns");
  };
}

/// Where two arrays differ, as check_close reports it.
struct Mismatch {
  std::size_t count = 0;      ///< elements outside the tolerance
  std::size_t first = 0;      ///< index of the first of them
  std::size_t worst = 0;      ///< index of the one furthest outside its tolerance
  double largest = 0;         ///< the largest |got - want| (infinite when a wrong element is NaN or
                              ///< infinite; 0 for equal arrays)
  std::size_t nan_count = 0;  ///< wrong elements that are NaN where a number is expected
  bool same_size = true;      ///< false: the sizes differ and nothing else was compared
  std::string report;         ///< the diagnosis, empty when count == 0
};

namespace detail {

/// "x[3]", "x[1, 2]", and the context's place: "x[7] (chunk 2 of 4: elements 6..8)".
inline std::string element_name(const std::string& label, std::size_t i, const Context& c,
                                std::size_t matrix_cols) {
  const std::size_t index = c.offset + i;
  const std::size_t cols = matrix_cols > 0 ? matrix_cols : c.cols;
  std::string name = label + "[";
  if (cols > 0)
    name += std::to_string(index / cols) + ", " + std::to_string(index % cols);
  else
    name += std::to_string(index);
  name += "]";
  if (c.where) {
    const std::string place = c.where(index);
    if (!place.empty()) name += " (" + place + ")";
  }
  return name;
}

/// How an element is judged: within the tolerance, bit for bit, or within a bound of its own.
struct Rule {
  enum Kind { tolerance, bits, bounds } kind = tolerance;
  std::function<double(std::size_t)> bound;  ///< element i's bound (kind == bounds)
};

/// The judgement every comparison shares: n elements, at(i) -> {got, want} as doubles, judged by
/// `rule`; `matrix_cols` > 0 names [row, column].
template <class At>
Mismatch compare_core(std::string_view label, std::size_t n, At at, Tolerance tol,
                      const Context& context, const Rule& rule, std::size_t matrix_cols) {
  Mismatch m;
  const std::string who = context.rank >= 0 ? "rank " + std::to_string(context.rank) + ": " : "";
  MismatchScan scan(tol);
  for (std::size_t i = 0; i < n; ++i) {
    const auto [got, want] = at(i);
    if (rule.kind == Rule::bits)
      scan.add_judged(i, got, want,
                      std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(want));
    else if (rule.kind == Rule::bounds)
      scan.add_judged(i, got, want,
                      std::isnan(want)
                          ? std::isnan(got)
                          : std::isfinite(got) && std::fabs(got - want) <= rule.bound(i));
    else
      scan.add(i, got, want);
  }
  m.count = scan.count;
  m.first = scan.first;
  m.worst = scan.worst;
  m.nan_count = scan.nan_count;
  m.largest = scan.non_finite > 0 ? INFINITY : scan.max_abs_error;
  if (m.count == 0) return m;

  const std::string name(label);
  auto line = [&](const char* prefix, std::size_t i) {
    const auto [got, want] = at(i);
    std::string s = "\n  " + element_line(prefix, element_name(name, i, context, matrix_cols),
                                          show(got), got, want);
    if (rule.kind == Rule::bounds) s += printf_string(", bound %.3g", rule.bound(i));
    return s;
  };
  std::string& r = m.report;
  r = who + name + ": " + std::to_string(m.count) + " of " + std::to_string(n) + " elements ";
  if (rule.kind == Rule::bits)
    r += "not bit for bit the expected ones";
  else if (rule.kind == Rule::bounds)
    r += "outside their own bounds, |got - expected| <= bound[i]";
  else
    r += "outside |got - expected| <= " + printf_string("%.3g", tol.atol) + " + " +
         printf_string("%.3g", tol.rtol) + " * |expected|";
  r += "; max abs error " + printf_string("%.3g", scan.max_abs_error) + ", max rel error " +
       printf_string("%.3g", scan.max_rel_error);
  if (m.nan_count)
    r += ", " + std::to_string(m.nan_count) + " NaN where the reference has a number";
  if (std::string hint = scan.factor_hint(name, context.ranks); !hint.empty())
    r += "\n  hint: " + hint;
  r += line("first wrong: ", m.first);
  if (m.worst != m.first) r += line("worst: ", m.worst);
  return m;
}

template <class Got, class Want>
Mismatch compare_arrays(std::string_view label, const Got& got, const Want& want, Tolerance tol,
                        const Context& context, const Rule& rule) {
  const auto n = static_cast<std::size_t>(got.size());
  const auto n_want = static_cast<std::size_t>(want.size());
  if (n != n_want) {
    Mismatch m;
    m.same_size = false;
    m.count = std::max(n, n_want);
    m.largest = INFINITY;
    m.report = (context.rank >= 0 ? "rank " + std::to_string(context.rank) + ": " : "") +
               std::string(label) + ": shape differs: got " + std::to_string(n) +
               " elements, expected " + std::to_string(n_want) + " elements";
    return m;
  }
  auto at = [&](std::size_t i) {
    return std::pair{static_cast<double>(got[i]), static_cast<double>(want[i])};
  };
  return compare_core(label, n, at, tol, context, rule, 0);
}

template <class Got, class Want>
Mismatch compare_matrices(std::string_view label, const Got& got, const Want& want, Tolerance tol,
                          const Context& context, const Rule& rule) {
  const auto rows = static_cast<std::size_t>(got.rows()),
             cols = static_cast<std::size_t>(got.cols());
  if (got.rows() != want.rows() || got.cols() != want.cols()) {
    Mismatch m;
    m.same_size = false;
    m.count = std::max(rows * cols, static_cast<std::size_t>(want.rows() * want.cols()));
    m.largest = INFINITY;
    m.report = (context.rank >= 0 ? "rank " + std::to_string(context.rank) + ": " : "") +
               std::string(label) + ": shape differs: got " + std::to_string(got.rows()) + "x" +
               std::to_string(got.cols()) + ", expected " + std::to_string(want.rows()) + "x" +
               std::to_string(want.cols());
    return m;
  }
  // Row by row, whatever the storage order, so that "first" is the first in reading order.
  auto at = [&](std::size_t i) {
    const auto r = static_cast<decltype(got.rows())>(i / cols);
    const auto c = static_cast<decltype(got.cols())>(i % cols);
    return std::pair{static_cast<double>(got(r, c)), static_cast<double>(want(r, c))};
  };
  // A vector (one row or one column) is named by its index alone.
  return compare_core(label, rows * cols, at, tol, context, rule,
                      rows == 1 || cols == 1 ? 0 : cols);
}

}  // namespace detail

/// A matrix (an Eigen matrix, block or Ref): rows(), cols() and (row, column) access. Such
/// arrays are compared in reading order and their elements named [row, column].
template <class M>
concept MatrixLike = requires(const M& m) {
  { m.rows() } -> std::convertible_to<long>;
  { m.cols() } -> std::convertible_to<long>;
  static_cast<double>(m(0, 0));
};

/// Compares got[i] with want[i] for every i as the grader does (numpy.isclose with want as b: NaN
/// matches only NaN); Got and Want are anything with size() and operator[] giving numbers
/// (std::vector, std::span, Buffer, an Eigen vector), or two matrices (MatrixLike). The report
/// reads, for example:
///
///     rank 2: grads: 3 of 3 elements outside |got - expected| <= 1e-06 + 0 * |expected|;
///     max abs error 6, max rel error 3
///       hint: every wrong element of grads is 4x the reference: summed over the 4 ranks ...
///       first wrong: grads[0]: got 2, expected 0.5 (4x, +1.5)
///       worst: grads[2]: got 8, expected 2 (4x, +6)
///
/// No doctest macro is used, so this is safe in any thread, a simulated rank's included.
template <class Got, class Want>
Mismatch compare(std::string_view label, const Got& got, const Want& want, Tolerance tol = {},
                 Context context = {}) {
  if constexpr (MatrixLike<Got> && MatrixLike<Want>)
    return detail::compare_matrices(label, got, want, tol, context, {});
  else
    return detail::compare_arrays(label, got, want, tol, context, {});
}

/// compare, but an element matches only when its bits are those of the expected one (as
/// doubles: a float widened keeps its bits' meaning, -0 and +0 differ): for replicas that must
/// stay bitwise identical, or a recomputation that must reproduce every bit.
template <class Got, class Want>
Mismatch compare_bits(std::string_view label, const Got& got, const Want& want,
                      Context context = {}) {
  const detail::Rule bits{detail::Rule::bits, {}};
  if constexpr (MatrixLike<Got> && MatrixLike<Want>)
    return detail::compare_matrices(label, got, want, {}, context, bits);
  else
    return detail::compare_arrays(label, got, want, {}, context, bits);
}

/// compare, but element i is judged against a bound of its own: |got[i] - want[i]| <=
/// bounds[i] (a rounding bound that depends on the inputs of each element, not on its expected
/// value). bounds has got's length; each wrong element's line shows its bound.
template <class Got, class Want, class Bounds>
Mismatch compare_within(std::string_view label, const Got& got, const Want& want,
                        const Bounds& bounds, Context context = {}) {
  if (static_cast<std::size_t>(bounds.size()) != static_cast<std::size_t>(got.size()))
    return detail::compare_arrays(label, got, bounds, {}, context, {});  // reports the sizes
  const detail::Rule rule{detail::Rule::bounds,
                          [&bounds](std::size_t i) { return static_cast<double>(bounds[i]); }};
  return detail::compare_arrays(label, got, want, {}, context, rule);
}

/// The largest |a[i]|: the scale for a tolerance relative to a whole array.
template <class A>
double max_abs(const A& a) {
  double m = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(a.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i])));
  return m;
}

/// The largest |got[i] - want[i]| (infinity when the sizes differ or a value is NaN where the
/// other is not): for code that gathers one error number per rank and checks them afterwards.
template <class Got, class Want>
double max_abs_diff(const Got& got, const Want& want) {
  return compare("", got, want, {INFINITY, 0}).largest;
}

/// A doctest check that got equals want within tol, element by element; on failure the report
/// names the rank (context.rank), the count, the first and the worst wrong element, the NaN and
/// the likely cause of a common factor. Returns whether it passed. Call it from the test's own
/// thread: compute the ranks' values in their threads, then check each here with its rank.
template <class Got, class Want>
bool check_close(std::string_view label, const Got& got, const Want& want, Tolerance tol = {},
                 Context context = {}) {
  const Mismatch m = compare(label, got, want, tol, context);
  CHECK_MESSAGE(m.count == 0, m.report);
  return m.count == 0;
}

/// check_close, but a failure ends the test case (doctest's REQUIRE): for a comparison inside a
/// loop over many configurations, whose later runs would only repeat the first failure's story.
template <class Got, class Want>
void require_close(std::string_view label, const Got& got, const Want& want, Tolerance tol = {},
                   Context context = {}) {
  const Mismatch m = compare(label, got, want, tol, context);
  REQUIRE_MESSAGE(m.count == 0, m.report);
}

/// A doctest check that got equals want bit for bit (compare_bits). Returns whether it passed.
template <class Got, class Want>
bool check_identical(std::string_view label, const Got& got, const Want& want,
                     Context context = {}) {
  const Mismatch m = compare_bits(label, got, want, context);
  CHECK_MESSAGE(m.count == 0, m.report);
  return m.count == 0;
}

/// A doctest check of compare_within. Returns whether it passed.
template <class Got, class Want, class Bounds>
bool check_within(std::string_view label, const Got& got, const Want& want, const Bounds& bounds,
                  Context context = {}) {
  const Mismatch m = compare_within(label, got, want, bounds, context);
  CHECK_MESSAGE(m.count == 0, m.report);
  return m.count == 0;
}

/// A tolerance of `atol` that a difference of exactly atol fails: |got - want| < atol, for a
/// test whose bound was always strict.
inline Tolerance below(double atol) { return {std::nextafter(atol, 0.0), 0}; }

/// The comparisons of a run's ranks, made in their threads and reported from the test's: each
/// rank compares its own values (compare(rank, ...) touches only that rank's slot, so no two
/// threads share anything), then the test's thread calls check() once, which reports the first
/// failing comparison of the lowest failing rank in full and counts the rest: one message for the
/// whole run, not one per rank or per element.
class RankChecks {
 public:
  explicit RankChecks(int ranks) : ranks_(static_cast<std::size_t>(std::max(ranks, 0))) {}

  /// In rank `rank`'s thread: compares got with want (compare, with the rank and the run's rank
  /// count in the context) and keeps the verdict. Returns whether they matched.
  template <class Got, class Want>
  bool compare(int rank, std::string_view label, const Got& got, const Want& want,
               Tolerance tol = {}, Context context = {}) {
    context.rank = rank;
    if (context.ranks == 0) context.ranks = static_cast<int>(ranks_.size());
    return keep(rank, mgpu_test::compare(label, got, want, tol, std::move(context)));
  }

  /// compare_bits in rank `rank`'s thread, kept as compare does.
  template <class Got, class Want>
  bool compare_bits(int rank, std::string_view label, const Got& got, const Want& want,
                    Context context = {}) {
    context.rank = rank;
    return keep(rank, mgpu_test::compare_bits(label, got, want, std::move(context)));
  }

  /// The largest |got - want| of any comparison so far (for a printed summary).
  double largest() const {
    double m = 0;
    for (const PerRank& r : ranks_) m = std::max(m, r.largest);
    return m;
  }

  /// Every rank's report of its first failing comparison, and how many failed in all; empty
  /// when all matched.
  std::string report() const {
    std::string first, others;
    std::size_t failed = 0, shown = 0;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      for (const std::string& f : ranks_[r].failures) {
        if (failed++ == 0) {
          first = f;
        } else if (shown < 3) {
          ++shown;
          others += "\n    " + f.substr(0, f.find(';'));
        }
      }
    }
    if (failed <= 1) return first;
    return first + "\n  and " + std::to_string(failed - 1) + " more failing comparison" +
           (failed == 2 ? "" : "s") + ", such as:" + others;
  }

  /// One doctest CHECK for the whole run; returns whether every comparison matched.
  bool check() const {
    const std::string r = report();
    CHECK_MESSAGE(r.empty(), r);
    return r.empty();
  }

  /// check(), but a failure ends the test case (REQUIRE).
  void require() const {
    const std::string r = report();
    REQUIRE_MESSAGE(r.empty(), r);
  }

 private:
  struct PerRank {
    std::vector<std::string> failures;  // the report of each failing comparison
    double largest = 0;
  };

  bool keep(int rank, const Mismatch& m) {
    PerRank& mine = ranks_.at(static_cast<std::size_t>(rank));
    mine.largest = std::max(mine.largest, m.largest);
    if (m.count == 0) return true;
    mine.failures.push_back(m.report);
    return false;
  }

  std::vector<PerRank> ranks_;
};

/// Where two sequences of things that are not numbers (a pipeline stage's actions) differ: ""
/// when they are equal, element by element; otherwise the first position where they differ, both
/// elements as `show` writes them, and both sequences whole (up to 40 elements each).
template <class T, class Show>
std::string sequence_mismatch(std::string_view label, const std::vector<T>& got,
                              const std::vector<T>& want, Show show) {
  std::size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  if (i == got.size() && i == want.size()) return "";
  auto all = [&](const std::vector<T>& v) {
    std::string s;
    for (std::size_t k = 0; k < v.size() && k < 40; ++k) s += (k ? ", " : "") + show(v[k]);
    return v.size() > 40 ? s + ", ..." : s;
  };
  std::string r = std::string(label) + ": ";
  if (i < got.size() && i < want.size())
    r += "position " + std::to_string(i) + " is " + show(got[i]) + ", expected " + show(want[i]);
  else if (i == got.size())
    r += "got " + std::to_string(got.size()) + " elements, expected " +
         std::to_string(want.size()) + ": " + show(want[i]) + " is missing at position " +
         std::to_string(i);
  else
    r += "got " + std::to_string(got.size()) + " elements, expected " +
         std::to_string(want.size()) + ": " + show(got[i]) + " at position " + std::to_string(i) +
         " is one too many";
  return r + "\n  got:      " + all(got) + "\n  expected: " + all(want);
}

/// A doctest check that two sequences are equal (sequence_mismatch's report on failure).
/// Returns whether it passed.
template <class T, class Show>
bool check_sequence(std::string_view label, const std::vector<T>& got, const std::vector<T>& want,
                    Show show) {
  const std::string r = sequence_mismatch(label, got, want, show);
  CHECK_MESSAGE(r.empty(), r);
  return r.empty();
}

}  // namespace mgpu_test
