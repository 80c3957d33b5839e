// The comparison core of the project: whether a number is close enough to the one it should
// equal and, over an array, how many elements are not, where the first and the worst of them
// are, which are NaN, and whether every wrong element is one clean multiple of the right one (a
// mistake with a cause: 4x on 4 ranks is a sum that should have been an average). The test
// helpers (check_close in compare.hpp) and the grader's judgement of a case
// (autograder/src/pipeline/compare.cpp) both diagnose through it, so a student reads the same words
// from the visible tests and from the grader. The GPU labs measure a whole output's error with the
// measures at the end of this file. Plain C++: no test framework, no JSON, no formatting library,
// and no shared state, so any program and any thread (a simulated rank's) may use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mgpu_test {

/// How closely two values must agree: |got - want| <= atol + rtol * |want|. The default, all
/// zero, asks for equality.
struct Tolerance {
  double atol = 0;  ///< absolute part
  double rtol = 0;  ///< relative part, scaled by |want|
};

/// numpy.isclose(got, want) with want as b (so the tolerance scales with the expected value, not
/// with the one being judged). NaN is close only to NaN, an infinity only to the same infinity.
inline bool is_close(double got, double want, Tolerance tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

namespace detail {
// Sized by a first call, so no message is ever cut short.
template <class... Args>
std::string printf_string(const char* format, Args... args) {
  const int length = std::snprintf(nullptr, 0, format, args...);
  if (length <= 0) return "";
  std::string out(static_cast<std::size_t>(length) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.pop_back();
  return out;
}
}  // namespace detail

/// A number as every report prints it: up to 10 significant digits, "NaN", "inf" or "-inf".
inline std::string show(double v) {
  if (std::isnan(v)) return "NaN";
  return detail::printf_string("%.10g", v);
}

/// " (2x, +4)": got as a multiple of want, and got - want, so that a scaling mistake and an
/// offset read at a glance. Only the difference when want is 0; empty unless both are finite.
inline std::string relation(double got, double want) {
  if (!std::isfinite(got) || !std::isfinite(want)) return "";
  if (want == 0) return detail::printf_string(" (%+.4g)", got - want);
  return detail::printf_string(" (%.3gx, %+.4g)", got / want, got - want);
}

/// One wrong element: "first wrong: v[3]: got 0.25, expected 0.2 (1.25x, +0.05)". prefix and
/// where are printed as given; got_text is how the judged value is shown (show(got), or the
/// text of something that is not a number at all, whose got is then nullopt).
inline std::string element_line(std::string_view prefix, std::string_view where,
                                std::string_view got_text, std::optional<double> got, double want) {
  std::string s(prefix);
  s.append(where).append(": got ").append(got_text).append(", expected ").append(show(want));
  if (got) s += relation(*got, want);
  return s;
}

/// The likely cause of a value whose every wrong element is `factor` times the right one, in a
/// run of `ranks` ranks (0 when unknown): ": summed over the 4 ranks instead of averaged?".
/// Empty when the factor suggests nothing.
inline std::string factor_cause(double factor, double ranks) {
  auto near = [&](double x) { return std::fabs(factor - x) <= 1e-3 * std::max(1.0, std::fabs(x)); };
  if (ranks > 1 && near(ranks))
    return detail::printf_string(": summed over the %g ranks instead of averaged?", ranks);
  if (ranks > 1 && std::fabs(factor * ranks - 1) < 1e-3)
    return detail::printf_string(": averaged twice, or divided by the %g ranks once too often?",
                                 ranks);
  if (near(-1)) return ": the sign is flipped (a minus lost or added)?";
  if (near(0)) return ": never written, or never received?";
  if (near(2)) return ": counted twice (added once too often, or reduced twice)?";
  if (near(0.5)) return ": half: a contribution missing, or divided by 2 once too often?";
  if (std::fabs(factor - std::round(factor)) < 1e-3 ||
      std::fabs(1 / factor - std::round(1 / factor)) < 1e-3)
    return ": a missing or extra factor?";
  return "";
}

/// One pass over the elements of an array, in index order, against the values they should
/// equal: the counts, the first and worst wrong element and the common factor, from which a
/// report is written.
class MismatchScan {
 public:
  explicit MismatchScan(Tolerance tol) : tol_(tol) {}

  /// Judges element i: got is nullopt when the judged value is not a number at all.
  void add(std::size_t i, std::optional<double> got, double want) {
    add_judged(i, got, want, got && is_close(*got, want, tol_));
  }

  /// Records element i as add does, but with the verdict given (`matches`) rather than the
  /// tolerance's: for a stricter judgement such as bit-for-bit identity.
  void add_judged(std::size_t i, std::optional<double> got, double want, bool matches) {
    ++compared;
    const bool finite = got && std::isfinite(*got) && std::isfinite(want);
    if (finite) {
      const double diff = std::fabs(*got - want);
      max_abs_error = std::max(max_abs_error, diff);
      if (want != 0) max_rel_error = std::max(max_rel_error, diff / std::fabs(want));
    }
    if (matches) return;
    if (got && std::isnan(*got) && !std::isnan(want)) ++nan_count;
    if (!finite) ++non_finite;
    // How far outside its tolerance: infinite for a non-number, so that it counts as the worst.
    const double excess =
        finite ? std::fabs(*got - want) - (tol_.atol + tol_.rtol * std::fabs(want)) : INFINITY;
    if (count == 0) first = i;
    if (count == 0 || excess > worst_excess_) worst_excess_ = excess, worst = i;
    ++count;
    watch_factor(got, want);
  }

  std::size_t compared = 0;    ///< elements judged
  std::size_t count = 0;       ///< of them, outside the tolerance
  std::size_t first = 0;       ///< index of the first wrong element (when count > 0)
  std::size_t worst = 0;       ///< index of the one furthest outside its tolerance
  std::size_t nan_count = 0;   ///< wrong elements that are NaN where a number is expected
  std::size_t non_finite = 0;  ///< wrong elements where either side is not a finite number
  double max_abs_error = 0;    ///< largest |got - want| over the finite pairs, right or wrong
  double max_rel_error = 0;    ///< largest |got - want| / |want| over the finite pairs, want != 0

  /// The one multiple of the expected value that every wrong element is (within 1e-3), if they
  /// are all finite, nonzero-expected and agree; nullopt otherwise.
  std::optional<double> common_factor() const {
    return count > 0 && factor_consistent_ ? factor_ : std::nullopt;
  }

  /// "every wrong element of grads is 4x the reference: summed over the 4 ranks instead of
  /// averaged?" (ranks: the run's rank count, 0 when unknown). Empty unless at least two wrong
  /// elements share one factor other than 1: a single element, or a factor of 1 (a rounding
  /// difference), says nothing about a cause.
  std::string factor_hint(std::string_view name, double ranks) const {
    const std::optional<double> f = common_factor();
    if (!f || count < 2 || std::fabs(*f - 1) < 1e-3) return "";
    std::string s = "every wrong element of ";
    s.append(name).append(" is ").append(detail::printf_string("%.3g", *f));
    return s + "x the reference" + factor_cause(*f, ranks);
  }

 private:
  void watch_factor(std::optional<double> got, double want) {
    if (!factor_consistent_) return;
    if (!got || want == 0 || !std::isfinite(*got) || !std::isfinite(want)) {
      factor_consistent_ = false;
      return;
    }
    const double r = *got / want;
    if (!factor_)
      factor_ = r;
    else if (std::fabs(r - *factor_) > 1e-3 * std::fabs(*factor_))
      factor_consistent_ = false;
  }

  Tolerance tol_;
  double worst_excess_ = 0;
  std::optional<double> factor_;
  bool factor_consistent_ = true;
};

// ---------------------------------------------------------------- one number per output
// What a GPU lab reports of an output computed in bf16 or fp32 against its fp64 reference: one
// error for the whole output, judged against the lab's tolerance.

namespace detail {
inline void check_lengths(std::size_t got, std::size_t want) {
  if (got != want)
    throw std::invalid_argument("error measure: the result has " + std::to_string(got) +
                                " elements but the reference has " + std::to_string(want));
}
}  // namespace detail

/// max_i |got_i - want_i| / max_i |want_i|: the largest error relative to the output's scale.
/// Element-wise relative error is meaningless near zeros, which bf16 outputs have plenty of.
/// Throws if the lengths differ. Returns 0 when both are all zeros, NaN when either holds a NaN
/// (so no tolerance accepts it), infinity for a nonzero result against an all-zero reference.
inline double scaled_max_error(std::span<const double> got, std::span<const double> want) {
  detail::check_lengths(got.size(), want.size());
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    // std::max(x, NaN) is x: a NaN anywhere has to be caught explicitly, or all-NaN output passes.
    if (std::isnan(got[i]) || std::isnan(want[i])) return std::numeric_limits<double>::quiet_NaN();
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  if (std::isnan(diff)) return diff;  // inf - inf
  if (scale == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
  return diff / scale;
}

/// ||got - want||_2 / ||want||_2 (Frobenius for matrices). Throws if the lengths differ. NaN in
/// either gives NaN, as above.
inline double norm_rel_error(std::span<const double> got, std::span<const double> want) {
  detail::check_lengths(got.size(), want.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (std::isnan(diff)) return diff;
  if (norm == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(diff / norm);
}

/// The larger of two errors, NaN if either is: for folding the errors of several outputs or
/// ranks into one, where std::max would drop a NaN that comes second.
inline double worse_error(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

/// True when `err` is a finite number no larger than `tol`: NaN and infinity never pass.
inline bool within_tolerance(double err, double tol) { return std::isfinite(err) && err <= tol; }

}  // namespace mgpu_test
