// Graded cases of 11.7's 3D training step on the simulated cluster, over a fixed grid of
// layouts plus a drawn one: the loss, every rank's ZeRO-1 gradient shard and its parameters
// after two steps; the ledger's training state and activation peak; and the bytes each rank
// sends per group (tensor-parallel all-reduces, pipeline boundaries, data-parallel ZeRO-1, and
// the boundary all-gathers), with every rank's virtual clock; and the 1F1B order of every stage.
// Each rank runs step3d.cpp's rank bodies on the inputs made here, and the order is its student
// call.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "step3d.inputs.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::cases_11_7;
namespace ly = mgpu::layout;

namespace {

struct Point {
  ly::Layout layout;
  int micro_batches;
  std::int64_t sequences_per_micro;
};

std::string label(const Point& p) {
  const ly::Layout& l = p.layout;
  return "tp" + std::to_string(l.tp) + "_pp" + std::to_string(l.pp) + "_dp" + std::to_string(l.dp) +
         "_m" + std::to_string(p.micro_batches) + ".";
}

// The fixed points, each catching a family of mistakes:
// - 2x2x2 and 2x2x4 (m = 4): every axis above 1, the two layouts;
// - 2x2x2 with m = 8 > pp: a stage that keeps every micro-batch (GPipe order, caches never
//   freed) holds 4x 1F1B's activations;
// - 1x4x1 (m = 6): a pure pipeline, with middle stages that send both ways;
// - 2x4x1 (m = 2 < pp): 1F1B with fewer micro-batches than stages;
// - 4x1x2: no pipeline, four-way tensor parallelism;
// - 1x1x1: one rank, nothing to communicate.
// Then one drawn point, named by its layout and micro-batch count like the others.
std::vector<Point> points(Ctx& ctx) {
  std::vector<Point> g = {{{2, 2, 2}, 4, 1}, {{2, 2, 4}, 4, 1}, {{2, 2, 2}, 8, 1},
                          {{1, 4, 1}, 6, 1}, {{2, 4, 1}, 2, 2}, {{4, 1, 2}, 2, 1},
                          {{1, 1, 1}, 2, 2}};
  // Drawn again while its name repeats a fixed point's (a value name must be unique).
  Point d;
  do {
    d = {{ctx.pick<std::int64_t>({1, 2, 4}), ctx.pick<std::int64_t>({1, 2, 4}),
          ctx.uniform_int(1, 3)},
         static_cast<int>(ctx.uniform_int(1, 5)),
         ctx.uniform_int(1, 2)};
  } while (std::any_of(g.begin(), g.end(), [&](const Point& p) { return label(p) == label(d); }));
  g.push_back(d);
  return g;
}

// The course model the step trains: attention blocks with four heads (tp 1, 2, 4 divide them),
// four layers (pp 1, 2, 4 divide them).
mgpu::model::ModelConfig config(Ctx& ctx) {
  mgpu::model::ModelConfig c;
  c.d_in = 8;
  c.d_model = 16;
  c.d_ff = ctx.pick<std::int64_t>({32, 64});
  c.n_layers = 4;
  c.n_heads = 4;
  c.seq_len = 4;
  c.d_out = 4;
  return c;
}

// What each rank saw: published by the rank, its ledger's peaks from its report.
struct Seen {
  std::vector<double> loss, grads, params;  // per step: last stage's loss, own shard, share
  std::vector<double> has_loss;             // per step: 1 on the last stage, 0 elsewhere
  double weights = 0, grads_bytes = 0, optimizer = 0, activations = 0;
};

int world_of(const ly::Layout& l) { return static_cast<int>(l.tp * l.pp * l.dp); }

// Two steps of the point's layout (11_7.step3d_train), weights from `seed`, the global batch of
// dp * m * sequences_per_micro sequences from seed + 1, the same on every rank.
std::vector<Seen> run(const Point& p, const mgpu::model::ModelConfig& model, std::uint64_t seed) {
  const ly::Layout& l = p.layout;
  const int n = world_of(l);
  std::vector<Seen> seen(static_cast<std::size_t>(n));
  mgpu::Cluster cluster(n);
  const std::int64_t sequences = l.dp * p.micro_batches * p.sequences_per_micro;
  const Step3dInput input{model, l, seed, sequences, seed + 1, p.micro_batches};
  run_ranks(cluster, "11_7.step3d_train", [&](int) { return input; });
  for (int id = 0; id < n; ++id) {
    Seen& s = seen[static_cast<std::size_t>(id)];
    s.has_loss = cluster.published<double>(id, "has_loss");
    s.loss = cluster.published<double>(id, "loss");
    s.grads = cluster.published<double>(id, "grads");
    s.params = cluster.published<double>(id, "params");
    const mgpu::MemoryLedger& m = cluster.report(id).memory;  // nothing resets the peaks
    s.weights = static_cast<double>(m.peak(mgpu::Category::weights));
    s.grads_bytes = static_cast<double>(m.peak(mgpu::Category::grads));
    s.optimizer = static_cast<double>(m.peak(mgpu::Category::optimizer));
    s.activations = static_cast<double>(m.peak(mgpu::Category::activations));
  }
  return seen;
}

// One value: every rank's part, concatenated in world-rank order.
std::vector<double> all(const std::vector<Seen>& seen, std::vector<double> Seen::*part) {
  std::vector<double> v;
  for (const Seen& s : seen) v.insert(v.end(), (s.*part).begin(), (s.*part).end());
  return v;
}

std::vector<double> each(const std::vector<Seen>& seen, double Seen::*field) {
  std::vector<double> v;
  for (const Seen& s : seen) v.push_back(s.*field);
  return v;
}

}  // namespace

