// Comparing a computed array with the one it should equal, for every test program of the project
// (runtime, chapters, tools). One place, so every test reports a mismatch the way the grader does
// (the diagnosis comes from the same core, mismatch.hpp): how many elements are off, the first
// and the worst one with both values, how many are NaN, and, when every wrong element is the
// same multiple of the right one, the likely cause ("4x the reference: summed over the 4 ranks
// instead of averaged?"), rather than a bare "false".
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

#include "mismatch.hpp"

namespace mgpu_test {

/// Whose value is compared, for the report: the rank that computed it ("rank 2: ..."; -1 for
/// none) and the run's rank count, which names the cause when every wrong element is that many
/// times (or one over that many times) the right one. Both optional:
/// `check_close("grads", got, want, tol, {.rank = r, .ranks = 4})`.
struct Context {
  int rank = -1;  ///< the rank whose value this is; -1: not one rank's
  int ranks = 0;  ///< ranks in the run; 0: unknown
};

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

/// Compares got[i] with want[i] for every i as the grader does (numpy.isclose with want as b: NaN
/// matches only NaN); Got and Want are anything with size() and operator[] giving numbers
/// (std::vector, std::span, Buffer, an Eigen vector). The report reads, for example:
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
  Mismatch m;
  const std::string who = context.rank >= 0 ? "rank " + std::to_string(context.rank) + ": " : "";
  const auto n = static_cast<std::size_t>(got.size());
  const auto n_want = static_cast<std::size_t>(want.size());
  if (n != n_want) {
    m.same_size = false;
    m.count = std::max(n, n_want);
    m.largest = INFINITY;
    m.report = who + std::string(label) + ": shape differs: got " + std::to_string(n) +
               " elements, expected " + std::to_string(n_want) + " elements";
    return m;
  }
  auto at = [](const auto& a, std::size_t i) { return static_cast<double>(a[i]); };
  MismatchScan scan(tol);
  for (std::size_t i = 0; i < n; ++i) scan.add(i, at(got, i), at(want, i));
  m.count = scan.count;
  m.first = scan.first;
  m.worst = scan.worst;
  m.nan_count = scan.nan_count;
  m.largest = scan.non_finite > 0 ? INFINITY : scan.max_abs_error;
  if (m.count == 0) return m;

  const std::string name(label);
  auto line = [&](const char* prefix, std::size_t i) {
    return "\n  " + element_line(prefix, name + "[" + std::to_string(i) + "]", show(at(got, i)),
                                 at(got, i), at(want, i));
  };
  std::string& r = m.report;
  r = who + name + ": " + std::to_string(m.count) + " of " + std::to_string(n) +
      " elements outside |got - expected| <= " + detail::printf_string("%.3g", tol.atol) + " + " +
      detail::printf_string("%.3g", tol.rtol) + " * |expected|; max abs error " +
      detail::printf_string("%.3g", scan.max_abs_error) + ", max rel error " +
      detail::printf_string("%.3g", scan.max_rel_error);
  if (m.nan_count)
    r += ", " + std::to_string(m.nan_count) + " NaN where the reference has a number";
  if (std::string hint = scan.factor_hint(name, context.ranks); !hint.empty())
    r += "\n  hint: " + hint;
  r += line("first wrong: ", m.first);
  if (m.worst != m.first) r += line("worst: ", m.worst);
  return m;
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

}  // namespace mgpu_test
