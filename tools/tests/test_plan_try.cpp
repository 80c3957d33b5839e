// The text's "parallelism-planner" Try and the module's apply exercises, answered by the planner.
// Each number is checked against the text's stated answer (within its tolerance) and against the
// chapter function it must come from, so a planner that rewires a formula wrongly fails here.
#include <doctest/doctest.h>

#include "11_1_memory/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"

using namespace mgpu::planner;

namespace {

Options seventy_b(int stage, std::int64_t gpus) {
  Options o;
  o.params = 70e9;
  o.gpus = gpus;
  o.zero_stage = stage;
  return o;
}

}  // namespace

TEST_CASE("Try: 70e9 with plain data parallelism needs 1120 GB on each of 8 GPUs and never fits") {
  const Plan p = make_plan(seventy_b(0, 8));
  const double whole_state = mgpu::memory::training_state_bytes(70e9, mgpu::kBf16MixedAdam);
  MESSAGE("per GPU: " << p.memory->total_bytes() / 1e9 << " GB");
  CHECK(p.memory->total_bytes() == doctest::Approx(1120e9));
  CHECK(p.memory->total_bytes() == doctest::Approx(whole_state));
  CHECK_FALSE(*p.fits);
  CHECK_FALSE(p.min_gpus->gpus.has_value());
  CHECK_FALSE(p.min_gpus_any->gpus.has_value());
  // The same at any count: stage 0 shards nothing.
  CHECK(memory_per_gpu(seventy_b(0, 1024)).total_bytes() == doctest::Approx(whole_state));
  CHECK(render_text(p, false).find("Never fits") != std::string::npos);
}

TEST_CASE("Try: 70e9 at ZeRO stage 3 needs 140 GB at 8 GPUs and fits from 16 GPUs at 70 GB") {
  const Plan p = make_plan(seventy_b(3, 8));
  MESSAGE("per GPU at 8: " << p.memory->total_bytes() / 1e9 << " GB; fewest "
                           << p.min_gpus->gpus.value_or(-1) << " -> "
                           << p.min_gpus->memory.total_bytes() / 1e9 << " GB");
  CHECK(p.memory->total_bytes() == doctest::Approx(140e9));
  CHECK_FALSE(*p.fits);
  REQUIRE(p.min_gpus->gpus.has_value());
  CHECK(*p.min_gpus->gpus == 16);
  CHECK(p.min_gpus->memory.total_bytes() == doctest::Approx(70e9));
  CHECK(p.min_gpus->memory.total_bytes() <= 80e9);
  // Without whole nodes, 1120/14 = 80 GB fills the GPU exactly.
  REQUIRE(p.min_gpus_any->gpus.has_value());
  CHECK(*p.min_gpus_any->gpus == 14);
  CHECK(p.min_gpus_any->memory.total_bytes() == doctest::Approx(80e9));
  const std::string text = render_text(p, false);
  CHECK(text.find("Does not fit") != std::string::npos);
  CHECK(text.find("in whole 8-GPU nodes: 16") != std::string::npos);
}

TEST_CASE("exercise: 70e9 at ZeRO stage 3 on 64 GPUs holds 17.5 GB per GPU") {
  const Plan p = make_plan(seventy_b(3, 64));
  MESSAGE("per GPU: " << p.memory->total_bytes() / 1e9 << " GB");
  CHECK(std::abs(p.memory->total_bytes() / 1e9 - 17.5) <= 0.1);
  CHECK(p.memory->total_bytes() == doctest::Approx(16 * 70e9 / 64));
  CHECK(*p.fits);
}

TEST_CASE("exercise: 7e9 at ZeRO stage 1 on 8 GPUs holds 38.5 GB per GPU, 4 Psi + 12 Psi / N_d") {
  Options o;
  o.params = 7e9;
  o.gpus = 8;
  o.zero_stage = 1;
  const Plan p = make_plan(o);
  MESSAGE("per GPU: " << p.memory->total_bytes() / 1e9 << " GB");
  CHECK(std::abs(p.memory->total_bytes() / 1e9 - 38.5) <= 0.1);
  CHECK(p.memory->weights_bytes + p.memory->grads_bytes == doctest::Approx(4 * 7e9));
  CHECK(p.memory->master_bytes + p.memory->optimizer_bytes == doctest::Approx(12 * 7e9 / 8));
}

TEST_CASE("exercise: 4 pipeline stages and 8 micro-batches leave a 0.2727 bubble") {
  Options o;
  o.params = 7e9;
  o.gpus = 4;
  o.pp = 4;
  o.micro_batches = 8;
  const Plan p = make_plan(o);
  MESSAGE("bubble: " << *p.bubble);
  CHECK(std::abs(*p.bubble - 0.2727) <= 0.001);
  CHECK(*p.bubble == doctest::Approx(mgpu::pipeline::gpipe_bubble_fraction(4, 8)));
}

TEST_CASE(
    "FLOPs and time: 8e9 parameters on 15e12 tokens take about 7e23 FLOPs, 55 years on one GPU") {
  Options o;
  o.params = 8e9;
  o.gpus = 1;
  o.gpu_memory_bytes = 1e15;  // only the time is asked about here
  o.tokens = 15e12;
  o.gpu_flops = 4e14;
  const Plan p = make_plan(o);
  REQUIRE(p.flops.has_value());
  REQUIRE(p.seconds.has_value());
  const double years = *p.seconds / mgpu::memory::kSecondsPerYear;
  MESSAGE("FLOPs " << *p.flops << ", years " << years);
  CHECK(*p.flops == doctest::Approx(mgpu::memory::training_flops(8e9, 15e12)));
  CHECK(*p.flops == doctest::Approx(7.2e23));
  CHECK(years ==
        doctest::Approx(57.0).epsilon(0.05));  // 7.2e23 / 4e14 s; the text rounds 7e23 to 55
  CHECK(*p.seconds == doctest::Approx(*p.seconds_ideal));  // one GPU: no bubble, no recompute
}
