// Visible tests for the 11.7 formulas: 8 x 4 x 32 = 1024, layout checks, rank numbering and its
// inverse, per-GPU memory and traffic under a layout, and expert all-to-all volume.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <tuple>

#include "11_7_3d_and_experts/formulas.hpp"

using namespace mgpu::layout;
using mgpu::kBf16MixedAdam;
using mgpu::TransformerShape;

namespace {

LayoutModel small_model(Layout layout, int zero_stage) {
  LayoutModel m;
  m.params = 8e9;
  m.layout = layout;
  m.zero_stage = zero_stage;
  m.shape = TransformerShape{2048, 1, 4096, 32, 32};
  m.micro_batches = 16;
  m.activation_bytes_per_layer = 1e9;
  return m;
}

}  // namespace

TEST_CASE("the text's layout: 8 x 4 x 32 = 1024 GPUs") {
  CHECK(layout_gpus(Layout{8, 4, 32}) == 1024);
  CHECK_FALSE(layout_problem(Layout{8, 4, 32}, 1024, 8, 96).has_value());
  CHECK_NOTHROW(check_layout(Layout{8, 4, 32}, 1024, 8, 96));
}

TEST_CASE("layout problems are named in order: counts, product, node, layers") {
  auto problem = layout_problem(Layout{8, 4, 16}, 1024, 8);
  REQUIRE(problem.has_value());
  CHECK(problem->find("1024") != std::string::npos);
  problem = layout_problem(Layout{16, 2, 32}, 1024, 8);  // tp spans two nodes
  REQUIRE(problem.has_value());
  CHECK(problem->find("tp") != std::string::npos);
  CHECK(layout_problem(Layout{3, 1, 2}, 6, 8).has_value());  // 3 does not divide 8
  problem = layout_problem(Layout{8, 3, 1}, 24, 8, 32);
  REQUIRE(problem.has_value());
  CHECK(problem->find("layers") != std::string::npos);
  CHECK_FALSE(layout_problem(Layout{8, 3, 1}, 24, 8, 0).has_value());  // layers unknown: skipped
  CHECK(layout_problem(Layout{0, 1, 1}, 0, 8).has_value());
  CHECK_THROWS_AS(check_layout(Layout{8, 4, 16}, 1024, 8), std::invalid_argument);
}

TEST_CASE("tp varies fastest: consecutive ranks form a tensor-parallel group") {
  const Layout l{4, 2, 3};
  for (std::int64_t r = 0; r < 4; ++r) {
    const RankCoords c = rank_coordinates(r, l);
    CHECK(c.tp == r);
    CHECK(c.pp == 0);
    CHECK(c.dp == 0);
  }
  const RankCoords c = rank_coordinates(4 * 2 * 2 + 4 + 3, l);  // dp 2, pp 1, tp 3
  CHECK(c.tp == 3);
  CHECK(c.pp == 1);
  CHECK(c.dp == 2);
}

TEST_CASE("rank coordinates and global rank are inverses, and cover every rank once") {
  for (const Layout& l : {Layout{1, 1, 1}, Layout{2, 2, 2}, Layout{8, 4, 32}, Layout{1, 5, 3}}) {
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
    for (std::int64_t r = 0; r < layout_gpus(l); ++r) {
      const RankCoords c = rank_coordinates(r, l);
      CHECK(global_rank(c, l) == r);
      seen.insert({c.tp, c.pp, c.dp});
    }
    CHECK(static_cast<std::int64_t>(seen.size()) == layout_gpus(l));
  }
}

TEST_CASE("one GPU holds the whole training state and the whole model's activations") {
  LayoutModel m = small_model(Layout{1, 1, 1}, 0);
  const GpuMemory mem = per_gpu_memory(m);
  CHECK(mem.state_bytes() == doctest::Approx(16 * 8e9).epsilon(1e-12));
  CHECK(mem.activation_bytes ==
        doctest::Approx(32 * 1e9).epsilon(1e-12));  // one micro-batch in flight
  CHECK(mem.total_bytes() ==
        doctest::Approx(mem.state_bytes() + mem.activation_bytes).epsilon(1e-12));
}

