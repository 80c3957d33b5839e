// numpy.isclose semantics with the reference as b, plus budget checks. Runs in the grader
// process only: nothing the student's program says is trusted beyond being a number. The
// feedback is written to point at the mistake: where the first wrong element is, which one is
// worst, and whether the wrong elements are all one clean multiple of the right ones. The
// element-wise judgement and those words come from the comparison core the visible tests share
// (testing/mgpu_test/mismatch.hpp), so the tests and the grader diagnose alike; what is the
// grader's own is reading the harness's JSON, the rubric's tolerances and the budgets.
#include "pipeline/compare.hpp"

#include <fmt/format.h>
#include <mgpu_test/mismatch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

namespace mgpu::grade {
namespace {

constexpr std::size_t kMaxMismatches = 5;

using mgpu_test::show;

// "weights[3]", or "peak_weights on rank 3" for a value emitted per rank.
std::string where(const std::string& name, bool scalar, bool per_rank, std::size_t i) {
  if (scalar) return name;
  return per_rank ? fmt::format("{} on rank {}", name, i) : fmt::format("{}[{}]", name, i);
}

// An element as the harness wrote it: a number (nullopt for anything else) and how to show it.
struct Element {
  std::optional<double> number;
  std::string text;
};

Element element(const nlohmann::json& raw) {
  double v = 0;
  if (!decode_number(raw, v)) return {std::nullopt, raw.dump()};
  return {v, show(v)};
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
  return mgpu_test::is_close(a, b, {.atol = t.atol, .rtol = t.rtol});
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

namespace {

// Both documents come through parse_result, so every field has its type; the checks here keep the
// judge from throwing even on a document that did not.
std::string text_field(const nlohmann::json& v, const char* key, const char* fallback) {
  auto it = v.is_object() ? v.find(key) : v.end();
  return it != v.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

// A value that cannot be compared element by element: one mismatch line, and the reason when it is
// the case's first.
void fail_value(Comparison& c, std::string line, std::string reason) {
  c.ok = false;
  c.mismatches.push_back(std::move(line));
  if (c.reason.empty()) c.reason = std::move(reason);
}

// One value's elements, student's (sd) against the reference's (rd), of the same shape: folds its
// errors into c and returns how many elements lie outside tolerance.
std::size_t compare_elements(Comparison& c, const std::string& name, const nlohmann::json& sd,
                             const nlohmann::json& rd, bool per_rank, Tolerance tol,
                             std::optional<double> ranks) {
  const bool ref_scalar = !rd.is_array();
  const std::size_t n = ref_scalar ? 1 : rd.size();
  mgpu_test::MismatchScan scan({.atol = tol.atol, .rtol = tol.rtol});
  auto element_of = [&](const nlohmann::json& data, std::size_t i) -> const nlohmann::json& {
    return ref_scalar ? data : data[i];
  };
  auto line = [&](std::size_t i, const char* label) {
    Element got = element(element_of(sd, i));
    double b = 0;
    decode_number(element_of(rd, i), b);
    return mgpu_test::element_line(label, where(name, ref_scalar, per_rank, i), got.text,
                                   got.number, b);
  };
  for (std::size_t i = 0; i < n; ++i) {
    double b = 0;
    if (!decode_number(element_of(rd, i), b)) continue;  // the reference never writes anything else
    scan.add(i, element(element_of(sd, i)).number, b);
  }
  c.max_abs_error = std::max(c.max_abs_error, scan.max_abs_error);
  c.max_rel_error = std::max(c.max_rel_error, scan.max_rel_error);
  c.nan_count += scan.nan_count;
  const std::size_t bad = scan.count, first = scan.first, worst = scan.worst;
  if (!bad) return 0;
  c.ok = false;
  if (c.mismatches.size() < kMaxMismatches)
    c.mismatches.push_back(line(first, ref_scalar ? "" : "first wrong: "));
  if (!ref_scalar && worst != first && c.mismatches.size() < kMaxMismatches)
    c.mismatches.push_back(line(worst, "worst: "));
  if (std::string h = scan.factor_hint(name, ranks.value_or(0)); !h.empty()) c.hints.push_back(h);
  if (c.reason.empty()) {
    std::string at = ref_scalar ? ""
                                : (per_rank ? fmt::format(" on rank {}", first)
                                            : fmt::format(" at [{}]", first));
    c.reason = ref_scalar ? fmt::format("{} outside tolerance", name)
                          : fmt::format("{}: {} of {} elements outside tolerance, first{}", name,
                                        bad, n, at);
    if (!c.hints.empty()) c.reason += " (" + c.hints.front() + ")";
  }
  return bad;
}

// One value the reference emits: its tolerance noted in c, then missing, shape or elements.
// Returns how many elements lie outside tolerance.
std::size_t compare_value(Comparison& c, const std::string& name, const nlohmann::json& ref,
                          const nlohmann::json& student_values, const Rubric& rubric,
                          const CaseSpec& spec, std::optional<double> ranks) {
  if (!ref.is_object() || !ref.contains("data")) {
    fail_value(c, fmt::format("{}: the reference's value is unreadable", name),
               fmt::format("the reference's value '{}' is unreadable", name));
    return 0;
  }
  std::string dtype = text_field(ref, "dtype", "fp64");
  Tolerance tol = rubric.tolerance_for(spec, name, dtype);
  c.tolerances += fmt::format("{}{} {} (rtol {:g}, atol {:g})", c.tolerances.empty() ? "" : "; ",
                              name, spec.dtype.value_or(dtype), tol.rtol, tol.atol);
  if (!student_values.is_object() || !student_values.contains(name)) {
    fail_value(c, fmt::format("{}: missing (the reference emits it)", name),
               fmt::format("value '{}' missing", name));
    return 0;
  }
  const auto& st = student_values.at(name);
  const auto& rd = ref.at("data");
  const nlohmann::json sd =
      st.is_object() && st.contains("data") ? st.at("data") : nlohmann::json();
  const bool ref_scalar = !rd.is_array(), st_scalar = !sd.is_array();
  if (ref_scalar != st_scalar || (!ref_scalar && rd.size() != sd.size())) {
    std::string what = fmt::format("{}: shape differs: got {}, expected {}", name,
                                   st_scalar ? "a scalar" : fmt::format("{} elements", sd.size()),
                                   ref_scalar ? "a scalar" : fmt::format("{} elements", rd.size()));
    fail_value(c, what, what);
    return 0;
  }
  const bool per_rank = text_field(ref, "index", "") == "rank";
  return compare_elements(c, name, sd, rd, per_rank, tol, ranks);
}

}  // namespace

Comparison compare_values(const nlohmann::json& student_values,
                          const nlohmann::json& reference_values, const Rubric& rubric,
                          const CaseSpec& spec) {
  Comparison c;
  std::size_t bad_total = 0;
  const std::optional<double> ranks = scalar_value(reference_values, "ranks");
  if (!reference_values.is_object()) {
    c.ok = false;
    c.reason = "the reference's values are unreadable";
    return c;
  }
  for (const auto& item : reference_values.items())
    bad_total += compare_value(c, item.key(), item.value(), student_values, rubric, spec, ranks);
  if (!c.ok && c.reason.empty()) c.reason = fmt::format("{} elements outside tolerance", bad_total);
  if (!c.ok) {
    c.reason += fmt::format(" (max abs error {:.3g}, max rel error {:.3g}", c.max_abs_error,
                            c.max_rel_error);
    if (c.nan_count) c.reason += fmt::format(", {} NaN", c.nan_count);
    c.reason += ")";
  }
  return c;
}

namespace {

// The error of one GPU lab output by the case's measure; NaN when either side has a NaN.
double lab_error(const std::vector<double>& a, const std::vector<double>& b, LabError measure) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::nan("");
    const double d = std::fabs(a[i] - b[i]);
    if (measure == LabError::max_rel) {
      diff = std::max(diff, d);
      scale = std::max(scale, std::fabs(b[i]));
    } else {
      diff += d * d;
      scale += b[i] * b[i];
    }
  }
  if (std::isnan(diff)) return diff;  // inf - inf
  if (scale == 0) return diff == 0 ? 0 : INFINITY;
  return measure == LabError::max_rel ? diff / scale : std::sqrt(diff / scale);
}

// A JSON array of numbers ("nan", "inf" as text); false if anything else is in it.
bool decode_array(const nlohmann::json& j, std::vector<double>& out) {
  if (!j.is_array()) return false;
  out.resize(j.size());
  for (std::size_t i = 0; i < j.size(); ++i)
    if (!decode_number(j[i], out[i])) return false;
  return true;
}

// One lab output of equal length on both sides, folded into cmp: its error by the case's
// measure, the largest absolute difference and the NaNs where the reference has a number.
void compare_lab_output(Comparison& cmp, const std::string& name, const std::vector<double>& got,
                        const std::vector<double>& want, const GpuLabCase& c) {
  const char* measure = c.error == LabError::max_rel ? "max_rel" : "norm_rel";
  const double e = lab_error(got, want, c.error);
  cmp.max_rel_error = std::isnan(e) || std::isnan(cmp.max_rel_error)
                          ? std::nan("")
                          : std::max(cmp.max_rel_error, e);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && !std::isnan(want[i])) ++cmp.nan_count;
    if (!std::isnan(got[i]) && !std::isnan(want[i]))
      cmp.max_abs_error = std::max(cmp.max_abs_error, std::fabs(got[i] - want[i]));
  }
  if (!(e <= c.tolerance)) {
    const std::string line =
        fmt::format("{}: {} error {:.3g} over the tolerance {:g}", name, measure, e, c.tolerance);
    fail_value(cmp, line, line);
  }
}

}  // namespace

