// Graded cases of 11.5's running pipeline: the GPipe and 1F1B action lists, the gradients of a
// pipelined step against the reference's, and the bubble and in-flight activations the virtual
// clock and the ledger measure.
#include <algorithm>
#include <cmath>
#include <vector>

#include "11_5_pipeline/schedules.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

using namespace mgpu::grade;
namespace pl = mgpu::pipeline;
namespace model = mgpu::model;

namespace {

// A schedule as numbers: stage by stage, +(k+1) for the forward of micro-batch k, -(k+1) for
// its backward, and 0 closing each stage's program.
std::vector<double> encode(const pl::PipelineSchedule& s) {
  std::vector<double> out;
  for (const auto& program : s.per_stage) {
    for (const pl::Action& a : program)
      out.push_back(a.pass == pl::Pass::forward ? a.micro_batch + 1 : -(a.micro_batch + 1));
    out.push_back(0);
  }
  return out;
}


// Links that cost nothing, so the clock measures compute and waiting only.
mgpu::ClusterConfig free_links(int p) {
  mgpu::ClusterConfig cc;
  cc.world_size = p;
  cc.flops_per_second = 1e9;
  cc.intra_node_latency = 0;
  cc.inter_node_latency = 0;
  cc.intra_node_bandwidth = 1e18;
  cc.inter_node_bandwidth = 1e18;
  return cc;
}

// What one pipelined step left behind.
struct Step {
  std::vector<float> grads;                 // stage gradients put together, model layout
  double loss = 0;                          // the last stage's return value
  std::vector<double> idle_fraction;        // per stage: 1 - compute / makespan
  std::vector<double> activation_peak;      // per stage, bytes
};

Step run_step(const model::Model& net, int p, int m, bool one_f_one_b, const model::Batch& batch,
              std::uint64_t seed) {
  const pl::PipelineSchedule schedule = one_f_one_b ? pl::one_f_one_b_schedule(p, m) : pl::gpipe_schedule(p, m);
  const std::vector<model::Batch> micro = pl::split_micro_batches(batch, m);
  Step step;
  step.grads.assign(net.num_params(), 0.0f);
  std::vector<std::vector<float>> stage_grads(static_cast<std::size_t>(p));
  mgpu::Cluster cluster(free_links(p));
  cluster.run([&](mgpu::Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), seed);
    const double loss = pl::run_pipeline(r, r.world(), net, pl::stage_units(net, p, r.id()), schedule,
                                         replica.params.span(), replica.grads.span(), micro);
    if (r.id() == p - 1) step.loss = loss;
    stage_grads[static_cast<std::size_t>(r.id())].assign(replica.grads.begin(), replica.grads.end());
  });
  for (int s = 0; s < p; ++s) {
    const pl::StageUnits units = pl::stage_units(net, p, s);
    for (int u = units.first; u < units.last; ++u) {
      const auto off = static_cast<std::ptrdiff_t>(net.unit(u).offset);
      std::copy_n(stage_grads[static_cast<std::size_t>(s)].begin() + off, net.unit(u).count, step.grads.begin() + off);
    }
    step.idle_fraction.push_back(1.0 - cluster.report(s).clock.compute_time() / cluster.makespan());
    step.activation_peak.push_back(static_cast<double>(cluster.report(s).memory.peak(mgpu::Category::activations)));
  }
  return step;
}

void gradients_case(Ctx& ctx, bool one_f_one_b) {
  const int p = ctx.pick({1, 2, 3, 4});
  model::ModelConfig c;
  c.d_in = ctx.uniform_int(2, 6);
  c.n_heads = ctx.pick({1, 2});
  c.d_model = c.n_heads * ctx.uniform_int(2, 6);
  c.d_ff = 2 * c.d_model;
  c.n_layers = p * ctx.uniform_int(1, 2);
  c.seq_len = ctx.uniform_int(2, 4);
  c.d_out = ctx.uniform_int(1, 3);
  const model::Model net(c);
  const int m = ctx.pick({1, 2, 4, 8});
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const model::Batch batch = net.make_batch(8, seed + 1);
  const Step step = run_step(net, p, m, one_f_one_b, batch, seed);
  ctx.emit("stages", p);
  ctx.emit("micro_batches", m);
  ctx.emit("grads", every_kth(step.grads), Dtype::fp32);
  ctx.emit("loss", step.loss, Dtype::fp32);
}

}  // namespace

