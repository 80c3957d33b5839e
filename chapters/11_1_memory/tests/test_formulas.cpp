// Visible tests for 11.1: the text's numbers (16 B, 1.12 TB, ~7e23 FLOPs, ~55 years) and the
// properties the activation formulas must have (limits, identities, monotonicity, errors).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "11_1_memory/formulas.hpp"

using namespace mgpu;  // PrecisionRecipe, TransformerShape (mgpu/course.hpp)
using namespace mgpu::memory;

namespace {

double rel_error(double got, double want) { return std::abs(got - want) / std::abs(want); }

// A GPT-3-175B-like layer (Korthikanti et al. 2022 use this shape): s=2048, h=12288, a=96.
TransformerShape gpt3_layer(std::int64_t micro_batch = 1) {
  return TransformerShape{2048, micro_batch, 12288, 96, 96};
}

}  // namespace

// ------------------------------------------------------------------ training state

TEST_CASE("the text's table: bf16 mixed precision with Adam costs 16 bytes per parameter") {
  CHECK(bytes_per_parameter(kBf16MixedAdam) == 16.0);
}

TEST_CASE("fp32 with Adam also costs 16 bytes, split 4 + 4 + 8 with no separate master copy") {
  CHECK(bytes_per_parameter(kFp32Adam) == 16.0);
  CHECK(kFp32Adam.bytes_master == 0.0);
}

TEST_CASE("recipes with lighter optimizer state cost fewer bytes than the 16-byte default") {
  CHECK(bytes_per_parameter(kBf16MixedSgdMomentum) == 12.0);
  CHECK(bytes_per_parameter(kBf16MixedAdam8bit) < bytes_per_parameter(kBf16MixedAdam));
  CHECK(bytes_per_parameter(kBf16PureAdam) < bytes_per_parameter(kBf16MixedAdam8bit));
  CHECK(bytes_per_parameter(kMegatronBf16Fp32Grads) == 18.0);
}

TEST_CASE("bytes per parameter adds up the four kinds of state") {
  const PrecisionRecipe a{2, 2, 4, 8};
  const PrecisionRecipe b{1.5, 0.25, 3, 0.5};
  const PrecisionRecipe sum{a.bytes_weights + b.bytes_weights, a.bytes_grads + b.bytes_grads,
                            a.bytes_master + b.bytes_master, a.bytes_optimizer + b.bytes_optimizer};
  CHECK(bytes_per_parameter(sum) ==
        doctest::Approx(bytes_per_parameter(a) + bytes_per_parameter(b)).epsilon(1e-12));
}

TEST_CASE("every named preset is found by name and an unknown name lists the known ones") {
  for (const auto& p : kPrecisionPresets) {
    const PrecisionRecipe r = precision_preset(p.name);
    CHECK(r.bytes_weights == p.recipe.bytes_weights);
    CHECK(r.bytes_optimizer == p.recipe.bytes_optimizer);
  }
  CHECK_THROWS_WITH_AS(precision_preset("fp8-magic"), doctest::Contains("bf16-mixed-adam"),
                       std::invalid_argument);
}

TEST_CASE("the text's 1.12 TB: 70 billion parameters at 16 bytes each") {
  const double bytes = training_state_bytes(70e9, kBf16MixedAdam);
  MESSAGE("training state at 70e9 params: " << bytes << " B, relative error "
                                            << rel_error(bytes, 1.12e12));
  CHECK(rel_error(bytes, 1.12e12) < 1e-12);
}

TEST_CASE("training state is linear in the parameter count and zero for no parameters") {
  CHECK(training_state_bytes(0, kBf16MixedAdam) == 0.0);
  const double one = training_state_bytes(1e9, kBf16MixedSgdMomentum);
  CHECK(training_state_bytes(3e9, kBf16MixedSgdMomentum) ==
        doctest::Approx(3 * one).epsilon(1e-12));
}

TEST_CASE("invalid recipes and parameter counts are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(bytes_per_parameter(PrecisionRecipe{2, -2, 4, 8}), std::invalid_argument);
  CHECK_THROWS_AS(bytes_per_parameter(PrecisionRecipe{0, 2, 4, 8}), std::invalid_argument);
  CHECK_THROWS_AS(bytes_per_parameter(PrecisionRecipe{2, 2, NAN, 8}), std::invalid_argument);
  CHECK_THROWS_AS(training_state_bytes(-1, kBf16MixedAdam), std::invalid_argument);
  CHECK_THROWS_AS(training_state_bytes(INFINITY, kBf16MixedAdam), std::invalid_argument);
}

