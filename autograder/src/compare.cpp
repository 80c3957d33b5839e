// numpy.isclose semantics with the reference as b, plus budget checks. Runs in the grader
// process only: nothing the student's program says is trusted beyond being a number. The
// feedback is written to point at the mistake: where the first wrong element is, which one is
// worst, and whether the wrong elements are all one clean multiple of the right ones.
#include "compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace mgpu::grade {
namespace {

constexpr std::size_t kMaxMismatches = 5;

std::string show(double v) { return fmt::format("{:.10g}", v); }

// "weights[3]", or "peak_weights on rank 3" for a value emitted per rank.
std::string where(const std::string& name, bool scalar, bool per_rank, std::size_t i) {
  if (scalar) return name;
  return per_rank ? fmt::format("{} on rank {}", name, i) : fmt::format("{}[{}]", name, i);
}

std::string describe(const nlohmann::json& raw, bool decoded, double a) {
  if (!decoded) return raw.dump();
  return std::isnan(a) ? "NaN" : show(a);
}

// got/expected as "2.00x (+2048)" so a scaling or an offset mistake reads at a glance.
std::string relation(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return "";
  std::string s =
      b != 0 ? fmt::format(" ({:.3g}x, {:+.4g})", a / b, a - b) : fmt::format(" ({:+.4g})", a - b);
  return s;
}

// Tracks whether every wrong element of a value is the same multiple of the reference.
struct FactorWatch {
  std::optional<double> factor;
  bool consistent = true;
  void add(double a, double b) {
    if (!consistent) return;
    if (b == 0 || !std::isfinite(a) || !std::isfinite(b)) {
      consistent = false;
      return;
    }
    double r = a / b;
    if (!factor)
      factor = r;
    else if (std::fabs(r - *factor) > 1e-3 * std::fabs(*factor))
      consistent = false;
  }
};

// "every wrong element of grads is 4.00x the reference: summed over the 4 ranks instead of
// averaged?"
std::string factor_hint(const std::string& name, const FactorWatch& w, std::size_t bad,
                        std::optional<double> ranks) {
  if (!w.consistent || !w.factor || bad < 2) return "";
  double f = *w.factor;
  if (std::fabs(f - 1) < 1e-3) return "";
  std::string s = fmt::format("every wrong element of {} is {:.3g}x the reference", name, f);
  if (ranks && *ranks > 1) {
    double n = *ranks;
    if (std::fabs(f - n) < 1e-3 * n)
      s += fmt::format(": summed over the {:g} ranks instead of averaged?", n);
    else if (std::fabs(f * n - 1) < 1e-3)
      s += fmt::format(": divided by the {:g} ranks once too often?", n);
  } else if (std::fabs(f - std::round(f)) < 1e-3 || std::fabs(1 / f - std::round(1 / f)) < 1e-3) {
    s += ": a missing or extra factor?";
  }
  return s;
}

std::optional<double> scalar_value(const nlohmann::json& values, const char* name) {
  double v = 0;
  if (values.is_object() && values.contains(name) && values.at(name).is_object() &&
      values.at(name).contains("data") && decode_number(values.at(name).at("data"), v))
    return v;
  return std::nullopt;
}

}  // namespace

bool decode_number(const nlohmann::json& j, double& out) {
  if (j.is_number()) {
    out = j.get<double>();
    return true;
  }
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan")
      out = std::nan("");
    else if (s == "inf")
      out = INFINITY;
    else if (s == "-inf")
      out = -INFINITY;
    else
      return false;
    return true;
  }
  return false;
}

bool is_close(double a, double b, Tolerance t) {
  if (std::isnan(b)) return std::isnan(a);
  if (std::isinf(b)) return a == b;
  if (!std::isfinite(a)) return false;
  return std::fabs(a - b) <= t.atol + t.rtol * std::fabs(b);
}

std::string Comparison::detail() const {
  std::string s;
  if (!hints.empty())
    for (const auto& h : hints) s += "hint: " + h + "\n";
  s += fmt::format("max abs error {:.3g}, max rel error {:.3g}", max_abs_error, max_rel_error);
  if (nan_count) s += fmt::format(", {} NaN where the reference has a number", nan_count);
  for (const auto& m : mismatches) s += "\n  " + m;
  if (!tolerances.empty()) s += "\ntolerances: " + tolerances;
  return s;
}