Comparison compare_lab_values(const nlohmann::json& student, const nlohmann::json& reference,
                              const GpuLabCase& c) {
  Comparison cmp;
  const char* measure = c.error == LabError::max_rel ? "max_rel" : "norm_rel";
  cmp.tolerances = fmt::format("every output: {} error <= {:g}", measure, c.tolerance);
  auto fail = [&](const std::string& line) { fail_value(cmp, line, line); };
  if (!reference.is_object() || reference.empty()) {
    fail("the reference lab wrote no outputs");
    return cmp;
  }
  for (const auto& [name, ref] : reference.items()) {
    std::vector<double> want, got;
    if (!decode_array(ref, want))
      fail(fmt::format("{}: the reference's output is not an array of numbers", name));
    else if (!student.is_object() || !student.contains(name))
      fail(fmt::format("{}: missing (the reference lab writes it)", name));
    else if (!decode_array(student[name], got))
      fail(fmt::format("{}: not an array of numbers", name));
    else if (got.size() != want.size())
      fail(fmt::format("{}: {} elements, the reference has {}", name, got.size(), want.size()));
    else
      compare_lab_output(cmp, name, got, want, c);
  }
  return cmp;
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
    // What the numbers show, not why: a floor names the least a correct algorithm sends.
    r.line = fmt::format("{} {} = {:.3g}x the reference's {}, under the floor of {:g}x{}",
                         b.measure, show(r.student), ratio, show(r.reference), *b.min_factor,
                         b.below.empty() ? "" : ": " + b.below);
  }
  return r;
}

}  // namespace mgpu::grade
