// Comparing a computed array with the one it should equal, for every test program of the project
// (runtime, chapters, tools). One place, so every test reports a mismatch the same useful way:
// how many elements are off, the first one and the worst one, each with its index, both values
// and the difference, rather than a bare "false".
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>

namespace mgpu_test {

/// How closely two values must agree: |got - want| <= atol + rtol * |want|. The default,
/// all zero, asks for equality.
struct Tolerance {
  double atol = 0;  ///< absolute part
  double rtol = 0;  ///< relative part, scaled by |want|
};

/// Where two arrays differ, as check_close reports it.
struct Mismatch {
  std::size_t count = 0;  ///< elements outside the tolerance
  std::size_t first = 0;  ///< index of the first of them
  std::size_t worst = 0;  ///< index of the largest |got - want| over all elements
  double largest = 0;     ///< that largest difference (0 for equal arrays)
  bool same_size = true;  ///< false: the sizes differ and nothing else was compared
  std::string report;     ///< one paragraph naming the above, empty when count == 0
};

/// Compares got[i] with want[i] for every i; Got and Want are anything with size() and
/// operator[] giving numbers (std::vector, std::span, Buffer, an Eigen vector). No doctest
/// macro is used, so this is safe in any thread, a simulated rank's included.
template <class Got, class Want>
Mismatch compare(std::string_view label, const Got& got, const Want& want, Tolerance tol = {}) {
  Mismatch m;
  const auto n = static_cast<std::size_t>(got.size());
  if (n != static_cast<std::size_t>(want.size())) {
    m.same_size = false;
    m.count = std::max<std::size_t>(n, static_cast<std::size_t>(want.size()));
    std::ostringstream out;
    out << label << ": " << n << " elements, expected " << want.size();
    m.report = out.str();
    return m;
  }
  auto at = [](const auto& a, std::size_t i) { return static_cast<double>(a[i]); };
  for (std::size_t i = 0; i < n; ++i) {
    const double g = at(got, i), w = at(want, i), diff = std::abs(g - w);
    // NaN on either side is a mismatch, and counts as the worst.
    const bool bad = !(diff <= tol.atol + tol.rtol * std::abs(w));
    if (bad && m.count++ == 0) m.first = i;
    if (!(diff <= m.largest)) {
      m.largest = std::isnan(diff) ? INFINITY : diff;
      m.worst = i;
    }
  }
  if (m.count > 0) {
    std::ostringstream out;
    out.precision(9);
    out << label << ": " << m.count << " of " << n << " elements differ by more than " << tol.atol
        << " + " << tol.rtol << " * |expected|\n  first at [" << m.first << "]: got "
        << at(got, m.first) << ", expected " << at(want, m.first) << "\n  worst at [" << m.worst
        << "]: got " << at(got, m.worst) << ", expected " << at(want, m.worst) << " (difference "
        << m.largest << ")";
    m.report = out.str();
  }
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

/// The largest |got[i] - want[i]| (infinity when the sizes differ or a value is NaN): for
/// code that gathers one error number per rank and checks them all afterwards.
template <class Got, class Want>
double max_abs_diff(const Got& got, const Want& want) {
  const Mismatch m = compare("", got, want, {INFINITY, 0});
  return m.same_size ? m.largest : INFINITY;
}

/// A doctest check that got equals want within tol, element by element; on failure the report
/// names the count, the first and the worst difference. Returns whether it passed. Call it from
/// the test's own thread (doctest's assertions are not for a simulated rank's thread).
template <class Got, class Want>
bool check_close(std::string_view label, const Got& got, const Want& want, Tolerance tol = {}) {
  const Mismatch m = compare(label, got, want, tol);
  CHECK_MESSAGE(m.count == 0, m.report);
  return m.count == 0;
}

}  // namespace mgpu_test
