// The shared comparison of the project's tests (testing/mgpu_test/compare.hpp): a mismatch must
// be found and reported with its first and worst element, never passed over.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>

#include <cmath>
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
  CHECK(m.report.find("2 of 5 elements") != std::string::npos);
  CHECK(m.report.find("first at [1]: got 2.5, expected 2") != std::string::npos);
  CHECK(m.report.find("worst at [3]: got 7, expected 4") != std::string::npos);
  CHECK(compare("x", got, want, {3, 0}).count == 0);     // absolute tolerance
  CHECK(compare("x", got, want, {0, 0.75}).count == 0);  // relative: 3 <= 0.75 * 4
  CHECK(compare("x", want, want).report.empty());        // equal: nothing to say
}

TEST_CASE("compare treats NaN and different sizes as mismatches") {
  const std::vector<double> want{1, 2};
  const auto nan = compare("x", std::vector<double>{1, NAN}, want, {1e9, 0});
  CHECK(nan.count == 1);
  CHECK(nan.worst == 1);
  CHECK(std::isinf(mgpu_test::max_abs_diff(std::vector<double>{1, NAN}, want)));
  const auto sizes = compare("x", std::vector<double>{1}, want);
  CHECK_FALSE(sizes.same_size);
  CHECK(sizes.count > 0);
  CHECK(std::isinf(mgpu_test::max_abs_diff(std::vector<double>{1}, want)));
  CHECK(mgpu_test::max_abs(std::vector<double>{-3, 2}) == 3);
}