TEST_CASE("tensor and pipeline parallelism divide the state, ZeRO-3 divides the rest by dp") {
  const GpuMemory tp_pp = per_gpu_memory(small_model(Layout{4, 2, 1}, 0));
  CHECK(tp_pp.state_bytes() == doctest::Approx(16 * 8e9 / 8).epsilon(1e-12));
  const GpuMemory all = per_gpu_memory(small_model(Layout{4, 2, 8}, 3));
  CHECK(all.state_bytes() == doctest::Approx(16 * 8e9 / 64).epsilon(1e-12));
  const GpuMemory z1 = per_gpu_memory(small_model(Layout{4, 2, 8}, 1));
  CHECK(z1.state_bytes() == doctest::Approx(8e9 / 8 * (4 + 12.0 / 8)).epsilon(1e-12));
}

TEST_CASE("data parallelism without ZeRO leaves per-GPU memory unchanged") {
  const double one = per_gpu_memory(small_model(Layout{2, 2, 1}, 0)).total_bytes();
  CHECK(per_gpu_memory(small_model(Layout{2, 2, 16}, 0)).total_bytes() ==
        doctest::Approx(one).epsilon(1e-12));
}

TEST_CASE("1F1B's first stage holds min(m, pp) micro-batches of its L/pp layers") {
  LayoutModel m = small_model(Layout{1, 4, 1}, 0);
  CHECK(per_gpu_memory(m).activation_bytes == doctest::Approx(1e9 * 8 * 4).epsilon(1e-12));
  m.micro_batches = 2;
  CHECK(per_gpu_memory(m).activation_bytes == doctest::Approx(1e9 * 8 * 2).epsilon(1e-12));
}

TEST_CASE("one GPU sends nothing, each kind of traffic appears only with its degree") {
  CHECK(per_gpu_traffic(small_model(Layout{1, 1, 1}, 0)).total_bytes() == 0.0);
  const GpuTraffic dp_only = per_gpu_traffic(small_model(Layout{1, 1, 8}, 0));
  CHECK(dp_only.data_parallel_bytes > 0);
  CHECK(dp_only.tensor_parallel_bytes == 0.0);
  CHECK(dp_only.pipeline_bytes == 0.0);
  CHECK(dp_only.data_parallel_bytes == doctest::Approx(2.0 * 7 / 8 * 2 * 8e9).epsilon(1e-12));
  const GpuTraffic tp_only = per_gpu_traffic(small_model(Layout{8, 1, 1}, 0));
  CHECK(tp_only.data_parallel_bytes == 0.0);
  CHECK(tp_only.pipeline_bytes == 0.0);
  const double a = 2048.0 * 4096 * 2;
  CHECK(tp_only.tensor_parallel_bytes ==
        doctest::Approx(32 * 16 * 4 * 2.0 * 7 / 8 * a).epsilon(1e-12));
}

TEST_CASE("ZeRO-3 sends 1.5x the data-parallel traffic, full recompute adds half the tp traffic") {
  const double z0 = per_gpu_traffic(small_model(Layout{2, 2, 8}, 0)).data_parallel_bytes;
  const double z3 = per_gpu_traffic(small_model(Layout{2, 2, 8}, 3)).data_parallel_bytes;
  CHECK(z3 / z0 == doctest::Approx(1.5).epsilon(1e-12));
  LayoutModel m = small_model(Layout{4, 1, 1}, 0);
  const double plain = per_gpu_traffic(m).tensor_parallel_bytes;
  m.recompute = mgpu::Recompute::full;
  CHECK(per_gpu_traffic(m).tensor_parallel_bytes == doctest::Approx(1.5 * plain).epsilon(1e-12));
  m.recompute = mgpu::Recompute::selective;
  CHECK(per_gpu_traffic(m).tensor_parallel_bytes == doctest::Approx(plain).epsilon(1e-12));
}

TEST_CASE("pipeline traffic: two stages send one way, deeper pipelines' middles both ways") {
  const double a = 2048.0 * 4096 * 2;
  CHECK(per_gpu_traffic(small_model(Layout{1, 2, 1}, 0)).pipeline_bytes ==
        doctest::Approx(16 * a).epsilon(1e-12));
  CHECK(per_gpu_traffic(small_model(Layout{1, 4, 1}, 0)).pipeline_bytes ==
        doctest::Approx(32 * a).epsilon(1e-12));
}

