// Visible tests for the 11.5 formulas: the bubble (3/11 at p=4, m=8; 28 micro-batches for
// under 10% at p=4), its limits, the interleaved variant, in-flight activations and traffic.
#include <doctest/doctest.h>

#include <stdexcept>

#include "11_5_pipeline/formulas.hpp"

using namespace mgpu::pipeline;

TEST_CASE("the text's exercise: 4 stages and 8 micro-batches idle 3/11 of the time") {
  const double bubble = gpipe_bubble_fraction(4, 8);
  MESSAGE("bubble(4, 8) = " << bubble);
  CHECK(bubble == doctest::Approx(0.2727).epsilon(0.001 / 0.2727));
}

TEST_CASE("one stage has no bubble, whatever m") {
  for (std::int64_t m : {1, 2, 100}) CHECK(gpipe_bubble_fraction(1, m) == 0.0);
}

TEST_CASE("one micro-batch leaves each of p stages idle (p-1)/p of the time") {
  for (std::int64_t p : {2, 4, 8})
    CHECK(gpipe_bubble_fraction(p, 1) ==
          doctest::Approx(static_cast<double>(p - 1) / static_cast<double>(p)));
}

TEST_CASE("the bubble shrinks towards 0 as micro-batches grow and grows with stages") {
  double previous = 1;
  for (std::int64_t m = 1; m <= 4096; m *= 2) {
    const double b = gpipe_bubble_fraction(8, m);
    CHECK(b < previous);
    previous = b;
  }
  CHECK(previous < 0.002);
  CHECK(gpipe_bubble_fraction(16, 32) > gpipe_bubble_fraction(8, 32));
}

TEST_CASE("the text's question: with 4 stages, 28 micro-batches bring the bubble under 10%") {
  CHECK(min_micro_batches_for_bubble(4, 0.1) == 28);
  CHECK(gpipe_bubble_fraction(4, 28) < 0.1);
  CHECK_FALSE(gpipe_bubble_fraction(4, 27) < 0.1);  // exactly 0.1: not strictly below
}

TEST_CASE("the micro-batch count found is the smallest that meets the target") {
  for (std::int64_t p : {1, 2, 3, 8, 64})
    for (double target : {0.5, 0.25, 0.1, 0.05, 0.01, 1.0}) {
      const std::int64_t m = min_micro_batches_for_bubble(p, target);
      CHECK(gpipe_bubble_fraction(p, m) < target);
      if (m > 1) CHECK_FALSE(gpipe_bubble_fraction(p, m - 1) < target);
    }
}

TEST_CASE("interleaving v chunks per stage shrinks the bubble, v = 1 is GPipe") {
  for (std::int64_t p : {2, 4, 8}) {
    CHECK(interleaved_bubble_fraction(p, 16, 1) == doctest::Approx(gpipe_bubble_fraction(p, 16)));
    CHECK(interleaved_bubble_fraction(p, 16, 2) < gpipe_bubble_fraction(p, 16));
    // v chunks act like v times as many micro-batches.
    CHECK(interleaved_bubble_fraction(p, 16, 4) == doctest::Approx(gpipe_bubble_fraction(p, 64)));
  }
}

TEST_CASE("bubble-to-compute ratio is bubble / (1 - bubble)") {
  for (std::int64_t v : {1, 2, 3}) {
    const double b = interleaved_bubble_fraction(8, 12, v);
    CHECK(bubble_to_compute_ratio(8, 12, v) == doctest::Approx(b / (1 - b)));
  }
}

TEST_CASE("a pipelined step takes m + p - 1 slots, busy for m of them") {
  const double step = pipeline_step_seconds(4, 8, 1.0, 2.0);
  CHECK(step == doctest::Approx(11 * 3.0));
  CHECK(8 * 3.0 / step == doctest::Approx(1 - gpipe_bubble_fraction(4, 8)));
}

TEST_CASE("GPipe holds all m micro-batches, 1F1B holds min(m, p - stage)") {
  for (std::int64_t stage = 0; stage < 4; ++stage) {
    CHECK(in_flight_micro_batches(Schedule::gpipe, 4, 32, stage) == 32);
    CHECK(in_flight_micro_batches(Schedule::one_f_one_b, 4, 32, stage) == 4 - stage);
  }
  CHECK(in_flight_micro_batches(Schedule::one_f_one_b, 8, 3, 0) ==
        3);  // fewer micro-batches than stages
}

TEST_CASE("1F1B never holds more than GPipe, and the first stage holds the most") {
  for (std::int64_t p : {1, 2, 4, 8})
    for (std::int64_t m : {1, 3, 8, 64}) {
      std::int64_t first = in_flight_micro_batches(Schedule::one_f_one_b, p, m, 0);
      for (std::int64_t s = 0; s < p; ++s) {
        const std::int64_t here = in_flight_micro_batches(Schedule::one_f_one_b, p, m, s);
        CHECK(here <= in_flight_micro_batches(Schedule::gpipe, p, m, s));
        CHECK(here <= first);
      }
    }
}

TEST_CASE("layers split evenly over stages") {
  CHECK(layers_per_stage(32, 4) == 8);
  CHECK(layers_per_stage(7, 1) == 7);
  CHECK_THROWS_WITH_AS(layers_per_stage(32, 3), doctest::Contains("layers"), std::invalid_argument);
}

