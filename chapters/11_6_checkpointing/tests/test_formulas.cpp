// Visible tests for the 11.6 formulas: peak activations with a checkpoint every k layers, the
// best k (memory like sqrt(L)), the byte form, and the +1/3 compute of full recomputation.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "11_6_checkpointing/formulas.hpp"

using namespace mgpu::checkpointing;

TEST_CASE("peak is the checkpoints plus one segment: L=16, k=4 keeps 4 + 4 units") {
  CHECK(checkpointed_peak_units(16, 4) == 8);
  CHECK(checkpointed_peak_units(16, 16) == 17);    // one segment: the input plus every layer
  CHECK(checkpointed_peak_units(16, 1) == 17);     // every layer a checkpoint, one recomputed
  CHECK(checkpointed_peak_units(10, 4) == 3 + 4);  // segments of 4, 4, 2
  CHECK(no_checkpoint_peak_units(16) == 16);
}

TEST_CASE("the best interval beats storing everything once there are enough layers") {
  for (std::int64_t L : {8, 16, 32, 96, 128}) {
    const std::int64_t k = best_checkpoint_interval(L);
    CHECK(checkpointed_peak_units(L, k) < no_checkpoint_peak_units(L));
  }
}

TEST_CASE("the best interval is no worse than any other and gives ceil(2 sqrt(L)) units") {
  for (std::int64_t L = 1; L <= 200; ++L) {
    const std::int64_t k = best_checkpoint_interval(L);
    for (std::int64_t other = 1; other <= L; ++other)
      CHECK(checkpointed_peak_units(L, k) <= checkpointed_peak_units(L, other));
    CHECK(checkpointed_peak_units(L, k) ==
          static_cast<std::int64_t>(std::ceil(2 * std::sqrt(static_cast<double>(L)) - 1e-9)));
  }
}

TEST_CASE("on a tie the smallest interval is returned") {
  // L = 1000: k = 28..36 all give 64 units (ceil(1000/28) + 28 = 36 + 28, ..., ceil(1000/36) + 36 =
  // 28 + 36).
  CHECK(best_checkpoint_interval(1000) == 28);
  for (std::int64_t k = 28; k <= 36; ++k) CHECK(checkpointed_peak_units(1000, k) == 64);
  CHECK(checkpointed_peak_units(1000, 27) == 65);
  CHECK(checkpointed_peak_units(1000, 37) == 65);
  CHECK(best_checkpoint_interval(1) == 1);
}

TEST_CASE("memory grows like sqrt(L): 4x the layers, about 2x the peak") {
  const double small =
      static_cast<double>(checkpointed_peak_units(64, best_checkpoint_interval(64)));
  const double large =
      static_cast<double>(checkpointed_peak_units(1024, best_checkpoint_interval(1024)));
  MESSAGE("L=64: " << small << " units, L=1024: " << large << " units");
  CHECK(large / small == doctest::Approx(4.0).epsilon(0.05));  // 16x layers, 4x memory
}

TEST_CASE("with equal checkpoint and layer sizes the byte form is units times that size") {
  for (std::int64_t k : {1, 3, 7, 24})
    CHECK(checkpointed_peak_bytes(24, k, 5e6, 5e6) ==
          doctest::Approx(5e6 * static_cast<double>(checkpointed_peak_units(24, k))));
}

TEST_CASE("cheaper checkpoints favour shorter segments") {
  // A transformer layer input is 2sbh, its full activations about 34sbh or more.
  const double layer = 34.0;
  const std::int64_t k_cheap = best_checkpoint_interval_bytes(64, 2.0, layer);
  const std::int64_t k_equal = best_checkpoint_interval_bytes(64, layer, layer);
  CHECK(k_cheap < k_equal);
  CHECK(k_equal == best_checkpoint_interval(64));
  for (std::int64_t k = 1; k <= 64; ++k)
    CHECK(checkpointed_peak_bytes(64, k_cheap, 2.0, layer) <=
          checkpointed_peak_bytes(64, k, 2.0, layer));
}

TEST_CASE("recomputing every layer adds one forward: 1/3 more compute when backward = 2 forward") {
  CHECK(recompute_extra_flops_fraction(32, 32) == doctest::Approx(1.0 / 3.0));
  CHECK(recompute_extra_flops_fraction(0, 32) == 0.0);
  CHECK(recompute_extra_flops_fraction(16, 32) == doctest::Approx(1.0 / 6.0));
  CHECK(recompute_extra_flops_fraction(32, 32, 1.0) == doctest::Approx(0.5));
}

TEST_CASE("invalid inputs are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(checkpointed_peak_units(0, 1), std::invalid_argument);
  CHECK_THROWS_AS(checkpointed_peak_units(16, 0), std::invalid_argument);
  CHECK_THROWS_AS(checkpointed_peak_units(16, 17), std::invalid_argument);
  CHECK_THROWS_AS(no_checkpoint_peak_units(0), std::invalid_argument);
  CHECK_THROWS_AS(checkpointed_peak_bytes(16, 4, -1, 1), std::invalid_argument);
  CHECK_THROWS_AS(best_checkpoint_interval(0), std::invalid_argument);
  CHECK_THROWS_AS(best_checkpoint_interval_bytes(16, 1, -1), std::invalid_argument);
  CHECK_THROWS_AS(recompute_extra_flops_fraction(33, 32), std::invalid_argument);
  CHECK_THROWS_AS(recompute_extra_flops_fraction(-1, 32), std::invalid_argument);
  CHECK_THROWS_AS(recompute_extra_flops_fraction(8, 32, -2), std::invalid_argument);
}
