// Visible tests for the module's exercises: the apply answers within the text's tolerances
// (17.5 within 0.1, 0.2727 within 0.001, 38.5 within 0.1), the check classification, and the
// extend comparison of a tensor-parallel all-reduce inside and across servers.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "exercises/formulas.hpp"

using namespace mgpu::exercises;
using mgpu::data_parallel::LinkModel;

TEST_CASE("apply 1: ZeRO-3, 70e9 parameters on 64 GPUs hold 17.5 GB each (within 0.1)") {
  const double gb = zero3_state_gb_per_gpu(70e9, 64);
  MESSAGE("answer " << gb << ", error " << std::abs(gb - 17.5));
  CHECK(std::abs(gb - 17.5) <= 0.1);
}

TEST_CASE("apply 2: 4 stages, 8 micro-batches idle 0.2727 of the time (within 0.001)") {
  const double bubble = bubble_fraction(4, 8);
  MESSAGE("answer " << bubble << ", error " << std::abs(bubble - 0.2727));
  CHECK(std::abs(bubble - 0.2727) <= 0.001);
}

TEST_CASE("apply 3: ZeRO-1, 7e9 parameters on 8 GPUs hold 38.5 GB each (within 0.1)") {
  const double gb = zero1_state_gb_per_gpu(7e9, 8);
  MESSAGE("answer " << gb << ", error " << std::abs(gb - 38.5));
  CHECK(std::abs(gb - 38.5) <= 0.1);
}

TEST_CASE("the apply functions follow their formulas at other points too") {
  CHECK(zero3_state_gb_per_gpu(7e9, 1) == doctest::Approx(112.0).epsilon(1e-12));
  CHECK(zero1_state_gb_per_gpu(7e9, 1) ==
        doctest::Approx(zero3_state_gb_per_gpu(7e9, 1)).epsilon(1e-12));
  CHECK(zero1_state_gb_per_gpu(70e9, 64) > zero3_state_gb_per_gpu(70e9, 64));
  CHECK(bubble_fraction(1, 8) == 0.0);
  CHECK(bubble_fraction(4, 28) < 0.1);
}

TEST_CASE("apply functions reject invalid inputs") {
  CHECK_THROWS_AS(zero3_state_gb_per_gpu(70e9, 0), std::invalid_argument);
  CHECK_THROWS_AS(zero1_state_gb_per_gpu(-1, 8), std::invalid_argument);
  CHECK_THROWS_AS(bubble_fraction(0, 8), std::invalid_argument);
}

TEST_CASE("check: only plain data parallelism leaves every GPU holding all the state") {
  CHECK(training_state_effect(Technique::data_parallel) == Effect::only_raises_throughput);
  CHECK(training_state_effect(Technique::zero) == Effect::reduces_memory_per_gpu);
  CHECK(training_state_effect(Technique::tensor_parallel) == Effect::reduces_memory_per_gpu);
  CHECK(training_state_effect(Technique::pipeline_parallel) == Effect::reduces_memory_per_gpu);
}

TEST_CASE("extend: only tensor parallelism's communication blocks the next computation") {
  CHECK(communication_on_critical_path(Technique::tensor_parallel));
  CHECK_FALSE(communication_on_critical_path(Technique::data_parallel));
  CHECK_FALSE(communication_on_critical_path(Technique::zero));
  CHECK_FALSE(communication_on_critical_path(Technique::pipeline_parallel));
}

TEST_CASE("extend: a block's all-reduce across servers is several times slower than inside one") {
  const LinkModel nvlink{2e-6, 450e9};
  const LinkModel network{10e-6, 50e9};
  const TensorParallelLinkComparison c =
      tensor_parallel_link_comparison(2048, 1, 8192, 8, 2, nvlink, network);
  MESSAGE("payload " << c.payload_bytes << " B: inside " << c.intra_node_seconds * 1e3
                     << " ms, across " << c.inter_node_seconds * 1e3 << " ms, slowdown "
                     << c.slowdown);
  CHECK(c.payload_bytes == doctest::Approx(2048.0 * 8192 * 2).epsilon(1e-12));
  CHECK(c.intra_node_seconds < c.inter_node_seconds);
  CHECK(c.slowdown == doctest::Approx(c.inter_node_seconds / c.intra_node_seconds).epsilon(1e-12));
  // Bandwidth-bound: the slowdown approaches the bandwidth ratio, 9, from below.
  CHECK(c.slowdown > 7);
  CHECK(c.slowdown < 9);
}

TEST_CASE("extend: identical links give no slowdown, and t = 1 is rejected") {
  const LinkModel link{5e-6, 100e9};
  CHECK(tensor_parallel_link_comparison(1024, 2, 4096, 4, 2, link, link).slowdown ==
        doctest::Approx(1.0).epsilon(1e-12));
  CHECK_THROWS_AS(tensor_parallel_link_comparison(1024, 2, 4096, 1, 2, link, link),
                  std::invalid_argument);
  CHECK_THROWS_AS(tensor_parallel_link_comparison(1024, 2, 4096, 4, 2, link, LinkModel{0, 0}),
                  std::invalid_argument);
}