Comparison compare_values(const nlohmann::json& student_values,
                          const nlohmann::json& reference_values, const Rubric& rubric,
                          const CaseSpec& spec) {
  Comparison c;
  std::size_t bad_total = 0;
  const std::optional<double> ranks = scalar_value(reference_values, "ranks");
  for (const auto& [name, ref] : reference_values.items()) {
    std::string dtype = ref.value("dtype", "fp64");
    Tolerance tol = rubric.tolerance_for(spec, name, dtype);
    c.tolerances += fmt::format("{}{} {} (rtol {:g}, atol {:g})", c.tolerances.empty() ? "" : "; ",
                                name, spec.dtype.value_or(dtype), tol.rtol, tol.atol);
    if (!student_values.is_object() || !student_values.contains(name)) {
      c.ok = false;
      c.mismatches.push_back(fmt::format("{}: missing (the reference emits it)", name));
      if (c.reason.empty()) c.reason = fmt::format("value '{}' missing", name);
      continue;
    }
    const auto& st = student_values.at(name);
    const auto& rd = ref.at("data");
    const bool per_rank = ref.value("index", "") == "rank";
    const nlohmann::json sd =
        st.is_object() && st.contains("data") ? st.at("data") : nlohmann::json();
    bool ref_scalar = !rd.is_array();
    bool st_scalar = !sd.is_array();
    if (ref_scalar != st_scalar || (!ref_scalar && rd.size() != sd.size())) {
      c.ok = false;
      std::string what =
          fmt::format("{}: shape differs: got {}, expected {}", name,
                      st_scalar ? "a scalar" : fmt::format("{} elements", sd.size()),
                      ref_scalar ? "a scalar" : fmt::format("{} elements", rd.size()));
      c.mismatches.push_back(what);
      if (c.reason.empty()) c.reason = what;
      continue;
    }
    std::size_t n = ref_scalar ? 1 : rd.size();
    std::size_t bad = 0, first = 0, worst = 0;
    double worst_excess = -1;
    FactorWatch factor;
    auto line = [&](std::size_t i, const char* label) {
      const auto& ja = ref_scalar ? sd : sd[i];
      const auto& jb = ref_scalar ? rd : rd[i];
      double a = 0, b = 0;
      bool oka = decode_number(ja, a);
      decode_number(jb, b);
      return fmt::format("{}{}: got {}, expected {}{}", label, where(name, ref_scalar, per_rank, i),
                         describe(ja, oka, a), show(b), oka ? relation(a, b) : "");
    };
    for (std::size_t i = 0; i < n; ++i) {
      double a = 0, b = 0;
      const auto& ja = ref_scalar ? sd : sd[i];
      const auto& jb = ref_scalar ? rd : rd[i];
      bool okb = decode_number(jb, b);
      bool oka = decode_number(ja, a);
      if (!okb) continue;  // the reference never writes anything else
      if (oka && std::isfinite(a) && std::isfinite(b)) {
        double abs = std::fabs(a - b);
        c.max_abs_error = std::max(c.max_abs_error, abs);
        if (b != 0) c.max_rel_error = std::max(c.max_rel_error, abs / std::fabs(b));
      }
      if (oka && is_close(a, b, tol)) continue;
      if (oka && std::isnan(a) && !std::isnan(b)) ++c.nan_count;
      // How far outside its tolerance: infinite for a non-number, so it is the worst.
      double excess = oka && std::isfinite(a) && std::isfinite(b)
                          ? std::fabs(a - b) - (tol.atol + tol.rtol * std::fabs(b))
                          : INFINITY;
      if (bad == 0) first = i;
      if (excess > worst_excess) worst_excess = excess, worst = i;
      if (oka)
        factor.add(a, b);
      else
        factor.consistent = false;
      ++bad;
    }
    if (!bad) continue;
    c.ok = false;
    bad_total += bad;
    if (c.mismatches.size() < kMaxMismatches)
      c.mismatches.push_back(line(first, ref_scalar ? "" : "first wrong: "));
    if (!ref_scalar && worst != first && c.mismatches.size() < kMaxMismatches)
      c.mismatches.push_back(line(worst, "worst: "));
    if (std::string h = factor_hint(name, factor, bad, ranks); !h.empty()) c.hints.push_back(h);
    if (c.reason.empty()) {
      std::string at = ref_scalar ? ""
                                  : (per_rank ? fmt::format(" on rank {}", first)
                                              : fmt::format(" at [{}]", first));
      c.reason = ref_scalar ? fmt::format("{} outside tolerance", name)
                            : fmt::format("{}: {} of {} elements outside tolerance, first{}", name,
                                          bad, n, at);
      if (!c.hints.empty()) c.reason += " (" + c.hints.front() + ")";
    }
  }
  if (!c.ok && c.reason.empty()) c.reason = fmt::format("{} elements outside tolerance", bad_total);
  if (!c.ok) {
    c.reason += fmt::format(" (max abs error {:.3g}, max rel error {:.3g}", c.max_abs_error,
                            c.max_rel_error);
    if (c.nan_count) c.reason += fmt::format(", {} NaN", c.nan_count);
    c.reason += ")";
  }
  return c;
}

BudgetCheck check_budget(const Budget& b, const nlohmann::json& student_measures,
                         const nlohmann::json& reference_measures) {
  BudgetCheck r;
  if (!reference_measures.is_object() || !reference_measures.contains(b.measure) ||
      !decode_number(reference_measures.at(b.measure), r.reference)) {
    r.line = fmt::format(
        "{}: the reference did not measure it (rubric names a measure the case lacks)", b.measure);
    return r;
  }
  if (!student_measures.is_object() || !student_measures.contains(b.measure) ||
      !decode_number(student_measures.at(b.measure), r.student)) {
    r.line = fmt::format("{}: not measured in this run", b.measure);
    r.below_floor = b.min_factor.has_value();
    return r;
  }
  double limit = r.reference * b.factor;
  r.ok = std::isfinite(r.student) && r.student <= limit;
  double ratio = r.reference != 0 ? r.student / r.reference : (r.student == 0 ? 1.0 : INFINITY);
  r.line = fmt::format("{} {} = {:.3g}x the reference's {} (budget {:g}x)", b.measure,
                       show(r.student), ratio, show(r.reference), b.factor);
  if (b.min_factor && !(r.student >= r.reference * *b.min_factor)) {
    r.below_floor = true;
    r.ok = false;
    r.line = fmt::format("{} {} is below what any correct code needs ({:g}x the reference's {}){}",
                         b.measure, show(r.student), *b.min_factor, show(r.reference),
                         b.below.empty() ? "" : ": " + b.below);
  }
  return r;
}

}  // namespace mgpu::grade