// ------------------------------------------------------------------ activations

TEST_CASE("without parallelism a layer keeps s*b*h*(34 + 5*a*s/h) bytes") {
  const TransformerShape shape = gpt3_layer();
  const double sbh = 2048.0 * 12288.0;
  const double expected = sbh * (34.0 + 5.0 * 96.0 * 2048.0 / 12288.0);
  const double got = activation_bytes_per_layer(shape);
  MESSAGE("GPT-3 layer, b=1: " << got / 1e9 << " GB, relative error " << rel_error(got, expected));
  CHECK(rel_error(got, expected) < 1e-12);
}

TEST_CASE("with t = 1 tensor and sequence parallelism change nothing") {
  const TransformerShape shape{512, 4, 1024, 16, 1};
  const double plain = activation_bytes_per_layer(shape);
  CHECK(activation_bytes_per_layer(shape, {1, false, Recompute::none}) ==
        doctest::Approx(plain).epsilon(1e-12));
  CHECK(activation_bytes_per_layer(shape, {1, true, Recompute::none}) ==
        doctest::Approx(plain).epsilon(1e-12));
}

TEST_CASE("tensor plus sequence parallelism divides all activations by t") {
  const TransformerShape shape = gpt3_layer();
  const double plain = activation_bytes_per_layer(shape);
  for (std::int64_t t : {2, 4, 8}) {
    const double sharded = activation_bytes_per_layer(shape, {t, true, Recompute::none});
    CHECK(sharded * static_cast<double>(t) ==
          doctest::Approx(plain).epsilon(1e-12));  // ranks sum to the whole
  }
}

TEST_CASE("tensor parallelism alone leaves 10*s*b*h replicated on every rank") {
  const TransformerShape shape = gpt3_layer();
  const double sbh = 2048.0 * 12288.0;
  for (std::int64_t t : {2, 4, 8}) {
    const double tp = activation_bytes_per_layer(shape, {t, false, Recompute::none});
    const double tp_sp = activation_bytes_per_layer(shape, {t, true, Recompute::none});
    // The gap is exactly the replicated 10 sbh minus its 1/t share.
    CHECK(tp - tp_sp ==
          doctest::Approx(sbh * (10.0 - 10.0 / static_cast<double>(t))).epsilon(1e-12));
  }
}

TEST_CASE("activations per rank fall as t grows") {
  const TransformerShape shape = gpt3_layer();
  for (bool sp : {false, true}) {
    double previous = activation_bytes_per_layer(shape, {1, sp, Recompute::none});
    for (std::int64_t t : {2, 4, 8, 16, 32}) {
      const double now = activation_bytes_per_layer(shape, {t, sp, Recompute::none});
      CHECK(now < previous);
      previous = now;
    }
  }
}

TEST_CASE("selective recompute drops exactly the 5*a*s/h attention term") {
  const TransformerShape shape = gpt3_layer();
  const double sbh = 2048.0 * 12288.0;
  CHECK(activation_bytes_per_layer(shape, {1, false, Recompute::selective}) ==
        doctest::Approx(34.0 * sbh).epsilon(1e-12));
  CHECK(activation_bytes_per_layer(shape, {8, true, Recompute::selective}) ==
        doctest::Approx(34.0 * sbh / 8.0).epsilon(1e-12));
  CHECK(activation_bytes_per_layer(shape, {8, false, Recompute::selective}) ==
        doctest::Approx(sbh * (10.0 + 24.0 / 8.0)).epsilon(1e-12));
}

TEST_CASE("full recompute keeps only the 16-bit layer input, 2*s*b*h") {
  const TransformerShape shape = gpt3_layer(2);
  const double sbh = 2048.0 * 2 * 12288.0;
  CHECK(activation_bytes_per_layer(shape, {1, false, Recompute::full}) ==
        doctest::Approx(2 * sbh).epsilon(1e-12));
  CHECK(activation_bytes_per_layer(shape, {8, true, Recompute::full}) ==
        doctest::Approx(2 * sbh / 8).epsilon(1e-12));
}

