// Visible tests for the 11.3 formulas: ZeRO state and traffic per GPU by stage, the fewest GPUs
// that fit, and the DeepSpeed and Megatron-LM variants, by identities, limits and text numbers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "11_3_zero/formulas.hpp"

using namespace mgpu::zero;
using mgpu::kBf16MixedAdam;
using mgpu::kFp32Adam;
using mgpu::kMegatronBf16Fp32Grads;
using mgpu::PrecisionRecipe;

namespace {

const PrecisionRecipe kRecipes[] = {kBf16MixedAdam, kFp32Adam, kMegatronBf16Fp32Grads,
                                    PrecisionRecipe{2, 2, 4, 4}, PrecisionRecipe{1.5, 3, 0, 2}};

}  // namespace

TEST_CASE("the 16-byte recipe: 16, 4 + 12/N, 2 + 14/N and 16/N bytes per parameter") {
  const double psi = 7e9;
  for (std::int64_t n : {1, 2, 8, 64}) {
    const double N = static_cast<double>(n);
    CHECK(zero_state_bytes_per_gpu(psi, kBf16MixedAdam, 0, n) == doctest::Approx(16 * psi));
    CHECK(zero_state_bytes_per_gpu(psi, kBf16MixedAdam, 1, n) ==
          doctest::Approx(psi * (4 + 12 / N)));
    CHECK(zero_state_bytes_per_gpu(psi, kBf16MixedAdam, 2, n) ==
          doctest::Approx(psi * (2 + 14 / N)));
    CHECK(zero_state_bytes_per_gpu(psi, kBf16MixedAdam, 3, n) == doctest::Approx(16 * psi / N));
  }
}

TEST_CASE("the text's figure: 70e9 parameters need 140 GB per GPU at 8 GPUs and 70 GB at 16") {
  CHECK(zero_state_bytes_per_gpu(70e9, kBf16MixedAdam, 0, 8) == doctest::Approx(1120e9));
  CHECK(zero_state_bytes_per_gpu(70e9, kBf16MixedAdam, 3, 8) == doctest::Approx(140e9));
  CHECK(zero_state_bytes_per_gpu(70e9, kBf16MixedAdam, 3, 16) == doctest::Approx(70e9));
}

TEST_CASE("on one GPU every stage equals plain data parallelism") {
  for (const auto& r : kRecipes)
    for (int stage = 1; stage <= 3; ++stage)
      CHECK(zero_state_bytes_per_gpu(3e9, r, stage, 1) ==
            doctest::Approx(zero_state_bytes_per_gpu(3e9, r, 0, 1)));
}

TEST_CASE("each higher stage keeps no more per GPU, and strictly less when N > 1") {
  for (const auto& r : kRecipes)
    for (std::int64_t n : {2, 4, 32}) {
      for (int stage = 1; stage <= 3; ++stage) {
        const double lower = zero_state_bytes_per_gpu(1e9, r, stage - 1, n);
        const double higher = zero_state_bytes_per_gpu(1e9, r, stage, n);
        CHECK(higher <= lower);
      }
      CHECK(zero_state_bytes_per_gpu(1e9, r, 3, n) < zero_state_bytes_per_gpu(1e9, r, 0, n));
    }
}

TEST_CASE("stage 3's shards over N GPUs add up to the whole unsharded state") {
  for (const auto& r : kRecipes)
    for (std::int64_t n : {3, 8, 1024}) {
      const StateBytes shard = zero_state_per_gpu(5e9, r, 3, n);
      const StateBytes whole = zero_state_per_gpu(5e9, r, 0, 1);
      CHECK(shard.total_bytes() * static_cast<double>(n) == doctest::Approx(whole.total_bytes()));
      CHECK(shard.optimizer_bytes * static_cast<double>(n) ==
            doctest::Approx(whole.optimizer_bytes));
    }
}

TEST_CASE("each stage shards exactly the kinds it names") {
  const double psi = 1e9;
  const StateBytes s1 = zero_state_per_gpu(psi, kBf16MixedAdam, 1, 4);
  CHECK(s1.weights_bytes == doctest::Approx(2 * psi));
  CHECK(s1.grads_bytes == doctest::Approx(2 * psi));
  CHECK(s1.master_bytes == doctest::Approx(psi));
  CHECK(s1.optimizer_bytes == doctest::Approx(2 * psi));
  const StateBytes s2 = zero_state_per_gpu(psi, kBf16MixedAdam, 2, 4);
  CHECK(s2.weights_bytes == doctest::Approx(2 * psi));
  CHECK(s2.grads_bytes == doctest::Approx(psi / 2));
}

