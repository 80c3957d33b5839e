// numpy.isclose semantics with the reference as b, plus budget checks. Runs in the grader
// process only: nothing the student's program says is trusted beyond being a number.
#include "compare.hpp"

#include <fmt/format.h>

#include <cmath>

namespace mgpu::grade {
namespace {

constexpr std::size_t kMaxMismatches = 5;

std::string show(double v) { return fmt::format("{:.10g}", v); }

}  // namespace

bool decode_number(const nlohmann::json& j, double& out) {
  if (j.is_number()) {
    out = j.get<double>();
    return true;
  }
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan") out = std::nan("");
    else if (s == "inf") out = INFINITY;
    else if (s == "-inf") out = -INFINITY;
    else return false;
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
  std::string s = fmt::format("max abs error {:.3g}, max rel error {:.3g}", max_abs_error, max_rel_error);
  for (const auto& m : mismatches) s += "\n  " + m;
  return s;
}

Comparison compare_values(const nlohmann::json& student_values, const nlohmann::json& reference_values,
                          const Rubric& rubric, const CaseSpec& spec) {
  Comparison c;
  std::size_t bad_total = 0;
  std::string first_bad_value;
  for (const auto& [name, ref] : reference_values.items()) {
    if (!student_values.is_object() || !student_values.contains(name)) {
      c.ok = false;
      c.mismatches.push_back(fmt::format("{}: missing (the reference emits it)", name));
      if (c.reason.empty()) c.reason = fmt::format("value '{}' missing", name);
      continue;
    }
    const auto& st = student_values.at(name);
    std::string dtype = ref.value("dtype", "fp64");
    Tolerance tol = rubric.tolerance_for(spec, name, dtype);
    const auto& rd = ref.at("data");
    const nlohmann::json sd = st.is_object() && st.contains("data") ? st.at("data") : nlohmann::json();
    bool ref_scalar = !rd.is_array();
    bool st_scalar = !sd.is_array();
    if (ref_scalar != st_scalar || (!ref_scalar && rd.size() != sd.size())) {
      c.ok = false;
      std::string what = fmt::format("{}: shape differs: got {}, expected {}", name,
                                     st_scalar ? "a scalar" : fmt::format("{} elements", sd.size()),
                                     ref_scalar ? "a scalar" : fmt::format("{} elements", rd.size()));
      c.mismatches.push_back(what);
      if (c.reason.empty()) c.reason = what;
      continue;
    }
    std::size_t n = ref_scalar ? 1 : rd.size();
    std::size_t bad = 0;
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
      ++bad;
      if (c.mismatches.size() < kMaxMismatches) {
        std::string where = ref_scalar ? name : fmt::format("{}[{}]", name, i);
        c.mismatches.push_back(fmt::format("{}: got {}, expected {} (rtol {:g}, atol {:g})", where,
                                           oka ? show(a) : ja.dump(), show(b), tol.rtol, tol.atol));
      }
    }
    if (bad) {
      c.ok = false;
      bad_total += bad;
      if (first_bad_value.empty()) {
        first_bad_value = name;
        if (c.reason.empty())
          c.reason = ref_scalar ? fmt::format("{} outside tolerance", name)
                                : fmt::format("{}: {} of {} elements outside tolerance", name, bad, n);
      }
    }
  }
  if (!c.ok && c.reason.empty()) c.reason = fmt::format("{} elements outside tolerance", bad_total);
  if (!c.ok) c.reason += fmt::format(" (max abs error {:.3g}, max rel error {:.3g})", c.max_abs_error, c.max_rel_error);
  return c;
}

BudgetCheck check_budget(const Budget& b, const nlohmann::json& student_measures, const nlohmann::json& reference_measures) {
  BudgetCheck r;
  if (!reference_measures.is_object() || !reference_measures.contains(b.measure) ||
      !decode_number(reference_measures.at(b.measure), r.reference)) {
    r.line = fmt::format("{}: the reference did not measure it (rubric names a measure the case lacks)", b.measure);
    return r;
  }
  if (!student_measures.is_object() || !student_measures.contains(b.measure) ||
      !decode_number(student_measures.at(b.measure), r.student)) {
    r.line = fmt::format("{}: not measured in this run", b.measure);
    return r;
  }
  double limit = r.reference * b.factor;
  r.ok = std::isfinite(r.student) && r.student <= limit;
  double ratio = r.reference != 0 ? r.student / r.reference : (r.student == 0 ? 1.0 : INFINITY);
  r.line = fmt::format("{} {} = {:.3g}x the reference's {} (budget {:g}x)", b.measure, show(r.student), ratio,
                       show(r.reference), b.factor);
  return r;
}

}  // namespace mgpu::grade
