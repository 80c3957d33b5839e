// The comparison is numpy.isclose with the reference as b; budgets compare measured costs.
#include <doctest/doctest.h>

#include <cmath>

#include "compare.hpp"

using namespace mgpu::grade;
using nlohmann::json;

namespace {

Rubric rubric_with_fp64(double rtol, double atol) {
  Rubric r = parse_rubric(R"({"chapters": {}})", "test.json");
  r.dtype_tolerance["fp64"] = {rtol, atol};
  return r;
}

json value(json data, const char* dtype = "fp64") { return {{"dtype", dtype}, {"data", std::move(data)}}; }

}  // namespace

TEST_CASE("is_close follows numpy.isclose with the reference as b") {
  Tolerance t{1e-3, 1e-6};
  CHECK(is_close(1.0005, 1.0, t));
  CHECK_FALSE(is_close(1.002, 1.0, t));
  CHECK(is_close(5e-7, 0.0, t));  // atol carries values near zero
  CHECK_FALSE(is_close(2e-6, 0.0, t));
  // asymmetric: the tolerance scales with the reference, not the student's value
  Tolerance r{0.5, 0};
  CHECK(is_close(2.0, 4.0, r));        // |2 - 4| <= 0.5 * 4
  CHECK_FALSE(is_close(4.0, 2.0, r));  // |4 - 2| >  0.5 * 2
}

TEST_CASE("NaN and infinities must be exactly where the reference has them") {
  Tolerance t{1e-3, 1e-3};
  CHECK(is_close(std::nan(""), std::nan(""), t));
  CHECK_FALSE(is_close(1.0, std::nan(""), t));
  CHECK_FALSE(is_close(std::nan(""), 1.0, t));
  CHECK(is_close(INFINITY, INFINITY, t));
  CHECK_FALSE(is_close(-INFINITY, INFINITY, t));
  CHECK_FALSE(is_close(1e308, INFINITY, t));
  CHECK_FALSE(is_close(INFINITY, 1e308, t));
}

TEST_CASE("compare_values reports the first mismatches and the largest errors") {
  Rubric r = rubric_with_fp64(1e-6, 0);
  CaseSpec spec;
  json ref = {{"v", value({1.0, 2.0, 3.0, 4.0})}, {"s", value(10.0)}};
  json good = {{"v", value({1.0, 2.0, 3.0, 4.0})}, {"s", value(10.0 + 1e-9)}};
  Comparison ok = compare_values(good, ref, r, spec);
  CHECK(ok.ok);
  json bad = {{"v", value({1.0, 2.5, 3.0, 8.0})}, {"s", value(10.0)}};
  Comparison c = compare_values(bad, ref, r, spec);
  MESSAGE("reason: " << c.reason << "; max abs " << c.max_abs_error << ", max rel " << c.max_rel_error);
  CHECK_FALSE(c.ok);
  CHECK(c.max_abs_error == doctest::Approx(4.0));
  CHECK(c.max_rel_error == doctest::Approx(1.0));
  REQUIRE(c.mismatches.size() == 2);
  CHECK(c.mismatches[0].find("v[1]") == 0);
  CHECK(c.reason.find("2 of 4 elements") != std::string::npos);
}

TEST_CASE("a missing value, a wrong shape and non-numbers are wrong answers") {
  Rubric r = rubric_with_fp64(1e-6, 0);
  CaseSpec spec;
  json ref = {{"v", value({1.0, 2.0})}};
  CHECK_FALSE(compare_values(json::object(), ref, r, spec).ok);
  CHECK_FALSE(compare_values(json{{"v", value({1.0})}}, ref, r, spec).ok);
  CHECK_FALSE(compare_values(json{{"v", value(1.0)}}, ref, r, spec).ok);
  CHECK_FALSE(compare_values(json{{"v", value({"1.0", 2.0})}}, ref, r, spec).ok);
  json ref_nan = {{"v", value({"nan", "inf"})}};
  CHECK(compare_values(json{{"v", value({"nan", "inf"})}}, ref_nan, r, spec).ok);
  CHECK_FALSE(compare_values(json{{"v", value({0.0, "inf"})}}, ref_nan, r, spec).ok);
}

TEST_CASE("tolerances come from the emitted dtype, then the case, then the value") {
  Rubric r = parse_rubric(R"({"chapters": {"c": {"files": ["a.cpp"], "cases": {
      "c.x": {"tolerance": {"rtol": 0.1}, "values": {"tight": {"rtol": 0, "atol": 0}}}}}}})", "t.json");
  const CaseSpec& spec = r.chapters[0].cases[0];
  Tolerance bf = r.tolerance_for(spec, "loose", "bf16");
  CHECK(bf.rtol == 0.1);
  CHECK(bf.atol == 1e-2);  // bf16 default
  Tolerance tight = r.tolerance_for(spec, "tight", "bf16");
  CHECK(tight.rtol == 0);
  CHECK(tight.atol == 0);
  json ref = {{"loose", value(1.0, "bf16")}, {"tight", value(1.0, "bf16")}};
  CHECK(compare_values(json{{"loose", value(1.05)}, {"tight", value(1.0)}}, ref, r, spec).ok);
  CHECK_FALSE(compare_values(json{{"loose", value(1.0)}, {"tight", value(1.0 + 1e-12)}}, ref, r, spec).ok);
}

TEST_CASE("a budget passes at or under reference * factor and fails above") {
  Budget b{"bytes_sent", 1.05, 1};
  json ref = {{"bytes_sent", 1000.0}};
  CHECK(check_budget(b, json{{"bytes_sent", 1050.0}}, ref).ok);
  BudgetCheck over = check_budget(b, json{{"bytes_sent", 2000.0}}, ref);
  MESSAGE(over.line);
  CHECK_FALSE(over.ok);
  CHECK(over.line.find("2x") != std::string::npos);
  CHECK_FALSE(check_budget(b, json::object(), ref).ok);
  CHECK_FALSE(check_budget(b, json{{"bytes_sent", "nan"}}, ref).ok);
}