TEST_CASE("pipeline traffic: each of a stage's tp GPUs sends only its 1/tp slice of the boundary") {
  const double a = 2048.0 * 4096 * 2;
  // The stage as a whole still sends 2 m A; split over 4 GPUs, each sends a quarter of it.
  CHECK(per_gpu_traffic(small_model(Layout{4, 4, 1}, 0)).pipeline_bytes ==
        doctest::Approx(32 * a / 4).epsilon(1e-12));
  CHECK(per_gpu_traffic(small_model(Layout{8, 2, 2}, 0)).pipeline_bytes ==
        doctest::Approx(16 * a / 8).epsilon(1e-12));
  // Data parallelism copies the pipeline; it does not change what one GPU sends across a boundary.
  CHECK(per_gpu_traffic(small_model(Layout{4, 4, 8}, 0)).pipeline_bytes ==
        doctest::Approx(per_gpu_traffic(small_model(Layout{4, 4, 1}, 0)).pipeline_bytes)
            .epsilon(1e-12));
}

TEST_CASE("experts spread evenly over ranks") {
  CHECK(experts_per_rank(64, 8) == 8);
  CHECK(experts_per_rank(8, 8) == 1);
  CHECK_THROWS_AS(experts_per_rank(64, 6), std::invalid_argument);
}

TEST_CASE("all-to-all: top-k copies, (n-1)/n of them leave, dispatch plus combine") {
  CHECK(expert_all_to_all_bytes_per_rank(4096, 4096, 2, 64, 1, 2) == 0.0);
  const double one_way = 4096.0 * 2 * 4096 * 2 * 7 / 8;
  CHECK(expert_all_to_all_bytes_per_rank(4096, 4096, 2, 64, 8, 2) ==
        doctest::Approx(2 * one_way).epsilon(1e-12));
  // Linear in top_k and in tokens.
  CHECK(expert_all_to_all_bytes_per_rank(4096, 4096, 4, 64, 8, 2) ==
        doctest::Approx(2 * expert_all_to_all_bytes_per_rank(4096, 4096, 2, 64, 8, 2))
            .epsilon(1e-12));
  CHECK(expert_all_to_all_bytes_per_rank(0, 4096, 2, 64, 8, 2) == 0.0);
}

TEST_CASE("invalid inputs are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(layout_gpus(Layout{0, 1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(rank_coordinates(8, Layout{2, 2, 2}), std::invalid_argument);
  CHECK_THROWS_AS(rank_coordinates(-1, Layout{2, 2, 2}), std::invalid_argument);
  CHECK_THROWS_AS(global_rank(RankCoords{2, 0, 0}, Layout{2, 2, 2}), std::invalid_argument);
  LayoutModel m = small_model(Layout{1, 3, 1}, 0);  // 3 does not divide 32 layers
  CHECK_THROWS_AS(per_gpu_memory(m), std::invalid_argument);
  m = small_model(Layout{1, 1, 1}, 4);
  CHECK_THROWS_AS(per_gpu_memory(m), std::invalid_argument);
  m = small_model(Layout{1, 1, 1}, 0);
  m.micro_batches = 0;
  CHECK_THROWS_AS(per_gpu_traffic(m), std::invalid_argument);
  m = small_model(Layout{1, 1, 1}, 0);
  m.bytes_per_activation = 0;
  CHECK_THROWS_AS(per_gpu_traffic(m), std::invalid_argument);
  CHECK_THROWS_AS(expert_all_to_all_bytes_per_rank(-1, 4096, 2, 64, 8, 2), std::invalid_argument);
  CHECK_THROWS_AS(expert_all_to_all_bytes_per_rank(16, 4096, 65, 64, 8, 2), std::invalid_argument);
  CHECK_THROWS_AS(expert_all_to_all_bytes_per_rank(16, 4096, 2, 64, 6, 2), std::invalid_argument);
}
