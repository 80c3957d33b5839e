// The fewest-GPUs search: its answer fits, the next smaller candidate does not, it keeps tp and
// pp, and it agrees with a plain linear scan and with the 11.3 chapter's own search.
#include <doctest/doctest.h>

#include <numeric>

#include "11_3_zero/formulas.hpp"
#include "plan/model.hpp"

using namespace mgpu::planner;

namespace {

bool fits_at(Options o, std::int64_t gpus) {
  o.gpus = gpus;
  return memory_per_gpu(o).total_bytes() <= o.gpu_memory_bytes;
}

// The obvious search, one candidate at a time, for comparison with the bisection.
std::optional<std::int64_t> linear_scan(const Options& o, bool whole_nodes, std::int64_t limit) {
  const std::int64_t step = o.tp * o.pp;
  for (std::int64_t g = step; g <= limit; g += step) {
    if (whole_nodes && g > o.gpus_per_node && g % o.gpus_per_node != 0) continue;
    if (fits_at(o, g)) return g;
  }
  return std::nullopt;
}

Options model(double params, int stage, std::int64_t tp, std::int64_t pp) {
  Options o;
  o.params = params;
  o.zero_stage = stage;
  o.tp = tp;
  o.pp = pp;
  o.gpus = tp * pp;
  return o;
}

}  // namespace

TEST_CASE("the fewest GPUs found equal a linear scan, for every stage and several tp x pp") {
  int compared = 0;
  for (int stage = 0; stage <= 3; ++stage)
    for (std::int64_t tp : {1, 2, 8})
      for (std::int64_t pp : {1, 3, 4})
        for (double params : {7e9, 70e9, 175e9}) {
          const Options o = model(params, stage, tp, pp);
          for (bool whole : {false, true}) {
            const auto found = min_gpus_that_fit(o, whole);
            const auto scanned = linear_scan(o, whole, 4096);
            CAPTURE(stage);
            CAPTURE(tp);
            CAPTURE(pp);
            CAPTURE(params);
            CAPTURE(whole);
            if (scanned) {
              REQUIRE(found.has_value());
              CHECK(*found == *scanned);
              CHECK(*found % (tp * pp) == 0);
              ++compared;
            } else if (found) {
              CHECK(*found > 4096);  // beyond the scan's limit, never below it
            }
          }
        }
  MESSAGE("configurations with an answer compared: " << compared);
  CHECK(compared > 0);
}

TEST_CASE("with tp = pp = 1 and no activations the search matches mgpu::zero::min_gpus_to_fit") {
  for (int stage = 0; stage <= 3; ++stage)
    for (double params : {1e9, 7e9, 13e9, 70e9}) {
      const Options o = model(params, stage, 1, 1);
      const auto expected = mgpu::zero::min_gpus_to_fit(params, mgpu::kBf16MixedAdam, stage, 80e9);
      const auto found = min_gpus_that_fit(o, false);
      CAPTURE(stage);
      CAPTURE(params);
      REQUIRE(found.has_value() == expected.has_value());
      if (found) CHECK(*found == *expected);
    }
}

TEST_CASE("the answer fits and the candidate just below it does not") {
  Options o = model(70e9, 3, 2, 2);
  o.shape = ModelShape{{.seq = 4096, .micro_batch = 1, .hidden = 8192, .heads = 64, .layers = 80},
                       Recompute::selective,
                       true};
  o.micro_batches = 8;
  const auto found = min_gpus_that_fit(o, false);
  REQUIRE(found.has_value());
  MESSAGE("fewest GPUs with tp 2, pp 2 and activations: " << *found);
  CHECK(fits_at(o, *found));
  if (*found > o.tp * o.pp) CHECK_FALSE(fits_at(o, *found - o.tp * o.pp));
}

TEST_CASE("whole nodes: above one node the count is a multiple of gpus-per-node and of tp*pp") {
  Options o = model(70e9, 3, 2, 3);  // tp*pp = 6 does not divide a node of 8
  const auto found = min_gpus_that_fit(o, true);
  REQUIRE(found.has_value());
  MESSAGE("tp 2, pp 3: " << *found << " GPUs");
  CHECK(*found % 6 == 0);
  if (*found > o.gpus_per_node) CHECK(*found % o.gpus_per_node == 0);
  CHECK(*found >= *min_gpus_that_fit(o, false));
}

TEST_CASE("activations that alone exceed the capacity never fit, whatever the stage") {
  Options o = model(7e9, 3, 1, 1);
  o.shape = ModelShape{{.seq = 32768, .micro_batch = 8, .hidden = 4096, .heads = 32, .layers = 32},
                       Recompute::none,
                       false};
  REQUIRE(memory_per_gpu(o).activation_bytes > o.gpu_memory_bytes);
  CHECK_FALSE(min_gpus_that_fit(o, true).has_value());
  CHECK_FALSE(*make_plan(o).fits);
}
