// The comparison is numpy.isclose with the reference as b; budgets compare measured costs.
#include <doctest/doctest.h>

#include <cmath>

#include "pipeline/compare.hpp"

using namespace mgpu::grade;
using nlohmann::json;

namespace {

Rubric rubric_with_fp64(double rtol, double atol) {
  Rubric r = parse_rubric(R"({"chapters": {}})", "test.json");
  r.dtype_tolerance["fp64"] = {rtol, atol};
  return r;
}

json value(json data, const char* dtype = "fp64") {
  return {{"dtype", dtype}, {"data", std::move(data)}};
}

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
  MESSAGE("reason: " << c.reason << "; max abs " << c.max_abs_error << ", max rel "
                     << c.max_rel_error);
  CHECK_FALSE(c.ok);
  CHECK(c.max_abs_error == doctest::Approx(4.0));
  CHECK(c.max_rel_error == doctest::Approx(1.0));
  REQUIRE(c.mismatches.size() == 2);
  CHECK(c.mismatches[0].find("first wrong: v[1]: got 2.5, expected 2") == 0);
  CHECK(c.mismatches[1].find("worst: v[3]: got 8, expected 4 (2x, +4)") == 0);
  CHECK(c.reason.find("2 of 4 elements outside tolerance, first at [1]") != std::string::npos);
  CHECK(c.detail().find("tolerances: s fp64 (rtol 1e-06, atol 0); v fp64") != std::string::npos);
}

TEST_CASE("NaN is reported as NaN, not as a zero error") {
  Rubric r = rubric_with_fp64(1e-6, 0);
  CaseSpec spec;
  json ref = {{"g", value({1.0, 2.0})}};
  Comparison c = compare_values(json{{"g", value({"nan", "nan"})}}, ref, r, spec);
  CHECK_FALSE(c.ok);
  CHECK(c.nan_count == 2);
  CHECK(c.reason.find("2 NaN") != std::string::npos);
  CHECK(c.mismatches[0].find("got NaN, expected 1") != std::string::npos);
}

TEST_CASE("a per-rank value names the rank, and a clean factor of the rank count is called out") {
  Rubric r = rubric_with_fp64(1e-6, 0);
  CaseSpec spec;
  json grads = value({0.5, -1.0, 2.0});
  json ref = {{"ranks", value(4.0)}, {"grads", grads}, {"peak", value({100.0, 100.0})}};
  ref["peak"]["index"] = "rank";
  json student = {
      {"ranks", value(4.0)}, {"grads", value({2.0, -4.0, 8.0})}, {"peak", value({100.0, 150.0})}};
  Comparison c = compare_values(student, ref, r, spec);
  CHECK_FALSE(c.ok);
  MESSAGE(c.detail());
  REQUIRE(c.hints.size() == 1);
  CHECK(c.hints[0] ==
        "every wrong element of grads is 4x the reference: summed over the 4 ranks instead of "
        "averaged?");
  CHECK(c.reason.find("summed over the 4 ranks") != std::string::npos);
  CHECK(c.detail().find("first wrong: peak on rank 1: got 150, expected 100 (1.5x, +50)") !=
        std::string::npos);
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
      "c.x": {"tolerance": {"rtol": 0.1}, "values": {"tight": {"rtol": 0, "atol": 0}}}}}}})",
                          "t.json");
  const CaseSpec& spec = r.chapters[0].cases[0];
  Tolerance bf = r.tolerance_for(spec, "loose", "bf16");
  CHECK(bf.rtol == 0.1);
  CHECK(bf.atol == 1e-2);  // bf16 default
  Tolerance tight = r.tolerance_for(spec, "tight", "bf16");
  CHECK(tight.rtol == 0);
  CHECK(tight.atol == 0);
  json ref = {{"loose", value(1.0, "bf16")}, {"tight", value(1.0, "bf16")}};
  CHECK(compare_values(json{{"loose", value(1.05)}, {"tight", value(1.0)}}, ref, r, spec).ok);
  CHECK_FALSE(
      compare_values(json{{"loose", value(1.0)}, {"tight", value(1.0 + 1e-12)}}, ref, r, spec).ok);
  // A value emitted per point matches its entry by the last dotted part; its own name wins.
  CHECK(r.tolerance_for(spec, "tp2_pp2.tight", "fp64").rtol == 0);
  CHECK(r.tolerance_for(spec, "tight.other", "fp64").rtol == 0.1);
  CHECK(r.tolerance_for(spec, "tp2.loose", "fp64").rtol == 0.1);
}

TEST_CASE("a budget passes at or under reference * factor and fails above") {
  Budget b{"bytes_sent", 1.05, 1, std::nullopt, ""};
  json ref = {{"bytes_sent", 1000.0}};
  CHECK(check_budget(b, json{{"bytes_sent", 1050.0}}, ref).ok);
  BudgetCheck over = check_budget(b, json{{"bytes_sent", 2000.0}}, ref);
  MESSAGE(over.line);
  CHECK_FALSE(over.ok);
  CHECK(over.line.find("2x") != std::string::npos);
  CHECK_FALSE(check_budget(b, json::object(), ref).ok);
  CHECK_FALSE(check_budget(b, json{{"bytes_sent", "nan"}}, ref).ok);
  CHECK_FALSE(
      check_budget(b, json{{"bytes_sent", 0.0}}, ref).below_floor);  // no floor: cheap is fine
}

TEST_CASE("a budget's floor makes a measure below what correct code needs a wrong answer") {
  Budget b{"bytes_sent", 1.0, 1, 1.0, "fewer bytes than an all-reduce moves"};
  json ref = {{"bytes_sent", 1000.0}};
  CHECK(check_budget(b, json{{"bytes_sent", 1000.0}}, ref).ok);
  BudgetCheck under = check_budget(b, json{{"bytes_sent", 0.0}}, ref);
  CHECK(under.below_floor);
  CHECK_FALSE(under.ok);
  // The numbers and what they fall short of, never a motive.
  CHECK(under.line ==
        "bytes_sent 0 = 0x the reference's 1000, under the floor of 1x: "
        "fewer bytes than an all-reduce moves");
  BudgetCheck half = check_budget(b, json{{"bytes_sent", 500.0}}, ref);
  CHECK(half.below_floor);
  CHECK(half.line.find("500 = 0.5x the reference's 1000") != std::string::npos);
  CHECK(check_budget(b, json::object(), ref).below_floor);
}
