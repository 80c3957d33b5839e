// The shared comparison of the project's tests (testing/mgpu_test/compare.hpp, on the core in
// mismatch.hpp that the grader uses too): a mismatch must be found and reported with its rank,
// its first and worst element and their place (chunk, [row, column], model tensor), its NaN and,
// for a common factor, its likely cause; and its siblings (bit for bit, per-element bounds, a
// run's ranks, sequences that are not numbers) report the same way.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_configs.hpp>
#include <mgpu_test/model_where.hpp>

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

TEST_CASE(
    "a wrong element is named by its place: ring chunk, offset, (row, column), model tensor") {
  // Length 10 on 4 ranks: the ring's chunks are 3, 3, 2 and 2 elements.
  const std::vector<double> want{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<double> got = want;
  got[7] = 70;
  const auto ring = compare("data", got, want, {}, {.where = mgpu_test::ring_chunks(10, 4)});
  CHECK(ring.report.find("first wrong: data[7] (chunk 2 of 4: elements 6..7): got 70") !=
        std::string::npos);
  // A part of a buffer keeps its elements' indices in the whole.
  const auto part = compare("data", std::vector<double>{6, 70}, std::vector<double>{6, 7}, {},
                            {.offset = 6, .where = mgpu_test::ring_chunks(10, 4)});
  CHECK(part.report.find("data[7] (chunk 2 of 4: elements 6..7)") != std::string::npos);
  // A flat buffer holding a 2x3 matrix, its rows in blocks.
  const auto rows = compare("m", std::vector<double>{0, 0, 0, 0, 5, 0}, std::vector<double>(6, 0),
                            {}, {.cols = 3, .where = mgpu_test::row_chunks(3, {0, 1}, 2, "rank")});
  CHECK(rows.report.find("first wrong: m[1, 1] (rank 1: rows 1..1): got 5") != std::string::npos);
  const auto columns =
      compare("m", std::vector<double>{0, 0, 5, 0, 0, 0}, std::vector<double>(6, 0), {},
              {.cols = 3, .where = mgpu_test::column_chunks(3, {0, 2}, 3, "rank", {4, 7})});
  CHECK(columns.report.find("m[0, 2] (rank 7: columns 2..2)") != std::string::npos);
  const auto slices = compare("x", std::vector<double>{0, 0, 0, 1}, std::vector<double>(4, 0), {},
                              {.where = mgpu_test::chunks({0, 2}, 4, "rank")});
  CHECK(slices.report.find("x[3] (rank 1: elements 2..3)") != std::string::npos);
  // The course model's flat layout: the tensor, its [row, column] and shape, and its unit.
  const mgpu::model::Model net(mgpu_test::configs::tiny());
  const std::string head = mgpu_test::model_tensors(net)(net.num_params() - 1);
  CHECK(head.find("head.") == 0);
  CHECK(head.find(", unit " + std::to_string(net.num_units() - 1)) != std::string::npos);
}

TEST_CASE("matrices compare in reading order, named (row, column), and a shape mismatch says so") {
  struct M {  // a 2x3 matrix, row by row: enough of a matrix for MatrixLike
    std::vector<double> v;
    long rows() const { return 2; }
    long cols() const { return 3; }
    double operator()(long r, long c) const { return v[static_cast<std::size_t>(r * 3 + c)]; }
  };
  const auto m = compare("w", M{{0, 0, 0, 0, 0, 9}}, M{{0, 0, 0, 0, 0, 0}});
  CHECK(m.count == 1);
  CHECK(m.report.find("first wrong: w[1, 2]: got 9, expected 0") != std::string::npos);
  struct T {  // its transpose's shape
    long rows() const { return 3; }
    long cols() const { return 2; }
    double operator()(long, long) const { return 0; }
  };
  CHECK(compare("w", M{{0, 0, 0, 0, 0, 0}}, T{}).report ==
        "w: shape differs: got 2x3, expected 3x2");
}

TEST_CASE("compare_bits tells -0 from +0, compare_within holds each element to its own bound") {
  const std::vector<double> zero{0.0, 1.0};
  CHECK(mgpu_test::compare("z", std::vector<double>{-0.0, 1.0}, zero).count == 0);
  const auto bits = mgpu_test::compare_bits("z", std::vector<double>{-0.0, 1.0}, zero);
  CHECK(bits.count == 1);
  CHECK(bits.report.find("1 of 2 elements not bit for bit the expected ones") != std::string::npos);
  CHECK(mgpu_test::compare_bits("n", std::vector<double>{NAN}, std::vector<double>{NAN}).count ==
        0);
  const std::vector<double> want{1, 1}, bounds{0.5, 0.1};
  CHECK(mgpu_test::compare_within("b", std::vector<double>{1.4, 1.05}, want, bounds).count == 0);
  const auto within = mgpu_test::compare_within("b", std::vector<double>{1.4, 1.2}, want, bounds);
  CHECK(within.count == 1);
  CHECK(within.report.find("first wrong: b[1]: got 1.2, expected 1 (1.2x, +0.2), bound 0.1") !=
        std::string::npos);
  CHECK(mgpu_test::below(1.0).atol < 1.0);
  CHECK(
      mgpu_test::compare("s", std::vector<double>{2}, std::vector<double>{1}, mgpu_test::below(1.0))
          .count == 1);
}

TEST_CASE("RankChecks reports the first failing rank in full and counts the others") {
  mgpu_test::RankChecks checks(3);
  const std::vector<double> want{1, 2};
  CHECK(checks.compare(0, "y", want, want));
  CHECK_FALSE(checks.compare(2, "y", std::vector<double>{1, 4}, want));
  CHECK_FALSE(checks.compare(1, "dx", std::vector<double>{0, 2}, want));
  CHECK(checks.largest() == 2);
  const std::string r = checks.report();
  // Rank 1 is the lowest failing rank: its report comes first, whole; rank 2's is named.
  CHECK(r.find("rank 1: dx: 1 of 2 elements") == 0);
  CHECK(r.find("first wrong: dx[0]: got 0, expected 1") != std::string::npos);
  CHECK(r.find("and 1 more failing comparison, such as:\n    rank 2: y: 1 of 2 elements") !=
        std::string::npos);
  mgpu_test::RankChecks fine(2);
  fine.compare_bits(1, "w", want, want);
  CHECK(fine.report().empty());
  CHECK(fine.check());
}

TEST_CASE("sequence_mismatch names the first differing position and shows both sequences") {
  const auto show = [](int x) { return "F" + std::to_string(x); };
  CHECK(mgpu_test::sequence_mismatch("p", std::vector<int>{1, 2}, std::vector<int>{1, 2}, show)
            .empty());
  CHECK(mgpu_test::sequence_mismatch("p", std::vector<int>{1, 3}, std::vector<int>{1, 2}, show) ==
        "p: position 1 is F3, expected F2\n  got:      F1, F3\n  expected: F1, F2");
  CHECK(mgpu_test::sequence_mismatch("p", std::vector<int>{1}, std::vector<int>{1, 2}, show)
            .find("got 1 elements, expected 2: F2 is missing at position 1") != std::string::npos);
  CHECK(mgpu_test::sequence_mismatch("p", std::vector<int>{1, 2}, std::vector<int>{1}, show)
            .find("F2 at position 1 is one too many") != std::string::npos);
}