TEST_CASE("each recompute level stores less than the one before") {
  const TransformerShape shape{4096, 2, 4096, 32, 1};
  for (std::int64_t t : {1, 2, 8}) {
    const double none = activation_bytes_per_layer(shape, {t, false, Recompute::none});
    const double selective = activation_bytes_per_layer(shape, {t, false, Recompute::selective});
    const double full = activation_bytes_per_layer(shape, {t, false, Recompute::full});
    CHECK(none > selective);
    CHECK(selective > full);
  }
}

TEST_CASE("activations are linear in the micro-batch and grow faster than linearly in seq") {
  const ActivationOptions opt{2, false, Recompute::none};
  const double b1 = activation_bytes_per_layer({1024, 1, 2048, 16, 1}, opt);
  CHECK(activation_bytes_per_layer({1024, 3, 2048, 16, 1}, opt) ==
        doctest::Approx(3 * b1).epsilon(1e-12));
  CHECK(activation_bytes_per_layer({2048, 1, 2048, 16, 1}, opt) > 2 * b1);  // the s^2 term
}

TEST_CASE("the whole model's activations are layers times one layer's") {
  const TransformerShape shape{1024, 2, 2048, 16, 24};
  const ActivationOptions opt{4, true, Recompute::selective};
  CHECK(activation_bytes(shape, opt) ==
        doctest::Approx(24 * activation_bytes_per_layer(shape, opt)).epsilon(1e-12));
}

TEST_CASE("invalid shapes and splits are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(activation_bytes_per_layer({0, 1, 1024, 16, 1}), std::invalid_argument);
  CHECK_THROWS_AS(activation_bytes_per_layer({128, 1, 1024, 0, 1}), std::invalid_argument);
  CHECK_THROWS_AS(activation_bytes_per_layer({128, 1, 1024, 16, 1}, {0, false, Recompute::none}),
                  std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      activation_bytes_per_layer({128, 1, 1024, 32, 1}, {3, false, Recompute::none}),
      doctest::Contains("heads"), std::invalid_argument);
  CHECK_THROWS_AS(activation_bytes({128, 1, 1024, 16, 0}), std::invalid_argument);
}

// ------------------------------------------------------------------ compute and time

TEST_CASE("the text's ~7e23 FLOPs: 8e9 parameters on 15e12 tokens") {
  const double flops = training_flops(8e9, 15e12);
  MESSAGE("6ND = " << flops << " FLOPs (text: about 7e23)");
  CHECK(flops == doctest::Approx(7e23).epsilon(0.05));
  CHECK(training_flops(2 * 8e9, 15e12) == doctest::Approx(2 * flops).epsilon(1e-12));
}

TEST_CASE("the text's ~55 years: 7e23 FLOPs on one GPU at 4e14 FLOP/s") {
  const double years = training_seconds(7e23, 1, 4e14) / kSecondsPerYear;
  MESSAGE("one GPU: " << years << " years (text: about 55)");
  CHECK(years == doctest::Approx(55).epsilon(0.02));
}

TEST_CASE("time falls in proportion to GPUs and rises as utilisation drops") {
  const double one = training_seconds(1e21, 1, 1e15);
  CHECK(training_seconds(1e21, 1000, 1e15) == doctest::Approx(one / 1000).epsilon(1e-12));
  CHECK(training_seconds(1e21, 1, 1e15, 0.4) == doctest::Approx(one / 0.4).epsilon(1e-12));
  CHECK(training_seconds(0, 8, 1e15) == 0.0);
}

TEST_CASE("invalid compute inputs are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(training_flops(-1, 1e12), std::invalid_argument);
  CHECK_THROWS_AS(training_flops(1e9, -5), std::invalid_argument);
  CHECK_THROWS_AS(training_seconds(1e21, 0, 1e15), std::invalid_argument);
  CHECK_THROWS_AS(training_seconds(1e21, 8, 0), std::invalid_argument);
  CHECK_THROWS_AS(training_seconds(1e21, 8, 1e15, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(training_seconds(1e21, 8, 1e15, 1.5), std::invalid_argument);
  CHECK_THROWS_AS(training_seconds(-1, 8, 1e15), std::invalid_argument);
}