MGPU_CASE_ISOLATED("11_7.step3d_values") {
  const mgpu::model::ModelConfig model = config(ctx);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  for (const Point& p : points(ctx)) {
    const std::vector<Seen> seen = run(p, model, seed);
    const std::string at = label(p);
    ctx.emit(at + "has_loss", all(seen, &Seen::has_loss));
    ctx.emit(at + "loss", all(seen, &Seen::loss), DType::f32);
    ctx.emit(at + "grad_shards", all(seen, &Seen::grads), DType::f32);
    ctx.emit(at + "params", all(seen, &Seen::params), DType::f32);
  }
  // Six sequences do not split into dp = 2 replicas of 2 micro-batches.
  ctx.emit_rejects("rejects_batch_not_splitting", [&] {
    mgpu::Cluster cluster(2);
    const Step3dInput odd{model, ly::Layout{1, 1, 2}, 1, 6, 1, 2};
    run_ranks(cluster, "11_7.step3d_once", [&](int) { return odd; });
  });
}

MGPU_CASE_ISOLATED("11_7.step3d_memory") {
  const mgpu::model::ModelConfig model = config(ctx);
  for (const Point& p : points(ctx)) {
    const std::vector<Seen> seen = run(p, model, 3);
    const std::string at = label(p);
    // Integers, exact: the share in fp32 (weights, grads) and Adam's two moments of one ZeRO-1
    // shard; an optimizer over the whole share shows dp times too much.
    ctx.emit(at + "weights_bytes", each(seen, &Seen::weights));
    ctx.emit(at + "grads_bytes", each(seen, &Seen::grads_bytes));
    ctx.emit(at + "optimizer_bytes", each(seen, &Seen::optimizer));
    // Within the rubric's band of the reference: temporaries may differ, but a stage that holds
    // more micro-batches than 1F1B needs, or frees nothing, is far outside it.
    ctx.emit(at + "activation_peak_bytes", each(seen, &Seen::activations));
  }
}

MGPU_CASE_ISOLATED("11_7.step3d_bytes") {
  const mgpu::model::ModelConfig model = config(ctx);
  for (const Point& p : points(ctx)) {
    const ly::Layout& l = p.layout;
    const int n = world_of(l);
    mgpu::Cluster cluster(n);
    // One step, weights and batch from seed 5.
    const std::int64_t sequences = l.dp * p.micro_batches * p.sequences_per_micro;
    const Step3dInput input{model, l, 5, sequences, 5, p.micro_batches};
    run_ranks(cluster, "11_7.step3d_once", [&](int) { return input; });
    // Per rank, exact: what it sent in each group (a boundary sent whole instead of in 1/tp
    // slices shows in pp; an all-reduce left out or added shows in tp; ZeRO-1 done as
    // something else in dp) and the all-gathers that rebuild the boundary.
    std::vector<double> tp_all_reduce, tp_all_gather, pp, dp;
    for (int i = 0; i < n; ++i) {
      const mgpu::TrafficMeter& t = cluster.report(i).traffic;
      tp_all_reduce.push_back(static_cast<double>(t.of(mgpu::OpKind::all_reduce, "tp").bytes_sent));
      tp_all_gather.push_back(static_cast<double>(t.of(mgpu::OpKind::all_gather, "tp").bytes_sent));
      pp.push_back(static_cast<double>(t.group("pp").bytes_sent));
      dp.push_back(static_cast<double>(t.group("dp").bytes_sent));
    }
    const std::string at = label(p);
    ctx.emit(at + "tp_all_reduce_bytes", tp_all_reduce);
    ctx.emit(at + "tp_all_gather_bytes", tp_all_gather);
    ctx.emit(at + "pp_bytes", pp);
    ctx.emit(at + "dp_bytes", dp);
    // Every rank's clock: a unit's work charged whole on each tp rank instead of its 1/tp share,
    // or a stage that waits where 1F1B would not, shows in the seconds.
    emit_clocks(ctx, at, cluster.reports());
  }
}

MGPU_CASE_ISOLATED("11_7.one_f_one_b_order") {
  // Every stage of pipelines of 1 to 4 stages with 1 to 6 micro-batches, then a drawn deeper
  // one: whether the order is valid (2m entries, forwards and backwards each in micro-batch
  // order, every backward after its forward) and its peak in flight. Properties rather than the
  // list itself, so any order the contract allows scores; a warm-up one too long or too short
  // shows in the peak wherever m > p - s.
  std::vector<std::int64_t> shape;
  for (std::int64_t p = 1; p <= 4; ++p)
    for (std::int64_t m = 1; m <= 6; ++m) shape.insert(shape.end(), {p, m});
  shape.insert(shape.end(), {ctx.uniform_int(5, 8), ctx.uniform_int(1, 12)});
  std::vector<double> valid, peak;
  for (std::size_t k = 0; k < shape.size(); k += 2) {
    const int p = static_cast<int>(shape[k]), m = static_cast<int>(shape[k + 1]);
    for (int s = 0; s < p; ++s) {
      // Student code outside Cluster::run: a program of its own in graded runs.
      const auto order = call_student<Order>("11_7.one_f_one_b_order", OrderInput{s, p, m});
      bool ok = order.size() == static_cast<std::size_t>(2 * m);
      int forwards = 0, backwards = 0, in_flight = 0, most = 0;
      for (const auto& [fwd, i] : order) {
        ok = ok && i == (fwd ? forwards : backwards) && (fwd || i < forwards);
        (fwd ? forwards : backwards) += 1;
        in_flight += fwd ? 1 : -1;
        most = std::max(most, in_flight);
      }
      valid.push_back(ok ? 1.0 : 0.0);
      peak.push_back(most);
    }
  }
  ctx.emit("valid", valid);
  ctx.emit("peak_in_flight", peak);
}