TEST_CASE("boundary traffic: end stages send one way, middle stages both ways, one stage none") {
  const mgpu::TransformerShape shape{1024, 2, 4096, 32, 32};
  const double a = 1024.0 * 2 * 4096 * 2;
  CHECK(boundary_bytes_sent_per_stage(shape, 1, 8, 0, 2) == 0.0);
  CHECK(boundary_bytes_sent_per_stage(shape, 4, 8, 0, 2) == doctest::Approx(8 * a));
  CHECK(boundary_bytes_sent_per_stage(shape, 4, 8, 1, 2) == doctest::Approx(16 * a));
  CHECK(boundary_bytes_sent_per_stage(shape, 4, 8, 3, 2) == doctest::Approx(8 * a));
  // Every byte one stage sends, another receives: the sum is 2 (p - 1) transfers per micro-batch.
  double total = 0;
  for (std::int64_t s = 0; s < 4; ++s) total += boundary_bytes_sent_per_stage(shape, 4, 8, s, 2);
  CHECK(total == doctest::Approx(2 * 3 * 8 * a));
}

TEST_CASE("invalid inputs are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(gpipe_bubble_fraction(0, 8), std::invalid_argument);
  CHECK_THROWS_AS(gpipe_bubble_fraction(4, 0), std::invalid_argument);
  CHECK_THROWS_AS(min_micro_batches_for_bubble(4, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(min_micro_batches_for_bubble(4, 1.5), std::invalid_argument);
  CHECK_THROWS_AS(min_micro_batches_for_bubble(0, 0.1), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_bubble_fraction(4, 8, 0), std::invalid_argument);
  CHECK_THROWS_AS(pipeline_step_seconds(4, 8, -1, 2), std::invalid_argument);
  CHECK_THROWS_AS(in_flight_micro_batches(Schedule::gpipe, 4, 8, 4), std::invalid_argument);
  CHECK_THROWS_AS(in_flight_micro_batches(Schedule::one_f_one_b, 4, 8, -1), std::invalid_argument);
  CHECK_THROWS_AS(boundary_bytes_sent_per_stage({128, 1, 1024, 16, 4}, 4, 8, 0, 0),
                  std::invalid_argument);
}

TEST_CASE("zb_h1_bubble_seconds is 1F1B's wait less two weight halves per stage after the first") {
  struct Costs {
    double f, b, w;
  };
  // 1F1B's wait, from the step time of a pipeline whose backward is B and W together.
  for (std::int64_t p : {1, 2, 4, 8}) {
    for (const auto& [f, b, w] :
         {Costs{1.0, 1.0, 1.0}, Costs{2.0, 3.0, 0.5}, Costs{1.5, 1.0, 1.0}, Costs{1.0, 2.0, 0.0}}) {
      const std::int64_t m = 8;
      const double f1b_wait =
          pipeline_step_seconds(p, m, f, b + w) - static_cast<double>(m) * (f + b + w);
      CHECK(zb_h1_bubble_seconds(p, f, b, w) ==
            doctest::Approx(f1b_wait - 2.0 * static_cast<double>(p - 1) * w));
    }
  }
  CHECK(zb_h1_bubble_seconds(4, 1, 1, 1) == doctest::Approx(3.0));
  CHECK_THROWS_AS(zb_h1_bubble_seconds(0, 1, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(zb_h1_bubble_seconds(4, -1, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(zb_h1_bubble_seconds(4, 1, 1, 2), std::invalid_argument);    // T_W > T_F
  CHECK_THROWS_AS(zb_h1_bubble_seconds(4, 2, 1, 1.5), std::invalid_argument);  // T_W > T_B
}

TEST_CASE("zb_h2_bubble_seconds: one pass per micro-batch short of the first stage's round trip") {
  for (std::int64_t p : {1, 2, 4, 8}) {
    for (std::int64_t m : {1, 2, 3, 7, 8, 15, 16}) {
      // The first stage's round trip: p forwards out and p - 1 input halves back, 2p - 1 passes;
      // each of them that no micro-batch's forward covers is one pass of waiting.
      std::int64_t uncovered = 0;
      for (std::int64_t slot = 0; slot < 2 * p - 1; ++slot)
        if (slot >= m) ++uncovered;
      CHECK(zb_h2_bubble_seconds(p, m, 0.25) ==
            doctest::Approx(0.25 * static_cast<double>(uncovered)));
    }
  }
  CHECK(zb_h2_bubble_seconds(4, 8, 1) == 0.0);
  CHECK(zb_h2_bubble_seconds(4, 4, 1) == doctest::Approx(3.0));
  CHECK(zb_h2_bubble_seconds(4, 7, 2) == 0.0);  // m = 2p - 1: the bound is met exactly
  CHECK_THROWS_AS(zb_h2_bubble_seconds(0, 4, 1), std::invalid_argument);
  CHECK_THROWS_AS(zb_h2_bubble_seconds(4, 0, 1), std::invalid_argument);
  CHECK_THROWS_AS(zb_h2_bubble_seconds(4, 4, -1), std::invalid_argument);
}
