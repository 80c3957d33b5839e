// The shared comparison of the project's tests (testing/mgpu_test/compare.hpp, on the core in
// mismatch.hpp that the grader uses too): a mismatch must be found and reported with its rank,
// its first and worst element, its NaN and, for a common factor, its likely cause.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>

#include <cmath>
#include <string>
#include <vector>

using mgpu_test::compare;

TEST_CASE("compare finds every element outside the tolerance and names the first and the worst") {
  const std::vector<double> want{1, 2, 3, 4, 5};
  const std::vector<float> got{1, 2.5f, 3, 7, 5};
  const auto m = compare("x", got, want, {0.1, 0});
  CHECK(m.count == 2);
  CHECK(m.first == 1);
  CHECK(m.worst == 3);
  CHECK(m.largest == 3);
  CHECK(m.report ==
        "x: 2 of 5 elements outside |got - expected| <= 0.1 + 0 * |expected|; max abs error 3, "
        "max rel error 0.75\n"
        "  first wrong: x[1]: got 2.5, expected 2 (1.25x, +0.5)\n"
        "  worst: x[3]: got 7, expected 4 (1.75x, +3)");
  CHECK(compare("x", got, want, {3, 0}).count == 0);     // absolute tolerance
  CHECK(compare("x", got, want, {0, 0.75}).count == 0);  // relative: 3 <= 0.75 * 4
  CHECK(compare("x", want, want).report.empty());        // equal: nothing to say
}

TEST_CASE("the worst element is the wrong one furthest outside its tolerance") {
  // Relative tolerance: 5 off 1000 is within it, 0.5 off 1 is not, though the smaller error.
  const auto m =
      compare("x", std::vector<double>{1005, 1.5, 2.2}, std::vector<double>{1000, 1, 2}, {0, 0.01});
  CHECK(m.count == 2);
  CHECK(m.first == 1);
  CHECK(m.worst == 1);
  CHECK(m.largest == 5);
}

TEST_CASE("a rank's value names the rank, and a common factor of the rank count its cause") {
  const std::vector<double> want{0.5, -1, 2};
  const std::vector<double> got{2, -4, 8};
  const auto m = compare("grads", got, want, {1e-6, 0}, {.rank = 2, .ranks = 4});
  CHECK(m.report ==
        "rank 2: grads: 3 of 3 elements outside |got - expected| <= 1e-06 + 0 * |expected|; max "
        "abs error 6, max rel error 3\n"
        "  hint: every wrong element of grads is 4x the reference: summed over the 4 ranks "
        "instead of averaged?\n"
        "  first wrong: grads[0]: got 2, expected 0.5 (4x, +1.5)\n"
        "  worst: grads[2]: got 8, expected 2 (4x, +6)");
  // Without the rank count the factor is still named; one wrong element says nothing.
  CHECK(compare("g", got, want)
            .report.find("hint: every wrong element of g is 4x the reference: "
                         "a missing or extra factor?") != std::string::npos);
  CHECK(compare("g", std::vector<double>{2, -1, 2}, want).report.find("hint") == std::string::npos);
}

TEST_CASE("the factor hint names the common causes") {
  using mgpu_test::factor_cause;
  CHECK(factor_cause(4, 4) == ": summed over the 4 ranks instead of averaged?");
  CHECK(factor_cause(0.25, 4) == ": averaged twice, or divided by the 4 ranks once too often?");
  CHECK(factor_cause(-1, 4) == ": the sign is flipped (a minus lost or added)?");
  CHECK(factor_cause(2, 4) == ": counted twice (added once too often, or reduced twice)?");
  CHECK(factor_cause(2, 2) == ": summed over the 2 ranks instead of averaged?");
  CHECK(factor_cause(0, 8) == ": never written, or never received?");
  CHECK(factor_cause(3, 0) == ": a missing or extra factor?");
  CHECK(factor_cause(1.37, 4).empty());
}

TEST_CASE("compare treats NaN as NaN: wrong where a number is expected, and reported so") {
  const std::vector<double> want{1, 2, 3};
  const auto nan = compare("x", std::vector<double>{1, NAN, 3}, want, {1e9, 0});
  CHECK(nan.count == 1);
  CHECK(nan.worst == 1);
  CHECK(nan.nan_count == 1);
  CHECK(std::isinf(nan.largest));
  CHECK(nan.report ==
        "x: 1 of 3 elements outside |got - expected| <= 1e+09 + 0 * |expected|; max abs "
        "error 0, max rel error 0, 1 NaN where the reference has a number\n"
        "  first wrong: x[1]: got NaN, expected 2");
  CHECK(
      std::isinf(mgpu_test::max_abs_diff(std::vector<double>{1, NAN}, std::vector<double>{1, 2})));
  // NaN where NaN is expected is right (numpy.isclose with equal_nan, as the grader judges).
  CHECK(compare("x", std::vector<double>{NAN}, std::vector<double>{NAN}).count == 0);
}

TEST_CASE("compare treats different sizes as a mismatch and says so") {
  const std::vector<double> want{1, 2};
  const auto sizes = compare("x", std::vector<double>{1}, want, {}, {.rank = 1});
  CHECK_FALSE(sizes.same_size);
  CHECK(sizes.count > 0);
  CHECK(sizes.report == "rank 1: x: shape differs: got 1 elements, expected 2 elements");
  CHECK(std::isinf(mgpu_test::max_abs_diff(std::vector<double>{1}, want)));
  CHECK(mgpu_test::max_abs(std::vector<double>{-3, 2}) == 3);
}