TEST_CASE("stages 0-2 send one all-reduce worth of gradients, stage 3 sends 1.5 times that") {
  for (std::int64_t n : {2, 8, 64}) {
    const double N = static_cast<double>(n);
    const double all_reduce = 2 * (N - 1) / N * 2 * 7e9;  // bf16 gradients, ring all-reduce
    CHECK(zero_traffic_bytes_per_gpu(7e9, kBf16MixedAdam, 0, n) == doctest::Approx(all_reduce));
    CHECK(zero_traffic_bytes_per_gpu(7e9, kBf16MixedAdam, 1, n) == doctest::Approx(all_reduce));
    CHECK(zero_traffic_bytes_per_gpu(7e9, kBf16MixedAdam, 2, n) == doctest::Approx(all_reduce));
    const double ratio = zero_traffic_bytes_per_gpu(7e9, kBf16MixedAdam, 3, n) / all_reduce;
    MESSAGE("N=" << n << ": stage 3 / stage 0 traffic = " << ratio);
    CHECK(ratio == doctest::Approx(1.5));
  }
}

TEST_CASE("stage 3 traffic is two weight all-gathers and one gradient reduce-scatter") {
  const TrafficBytes t = zero_traffic_per_gpu(1e9, kBf16MixedAdam, 3, 4);
  CHECK(t.all_reduce_bytes == 0.0);
  CHECK(t.all_gather_forward_bytes == doctest::Approx(0.75 * 2e9));
  CHECK(t.all_gather_backward_bytes == doctest::Approx(0.75 * 2e9));
  CHECK(t.reduce_scatter_bytes == doctest::Approx(0.75 * 2e9));
}

TEST_CASE("one GPU sends nothing at any stage") {
  for (int stage = 0; stage <= 3; ++stage)
    CHECK(zero_traffic_bytes_per_gpu(1e9, kBf16MixedAdam, stage, 1) == 0.0);
}

TEST_CASE("fewest GPUs to fit: 70e9 at stage 3 in 80 GB needs 14, or 16 in whole servers") {
  CHECK(min_gpus_to_fit(70e9, kBf16MixedAdam, 3, 80e9) == 14);
  CHECK(min_gpus_to_fit(70e9, kBf16MixedAdam, 3, 80e9, 8) == 16);
  CHECK_FALSE(min_gpus_to_fit(70e9, kBf16MixedAdam, 0, 80e9).has_value());
  CHECK_FALSE(min_gpus_to_fit(70e9, kBf16MixedAdam, 1, 80e9).has_value());  // 4 x 70 > 80 GB
  CHECK(min_gpus_to_fit(1e9, kBf16MixedAdam, 0, 80e9) == 1);
}

TEST_CASE("the GPU count found fits and one fewer does not") {
  for (const auto& r : kRecipes)
    for (int stage = 1; stage <= 3; ++stage)
      for (double capacity : {24e9, 40e9, 80e9}) {
        const auto n = min_gpus_to_fit(4e9, r, stage, capacity);
        if (!n) continue;
        CHECK(zero_state_bytes_per_gpu(4e9, r, stage, *n) <= capacity);
        if (*n > 1) CHECK(zero_state_bytes_per_gpu(4e9, r, stage, *n - 1) > capacity);
      }
}

TEST_CASE("DeepSpeed's ZeRO-2 estimate (v0.14.3 on) keeps 2 bytes replicated and shards 18") {
  DeepSpeedSetup setup;
  setup.gpus_per_node = 8;
  const DeepSpeedEstimate e = deepspeed_zero2_estimate(1e9, setup);
  CHECK(e.gpu_bytes == doctest::Approx(2e9 + 18e9 / 8));
  CHECK(e.cpu_bytes == doctest::Approx(1e9 * 4 * 8 * 1.5));
  // The same replicated 2 Psi as the textbook stage 2; the shard is larger by an fp32 gradient
  // copy (4 bytes): 18/N against 14/N.
  const StateBytes text = zero_state_per_gpu(1e9, kBf16MixedAdam, 2, 8);
  CHECK(e.gpu_bytes - text.total_bytes() == doctest::Approx(4e9 / 8));
  // One GPU: 2 + 18 = 20 bytes per parameter, the table's 16 plus the fp32 gradient copy.
  setup.gpus_per_node = 1;
  CHECK(deepspeed_zero2_estimate(1e9, setup).gpu_bytes == doctest::Approx(20e9));
  // Its floor is taken of the sharded part only.
  setup.gpus_per_node = 7;
  CHECK(deepspeed_zero2_estimate(1001, setup).gpu_bytes ==
        2.0 * 1001 + std::floor(18.0 * 1001 / 7));
  setup.cpu_offload = true;
  CHECK(deepspeed_zero2_estimate(1e9, setup).gpu_bytes == doctest::Approx(2e9));
  CHECK(deepspeed_zero2_estimate(1e9, setup).cpu_bytes ==
        doctest::Approx(1e9 * std::max(4.0 * 7, 16.0) * 1.5));
}

