// Traffic wiring: the planner's per-kind bytes add up to the 11.7 layout model's totals, the
// tensor-parallel bytes equal the 11.4 per-block count times layers and micro-batches, and
// ZeRO-3 costs 1.5 times plain data parallelism, as section 11.3 states.
#include <doctest/doctest.h>

#include "11_4_tensor_parallel/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "11_7_3d_and_experts/formulas.hpp"
#include "layout_3d.hpp"
#include "plan/model.hpp"

using namespace mgpu::planner;
using tools_test::layout_3d;

namespace {

double bytes_of(const Plan& p, const std::string& group) {
  double sum = 0;
  for (const auto& t : p.traffic)
    if (t.group == group) sum += *t.bytes;
  return sum;
}

mgpu::layout::LayoutModel layout_model_of(const Options& o) {
  mgpu::layout::LayoutModel m;
  m.params = o.params;
  m.layout = {o.tp, o.pp, data_parallel_degree(o)};
  m.zero_stage = o.zero_stage;
  m.micro_batches = o.micro_batches;
  m.shape = o.shape->transformer;
  m.activation_bytes_per_layer =
      mgpu::memory::activation_bytes_per_layer(m.shape, {o.tp, false, o.shape->recompute});
  m.recompute = o.shape->recompute;
  return m;
}

}  // namespace

TEST_CASE("per-kind traffic adds up to the 11.7 layout model's data, tensor and pipeline totals") {
  for (int stage = 0; stage <= 3; ++stage) {
    const Options o = layout_3d(stage, Recompute::none);
    const Plan p = make_plan(o);
    const mgpu::layout::GpuTraffic t = mgpu::layout::per_gpu_traffic(layout_model_of(o));
    CAPTURE(stage);
    CHECK(bytes_of(p, "tp") == doctest::Approx(t.tensor_parallel_bytes));
    CHECK(bytes_of(p, "pp") == doctest::Approx(t.pipeline_bytes));
    if (stage >= 2) continue;  // 11.7 counts one micro-batch's ZeRO collectives, the planner m
    CHECK(bytes_of(p, "dp") == doctest::Approx(t.data_parallel_bytes));
    CHECK(*p.traffic_total() == doctest::Approx(t.total_bytes()));
  }
}

TEST_CASE("pipeline bytes per GPU are the 11.5 bytes of a middle stage split over its tp GPUs") {
  for (std::int64_t tp : {1, 2, 8}) {
    Options o = layout_3d(1, Recompute::none);
    o.tp = tp;
    const Plan p = make_plan(o);
    const double stage = mgpu::pipeline::boundary_bytes_sent_per_stage(o.shape->transformer, o.pp,
                                                                       o.micro_batches, 1, 2);
    CAPTURE(tp);
    CHECK(bytes_of(p, "pp") == doctest::Approx(stage / static_cast<double>(tp)));
  }
}

TEST_CASE("tensor-parallel bytes are the 11.4 per-block bytes x layers per stage x micro-batches") {
  namespace tpn = mgpu::tensor_parallel;
  for (Recompute r : {Recompute::none, Recompute::full}) {
    const Options o = layout_3d(1, r);
    const Plan p = make_plan(o);
    const mgpu::TransformerShape& shape = o.shape->transformer;
    double per_block = tpn::block_bytes_sent_per_rank(shape, o.tp, 2, tpn::Pass::both);
    if (r == Recompute::full)
      per_block += tpn::block_bytes_sent_per_rank(shape, o.tp, 2, tpn::Pass::forward);
    const double expected =
        per_block * static_cast<double>(o.shape->transformer.layers / o.pp * o.micro_batches);
    MESSAGE("recompute " << to_string(r) << ": tp bytes per step " << bytes_of(p, "tp") / 1e9
                         << " GB");
    CHECK(bytes_of(p, "tp") == doctest::Approx(expected));
  }
}

TEST_CASE(
    "ZeRO stage 3 sends 1.5 times the bytes of plain data parallelism, stages 1 and 2 the same") {
  Options o;
  o.params = 70e9;
  o.gpus = 64;
  double plain = 0;
  for (int stage = 0; stage <= 3; ++stage) {
    o.zero_stage = stage;
    const Plan p = make_plan(o);
    if (stage == 0) plain = *p.traffic_total();
    CAPTURE(stage);
    REQUIRE(p.dp_traffic_vs_plain.has_value());
    CHECK(*p.traffic_total() == doctest::Approx(plain * *p.dp_traffic_vs_plain));
    CHECK(*p.dp_traffic_vs_plain == doctest::Approx(stage == 3 ? 1.5 : 1.0));
  }
}

TEST_CASE("one GPU sends nothing, and no shape means no tensor or pipeline rows") {
  Options o;
  o.params = 1e9;
  o.gpus = 1;
  CHECK(make_plan(o).traffic.empty());
  o.gpus = 8;
  o.tp = 2;
  o.pp = 2;
  const Plan p = make_plan(o);
  CHECK(bytes_of(p, "tp") == 0);
  CHECK(bytes_of(p, "pp") == 0);
  CHECK(bytes_of(p, "dp") > 0);
}