MGPU_CASE("11_5.schedules") {
  const int p = ctx.uniform_int(1, 8);
  const int m = ctx.uniform_int(1, 12);
  ctx.emit("gpipe", encode(pl::gpipe_schedule(p, m)));
  ctx.emit("one_f_one_b", encode(pl::one_f_one_b_schedule(p, m)));
  ctx.emit_rejects("rejects_zero_stages", [&] { pl::gpipe_schedule(0, m); });
  ctx.emit_rejects("rejects_zero_micro_batches", [&] { pl::one_f_one_b_schedule(p, 0); });
}

MGPU_CASE("11_5.gpipe_gradients") { gradients_case(ctx, false); }

MGPU_CASE("11_5.one_f_one_b_gradients") { gradients_case(ctx, true); }

MGPU_CASE("11_5.bubble_and_in_flight") {
  // FFN-only blocks with d_ff = 16 d_model and one-feature embedding and head: stages cost the
  // same to about 0.1%, and a micro-batch's saved activations dwarf the boundary buffers in
  // transit, so the peak divided by one micro-batch's share rounds down to the count held.
  model::ModelConfig c;
  c.d_in = 1;
  c.d_model = ctx.pick({8, 16});
  c.d_ff = 16 * c.d_model;
  const int p = ctx.pick({2, 3, 4});
  c.n_layers = p;
  c.attention = false;
  c.seq_len = 2;
  c.d_out = 1;
  const model::Model net(c);
  const int m = ctx.pick({2, 4, 8});
  const model::Batch batch = net.make_batch(8, 9);
  const std::vector<model::Batch> micro = pl::split_micro_batches(batch, m);
  // One micro-batch's saved activations per stage, from the runtime's own forward.
  std::vector<double> per_mb(static_cast<std::size_t>(p), 0.0);
  mgpu::Cluster probe(1);
  probe.run([&](mgpu::Rank& r) {
    const model::Replica replica = net.make_replica(r.memory(), 1);
    mgpu::Buffer<float> x = net.input(r, micro[0]);
    for (int s = 0; s < p; ++s) {
      const pl::StageUnits units = pl::stage_units(net, p, s);
      for (int u = units.first; u < units.last; ++u) {
        model::UnitCache cache;
        x = net.unit_forward(r, u, net.unit_view(replica.params.span(), u), std::move(x), micro[0].tokens(), &cache);
        per_mb[static_cast<std::size_t>(s)] += static_cast<double>(cache.bytes());
      }
    }
  });
  for (bool f1b : {false, true}) {
    const Step step = run_step(net, p, m, f1b, batch, 1);
    std::vector<double> held;
    for (int s = 0; s < p; ++s)
      held.push_back(std::floor(step.activation_peak[static_cast<std::size_t>(s)] / per_mb[static_cast<std::size_t>(s)]));
    const char* name = f1b ? "one_f_one_b" : "gpipe";
    ctx.emit(std::string(name) + "_bubble", step.idle_fraction, Dtype::fp32);
    ctx.emit(std::string(name) + "_in_flight", held);
  }
  ctx.emit("stages", p);
  ctx.emit("micro_batches", m);
}

MGPU_CASE("11_5.pipeline_rejects") {
  model::ModelConfig c;
  c.n_layers = 2;
  const model::Model net(c);
  const std::vector<model::Batch> micro = pl::split_micro_batches(net.make_batch(4, 1), 2);
  mgpu::Cluster cluster(2);
  ctx.emit_rejects("rejects_schedule_for_other_p", [&] {
    cluster.run([&](mgpu::Rank& r) {
      model::Replica replica = net.make_replica(r.memory(), 1);
      pl::run_pipeline(r, r.world(), net, pl::stage_units(net, 2, r.id()), pl::gpipe_schedule(3, 2),
                       replica.params.span(), replica.grads.span(), micro);
    });
  });
  ctx.emit_rejects("rejects_invalid_schedule", [&] {
    pl::PipelineSchedule bad = pl::gpipe_schedule(2, 2);
    std::swap(bad.per_stage[1].front(), bad.per_stage[1].back());
    cluster.run([&](mgpu::Rank& r) {
      model::Replica replica = net.make_replica(r.memory(), 1);
      pl::run_pipeline(r, r.world(), net, pl::stage_units(net, 2, r.id()), bad, replica.params.span(),
                       replica.grads.span(), micro);
    });
  });
}