TEST_CASE("DeepSpeed's ZeRO-3 estimate adds the largest layer to an 18-byte shard") {
  DeepSpeedSetup setup;
  setup.gpus_per_node = 8;
  setup.nodes = 2;
  const DeepSpeedEstimate e = deepspeed_zero3_estimate(16e9, 1e8, setup);
  CHECK(e.gpu_bytes == doctest::Approx(4e8 + 18e9));
  setup.cpu_offload = true;
  setup.cpu_offload_params = true;
  CHECK(deepspeed_zero3_estimate(16e9, 1e8, setup).gpu_bytes == doctest::Approx(4e8));
  CHECK_THROWS_AS(deepspeed_zero3_estimate(1e9, 2e9, setup), std::invalid_argument);
}

TEST_CASE("Megatron-LM: 18 bytes with fp32 gradients, 6 + 12/d with its distributed optimizer") {
  const double psi = 1e9;
  const auto bf16 = MegatronPrecision::bf16_params_fp32_grads;
  CHECK(megatron_state_bytes_per_gpu(psi, bf16, false, 8) == doctest::Approx(18 * psi));
  CHECK(megatron_state_bytes_per_gpu(psi, bf16, true, 8) == doctest::Approx(psi * (6 + 12.0 / 8)));
  CHECK(megatron_state_bytes_per_gpu(psi, MegatronPrecision::fp16_params_fp16_grads, false, 8) ==
        doctest::Approx(20 * psi));
  CHECK(megatron_state_bytes_per_gpu(psi, MegatronPrecision::fp32_params_fp32_grads, true, 4) ==
        doctest::Approx(psi * (8 + 8.0 / 4)));
}

TEST_CASE("Megatron's bf16 figures are the generic ZeRO formula with fp32 gradients") {
  const auto bf16 = MegatronPrecision::bf16_params_fp32_grads;
  for (std::int64_t d : {1, 2, 16}) {
    CHECK(megatron_state_bytes_per_gpu(3e9, bf16, false, d) ==
          doctest::Approx(zero_state_bytes_per_gpu(3e9, kMegatronBf16Fp32Grads, 0, d)));
    CHECK(megatron_state_bytes_per_gpu(3e9, bf16, true, d) ==
          doctest::Approx(zero_state_bytes_per_gpu(3e9, kMegatronBf16Fp32Grads, 1, d)));
  }
}

TEST_CASE("invalid inputs are rejected with std::invalid_argument") {
  CHECK_THROWS_WITH_AS(zero_state_bytes_per_gpu(1e9, kBf16MixedAdam, 4, 8),
                       doctest::Contains("stage"), std::invalid_argument);
  CHECK_THROWS_AS(zero_state_bytes_per_gpu(1e9, kBf16MixedAdam, -1, 8), std::invalid_argument);
  CHECK_THROWS_AS(zero_state_bytes_per_gpu(1e9, kBf16MixedAdam, 3, 0), std::invalid_argument);
  CHECK_THROWS_AS(zero_state_bytes_per_gpu(-1e9, kBf16MixedAdam, 3, 8), std::invalid_argument);
  CHECK_THROWS_AS(zero_state_bytes_per_gpu(1e9, PrecisionRecipe{2, -1, 4, 8}, 3, 8),
                  std::invalid_argument);
  CHECK_THROWS_AS(zero_traffic_bytes_per_gpu(1e9, kBf16MixedAdam, 5, 8), std::invalid_argument);
  CHECK_THROWS_AS(min_gpus_to_fit(1e9, kBf16MixedAdam, 3, 0), std::invalid_argument);
  CHECK_THROWS_AS(min_gpus_to_fit(1e9, kBf16MixedAdam, 3, 80e9, 0), std::invalid_argument);
  DeepSpeedSetup bad;
  bad.nodes = 0;
  CHECK_THROWS_AS(deepspeed_zero2_estimate(1e9, bad), std::invalid_argument);
  bad.nodes = 1;
  bad.additional_buffer_factor = 0.5;
  CHECK_THROWS_AS(deepspeed_zero2_estimate(1e9, bad), std::invalid_argument);
  CHECK_THROWS_AS(
      megatron_state_bytes_per_gpu(1e9, MegatronPrecision::bf16_params_fp32_grads, true, 0),
      std::invalid_argument);
}
