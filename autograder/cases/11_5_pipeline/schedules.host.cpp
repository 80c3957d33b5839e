// Graded cases of 11.5's running pipeline: the GPipe, 1F1B, interleaved and zero-bubble action
// lists, the gradients and losses of a pipelined step on every stage rank (those schedules, and
// schedules whose stages take the micro-batches in different orders), the schedules the executor
// must reject, and the bubble and activation peaks the virtual clock and the ledger measure, each
// over a fixed grid (p = 1, m = 1, m < p, several chunks per stage) plus drawn points. No chapter
// code runs here: the schedules come from schedules.cpp's student calls, and each stage rank runs
// schedules.cpp's rank bodies on the input made here.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "11_5_pipeline/schedule_given.hpp"
#include "11_5_pipeline/tests/runtime_probes.hpp"
#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "schedules.inputs.hpp"

using namespace mgpu::grade;
namespace pl = mgpu::pipeline;
namespace model = mgpu::model;
using pipeline_probes::free_links;

namespace {

// The chapter's schedule builders, student calls of schedules.cpp: in a graded run each runs in
// a program of its own given only the schedule's shape, so nothing it leaves behind reaches this
// one, and only the schedule comes back.
namespace built {
pl::PipelineSchedule gpipe_schedule(int p, int m) {
  return call_student<pl::PipelineSchedule>("11_5.gpipe_schedule", ScheduleShape{p, m});
}
pl::PipelineSchedule one_f_one_b_schedule(int p, int m) {
  return call_student<pl::PipelineSchedule>("11_5.one_f_one_b_schedule", ScheduleShape{p, m});
}
pl::PipelineSchedule interleaved_one_f_one_b_schedule(int p, int m, int v) {
  return call_student<pl::PipelineSchedule>("11_5.interleaved_one_f_one_b_schedule",
                                            ScheduleShape{p, m, v});
}
pl::PipelineSchedule zb_h1_schedule(int p, int m) {
  return call_student<pl::PipelineSchedule>("11_5.zb_h1_schedule", ScheduleShape{p, m});
}
pl::PipelineSchedule zb_h2_schedule(int p, int m) {
  return call_student<pl::PipelineSchedule>("11_5.zb_h2_schedule", ScheduleShape{p, m});
}
}  // namespace built

// Sequences per batch: divisible by every m of the grids below (1, 2, 3, 4, 6, 8, 12).
constexpr std::int64_t kSequences = 24;

struct Point {
  int p, m;
  int v = 1;  // chunks per stage
};

// The fixed grid of (stages, micro-batches): one stage, one micro-batch, fewer micro-batches than
// stages, as many, more; then `draws` points from the seed. A drawn point that repeats one already
// in the grid is drawn again: values are named by their point, and a repeat would name one twice.
std::vector<Point> grid(Ctx& ctx, std::vector<Point> fixed, int max_p, int draws) {
  for (int i = 0; i < draws; ++i) {
    Point d;
    do d = {ctx.uniform_int(1, max_p), ctx.pick({1, 2, 3, 4, 6, 8, 12})};
    while (std::any_of(fixed.begin(), fixed.end(),
                       [&](const Point& q) { return q.p == d.p && q.m == d.m; }));
    fixed.push_back(d);
  }
  return fixed;
}

std::string label(const Point& g) {
  return "p" + std::to_string(g.p) + "_m" + std::to_string(g.m) +
         (g.v > 1 ? "_v" + std::to_string(g.v) : "") + ".";
}

// The interleaved grid: m a multiple of p (m = p included), p = 1, several v; then `draws` points
// from the seed with p <= max_p, m up to 3p and v up to 4, drawn again while one repeats.
std::vector<Point> interleaved_grid(Ctx& ctx, std::vector<Point> fixed, int max_p, int draws) {
  for (int i = 0; i < draws; ++i) {
    Point d;
    do {
      d.p = static_cast<int>(ctx.uniform_int(1, max_p));
      d.m = d.p * static_cast<int>(ctx.uniform_int(1, 3));
      d.v = static_cast<int>(ctx.uniform_int(1, 4));
    } while (kSequences % d.m != 0 || std::any_of(fixed.begin(), fixed.end(), [&](const Point& q) {
               return q.p == d.p && q.m == d.m && q.v == d.v;
             }));
    fixed.push_back(d);
  }
  return fixed;
}

// A schedule as numbers: its chunks per stage, then stage by stage +(k v + c + 1) for the forward
// of micro-batch k on chunk c, -(k v + c + 1) for its backward (with one chunk, +-(k + 1)),
// -(kInputHalf + k v + c + 1) for its input half and -(kWeightHalf + ...) for its weight half,
// and 0 closing each stage's program. Micro-batches are renumbered in the order stage 0 first runs
// their forwards (equal micro-batches make any shared order the same schedule).
constexpr int kInputHalf = 1'000'000, kWeightHalf = 2'000'000;

std::vector<double> encode(const pl::PipelineSchedule& s) {
  std::vector<int> renumber(static_cast<std::size_t>(std::max(s.micro_batches, 0)), -1);
  int next = 0;
  if (!s.per_stage.empty())
    for (const pl::Action& a : s.per_stage.front())
      if (a.pass == pl::Pass::forward && a.micro_batch >= 0 && a.micro_batch < s.micro_batches &&
          renumber[static_cast<std::size_t>(a.micro_batch)] < 0)
        renumber[static_cast<std::size_t>(a.micro_batch)] = next++;
  for (int& k : renumber)  // micro-batches stage 0 never runs keep their place after the others
    if (k < 0) k = next++;
  std::vector<double> out{static_cast<double>(s.chunks)};
  for (const auto& program : s.per_stage) {
    for (const pl::Action& a : program) {
      const bool known = a.micro_batch >= 0 && a.micro_batch < s.micro_batches;
      const int k = known ? renumber[static_cast<std::size_t>(a.micro_batch)] : a.micro_batch;
      const int id = k * std::max(s.chunks, 1) + a.chunk + 1;
      switch (a.pass) {
        case pl::Pass::forward:
          out.push_back(id);
          break;
        case pl::Pass::backward:
          out.push_back(-id);
          break;
        case pl::Pass::backward_input:
          out.push_back(-(kInputHalf + id));
          break;
        case pl::Pass::backward_weight:
          out.push_back(-(kWeightHalf + id));
          break;
      }
    }
    out.push_back(0);
  }
  return out;
}

// A schedule checked the way the grader sees it: valid or not, the actions, and the micro-batches
// each stage holds at its peak (what its activation memory must hold).
void emit_schedule(Ctx& ctx, const std::string& name, const pl::PipelineSchedule& s) {
  ctx.emit_rejects(name + "_invalid", [&] { pl::check_schedule(s); });
  ctx.emit(name, encode(s));
  std::vector<double> held;
  for (int stage = 0; stage < s.stages && static_cast<std::size_t>(stage) < s.per_stage.size();
       ++stage)
    held.push_back(static_cast<double>(pl::schedule_in_flight(s, stage)));
  ctx.emit(name + "_in_flight", held);  // stage by stage
}

// One pipelined step of `schedule` in a pipeline group whose ranks are the world's in reverse
// (stage s on world rank p-1-s), so an executor that takes world ranks for stages fails: each
// stage rank runs the rank body "11_5.pipeline_step".
struct Step {
  std::vector<std::vector<float>> grads;  // per world rank, the whole gradient buffer
  std::vector<double> loss;               // per world rank, what run_pipeline returned
  std::vector<mgpu::RankReport> reports;  // per world rank
  double makespan = 0;
};

Step run_step(const model::Model& net, const pl::PipelineSchedule& schedule,
              const model::Batch& batch, std::uint64_t seed) {
  const int p = schedule.stages;
  // What run_pipeline's contract gives every stage: the whole schedule (the executor checks it
  // whole), every micro-batch (each stage runs each of them), the weights' seed (replicated).
  const StepInput input{net.config(), schedule,
                        pl::split_micro_batches(batch, schedule.micro_batches), seed};
  Step step;
  step.grads.resize(static_cast<std::size_t>(p));
  step.loss.assign(static_cast<std::size_t>(p), 0.0);
  mgpu::Cluster cluster(free_links(p));
  run_ranks(cluster, "11_5.pipeline_step", [&](int) { return input; });
  for (int i = 0; i < p; ++i) {
    step.loss[static_cast<std::size_t>(i)] = published_value(cluster, i, "loss");
    step.grads[static_cast<std::size_t>(i)] = cluster.published<float>(i, "grads");
  }
  step.reports = cluster.reports();
  step.makespan = cluster.makespan();
  return step;
}

// A small course model with p * v * (1 or 2) blocks, drawn from the seed.
model::ModelConfig small_model(Ctx& ctx, int p, int v = 1) {
  model::ModelConfig c;
  c.d_in = ctx.uniform_int(2, 6);
  c.n_heads = ctx.pick({1, 2});
  c.d_model = c.n_heads * ctx.uniform_int(2, 6);
  c.d_ff = 2 * c.d_model;
  c.n_layers = p * v * ctx.uniform_int(1, 2);
  c.seq_len = ctx.uniform_int(2, 4);
  c.d_out = ctx.uniform_int(1, 3);
  return c;
}

// Gradients (before any optimizer step) and loss on every stage rank, and each rank's peak of
// activations, for the schedule `make` builds at every grid point.
template <class MakeSchedule>
void gradients_case(Ctx& ctx, const std::vector<Point>& points, MakeSchedule make) {
  for (const Point& g : points) {
    const model::Model net(small_model(ctx, g.p, g.v));
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const Step step = run_step(net, make(g), net.make_batch(kSequences, seed + 1), seed);
    const std::string at = label(g);
    for (std::size_t r = 0; r < step.grads.size(); ++r)
      ctx.emit(at + "grads_rank" + std::to_string(r), every_kth(step.grads[r]), DType::f32);
    ctx.emit_per_rank(at + "loss", step.loss, DType::f32);
    emit_peaks(ctx, at, step.reports, {mgpu::Category::activations});
  }
}

// The grid of the gradient cases: p = 1 (with m = 1 and m > 1), m = 1, m < p, m = p, m > p.
std::vector<Point> gradient_grid(Ctx& ctx) {
  return grid(ctx, {{1, 1}, {1, 3}, {2, 1}, {4, 2}, {3, 3}, {2, 6}}, 4, 1);
}

// The (p, m) points a schedule is emitted at, edges included: one stage, one micro-batch, m < p.
std::vector<Point> schedule_grid(Ctx& ctx) {
  return grid(ctx, {{1, 1}, {1, 5}, {2, 1}, {4, 2}, {3, 3}, {4, 8}, {8, 3}}, 8, 2);
}

// Blocks that cost the same on every stage to about 0.1%, with one-feature embedding and head:
// FFN only (d_ff = 16 d_model, sequences of 2) or with attention (d_ff = 4 d_model, 2 heads,
// sequences of 8); d_model is drawn from {8, 16}.
model::ModelConfig equal_stage_model(Ctx& ctx, std::int64_t layers, bool attention = false) {
  model::ModelConfig c;
  c.d_in = 1;
  c.d_model = ctx.pick({8, 16});
  c.d_ff = (attention ? 4 : 16) * c.d_model;
  c.n_layers = layers;
  c.attention = attention;
  c.n_heads = 2;
  c.seq_len = attention ? 8 : 2;
  c.d_out = 1;
  return c;
}

// The bytes one micro-batch leaves saved on each of `chunks` equal model chunks (index = chunk),
// from the runtime's own forward on one rank. It runs no chapter code (the runtime's units and
// the given stage_units), so it is the case's own measuring and stays here, not in a rank body:
// the student's program must not produce the yardstick its peaks are divided by.
std::vector<double> saved_per_chunk(const model::Model& net, const model::Batch& micro,
                                    int chunks) {
  std::vector<double> saved(static_cast<std::size_t>(chunks), 0.0);
  mgpu::Cluster probe(1);
  probe.run([&](mgpu::Rank& r) {
    const model::Replica replica = net.make_replica(r.memory(), 1);
    mgpu::Buffer<float> x = net.input(r, micro);
    for (int j = 0; j < chunks; ++j) {
      const pl::StageUnits units = pl::stage_units(net, chunks, j);
      for (int u = units.first; u < units.last; ++u) {
        model::UnitCache cache;
        x = net.unit_forward(r, u, net.unit_view(replica.params.span(), u), std::move(x),
                             micro.tokens(), &cache);
        saved[static_cast<std::size_t>(j)] += static_cast<double>(cache.bytes());
      }
    }
    r.publish("saved", saved);  // the rank may be a process of its own
  });
  return probe.published<double>(0, "saved");
}

// The report of pipeline stage s of a step (world rank p-1-s holds it).
const mgpu::RankReport& stage_report(const Step& step, int s) {
  return step.reports[step.reports.size() - 1 - static_cast<std::size_t>(s)];
}

// Per stage, the share of the step it spends not computing.
std::vector<double> stage_idle(const Step& step) {
  std::vector<double> idle;
  for (int s = 0; s < static_cast<int>(step.reports.size()); ++s)
    idle.push_back(1.0 - stage_report(step, s).clock.compute_time() / step.makespan);
  return idle;
}

// A valid schedule with v chunks per stage in an order drawn from the seed: every action of
// every stage is put into one random order in which each action's input already exists (the
// forward of the model chunk before, the backward of the chunk after), and each stage runs its
// actions in that order. Deadlock-free by construction, yet the stages run the micro-batches in
// orders of their own, so only messages told apart by their tags pair up.
pl::PipelineSchedule random_valid_schedule(Ctx& ctx, const Point& g) {
  const int chunks = g.p * g.v;
  pl::PipelineSchedule s{g.p, g.m,
                         std::vector<std::vector<pl::Action>>(static_cast<std::size_t>(g.p)), g.v};
  // Per micro-batch, how far its forward has gone (model chunks done) and its backward.
  std::vector<int> fwd(static_cast<std::size_t>(g.m), 0), bwd(static_cast<std::size_t>(g.m), 0);
  for (int left = 2 * chunks * g.m; left > 0; --left) {
    std::vector<int> ready;  // micro-batches whose next action can run: forward while fwd < chunks
    for (int k = 0; k < g.m; ++k)
      if (bwd[static_cast<std::size_t>(k)] < chunks) ready.push_back(k);
    const int k = ready[static_cast<std::size_t>(
        ctx.uniform_int(0, static_cast<std::int64_t>(ready.size()) - 1))];
    int& f = fwd[static_cast<std::size_t>(k)];
    int& b = bwd[static_cast<std::size_t>(k)];
    const bool forward = f < chunks;
    const int j = forward ? f++ : chunks - 1 - b++;  // the model chunk this action runs
    s.per_stage[static_cast<std::size_t>(j % g.p)].push_back(
        {forward ? pl::Pass::forward : pl::Pass::backward, k, j / g.p});
  }
  return s;
}

}  // namespace

MGPU_CASE_ISOLATED("11_5.schedules") {
  for (const Point& g : schedule_grid(ctx)) {
    emit_schedule(ctx, label(g) + "gpipe", built::gpipe_schedule(g.p, g.m));
    emit_schedule(ctx, label(g) + "one_f_one_b", built::one_f_one_b_schedule(g.p, g.m));
  }
  ctx.emit_rejects("rejects_zero_stages", [&] { built::gpipe_schedule(0, 2); });
  ctx.emit_rejects("rejects_zero_micro_batches", [&] { built::one_f_one_b_schedule(2, 0); });
}

MGPU_CASE_ISOLATED("11_5.gpipe_gradients") {
  gradients_case(ctx, gradient_grid(ctx),
                 [](const Point& g) { return built::gpipe_schedule(g.p, g.m); });
}

MGPU_CASE_ISOLATED("11_5.one_f_one_b_gradients") {
  gradients_case(ctx, gradient_grid(ctx),
                 [](const Point& g) { return built::one_f_one_b_schedule(g.p, g.m); });
}

MGPU_CASE_ISOLATED("11_5.any_schedule_gradients") {
  // Every stage runs all its forwards, then all its backwards, each in its own drawn order: valid
  // and deadlock-free (no forward waits on a backward), but a stage receives the micro-batches in
  // another order than its neighbour sent them, so only messages told apart by their tags pair up.
  const std::vector<Point> points = grid(ctx, {{2, 3}, {3, 4}, {4, 6}}, 4, 1);
  gradients_case(ctx, points, [&ctx](const Point& g) {
    pl::PipelineSchedule s{g.p, g.m,
                           std::vector<std::vector<pl::Action>>(static_cast<std::size_t>(g.p))};
    std::vector<int> order(static_cast<std::size_t>(g.m));
    std::iota(order.begin(), order.end(), 0);
    for (auto& program : s.per_stage)
      for (pl::Pass pass : {pl::Pass::forward, pl::Pass::backward}) {
        std::shuffle(order.begin(), order.end(), ctx.rng());
        for (int k : order) program.push_back({pass, k});
      }
    return s;
  });
}

MGPU_CASE_ISOLATED("11_5.bubble_and_in_flight") {
  // FFN-only blocks with d_ff = 16 d_model and one-feature embedding and head: stages cost the
  // same to about 0.1%, and a micro-batch's saved activations dwarf the boundary buffers in
  // transit, so the peak divided by one micro-batch's share rounds down to the count held.
  for (const Point& g : grid(ctx, {{1, 3}, {2, 1}, {4, 2}, {3, 6}}, 4, 1)) {
    const model::Model net(equal_stage_model(ctx, g.p));
    const model::Batch batch = net.make_batch(kSequences, 9);
    const std::vector<model::Batch> micro = pl::split_micro_batches(batch, g.m);
    // One micro-batch's saved activations per stage.
    const std::vector<double> per_mb = saved_per_chunk(net, micro[0], g.p);
    for (bool f1b : {false, true}) {
      const pl::PipelineSchedule schedule =
          f1b ? built::one_f_one_b_schedule(g.p, g.m) : built::gpipe_schedule(g.p, g.m);
      const Step step = run_step(net, schedule, batch, 1);
      // Stage by stage (world rank p-1-s holds stage s); the peaks below go by world rank.
      std::vector<double> held;
      for (int s = 0; s < g.p; ++s)
        held.push_back(std::floor(
            static_cast<double>(stage_report(step, s).memory.peak(mgpu::Category::activations)) /
            per_mb[static_cast<std::size_t>(s)]));
      const std::string name = label(g) + (f1b ? "one_f_one_b" : "gpipe");
      ctx.emit(name + "_bubble", stage_idle(step), DType::f32);
      ctx.emit(name + "_in_flight", held);
      emit_peaks(ctx, name + ".", step.reports, {mgpu::Category::activations});
    }
  }
}

MGPU_CASE_ISOLATED("11_5.pipeline_rejects") {
  model::ModelConfig c;
  c.n_layers = 2;
  const model::Model net(c);
  const std::vector<model::Batch> micro = pl::split_micro_batches(net.make_batch(4, 1), 2);
  mgpu::Cluster cluster(2);
  // Both ranks run "11_5.pipeline_reject" on `schedule` with every micro-batch, as run_pipeline's
  // contract gives each stage; with `only_rank0`, rank 1 is given nothing and runs nothing.
  const auto run = [&](const pl::PipelineSchedule& schedule, bool with_units, bool only_rank0) {
    run_ranks(cluster, "11_5.pipeline_reject", [&](int r) {
      if (only_rank0 && r != 0) return RejectInput{net.config(), {}, {}, with_units, false};
      return RejectInput{net.config(), schedule, micro, with_units, true};
    });
  };
  ctx.emit_rejects("rejects_schedule_for_other_p",
                   [&] { run(built::gpipe_schedule(3, 2), true, false); });
  // A one-stage schedule on rank 0 of a two-rank group, rank 1 running nothing: unchecked, rank 0
  // would run the whole model alone and return, with no message or stage range to fail on, so
  // only run_pipeline's own check of the schedule's p against pp.size() rejects it.
  ctx.emit_rejects("rejects_schedule_for_fewer_stages",
                   [&] { run(built::gpipe_schedule(1, 2), false, true); });
  ctx.emit_rejects("rejects_invalid_schedule", [&] {
    pl::PipelineSchedule bad = built::gpipe_schedule(2, 2);
    std::swap(bad.per_stage[1].front(), bad.per_stage[1].back());
    run(bad, true, false);
  });
  // Every stage skips the backward of micro-batch 1: unchecked, the step runs to its end without
  // any fault (that micro-batch's caches are simply never used), so only check_schedule rejects
  // it; the swapped program above may instead crash an unchecked executor.
  ctx.emit_rejects("rejects_schedule_missing_a_backward", [&] {
    pl::PipelineSchedule bad = built::gpipe_schedule(2, 2);
    for (auto& program : bad.per_stage) program.pop_back();
    run(bad, true, false);
  });
}

MGPU_CASE_ISOLATED("11_5.interleaved_schedule") {
  const std::vector<Point> fixed = {{1, 1, 2}, {2, 2, 2}, {2, 4, 3}, {4, 4, 2},
                                    {4, 8, 2}, {3, 6, 4}, {4, 8, 1}};
  for (const Point& g : interleaved_grid(ctx, fixed, 8, 2))
    emit_schedule(ctx, label(g) + "interleaved",
                  built::interleaved_one_f_one_b_schedule(g.p, g.m, g.v));
  ctx.emit_rejects("rejects_zero_stages",
                   [&] { built::interleaved_one_f_one_b_schedule(0, 2, 2); });
  ctx.emit_rejects("rejects_zero_micro_batches",
                   [&] { built::interleaved_one_f_one_b_schedule(2, 0, 2); });
  ctx.emit_rejects("rejects_zero_chunks",
                   [&] { built::interleaved_one_f_one_b_schedule(2, 2, 0); });
  ctx.emit_rejects("rejects_m_not_multiple_of_p",
                   [&] { built::interleaved_one_f_one_b_schedule(4, 6, 2); });
}

MGPU_CASE_ISOLATED("11_5.interleaved_gradients") {
  gradients_case(
      ctx, interleaved_grid(ctx, {{1, 2, 2}, {2, 2, 2}, {2, 4, 3}, {4, 4, 2}, {3, 6, 2}}, 4, 1),
      [](const Point& g) { return built::interleaved_one_f_one_b_schedule(g.p, g.m, g.v); });
}

MGPU_CASE_ISOLATED("11_5.any_interleaved_schedule_gradients") {
  gradients_case(ctx, interleaved_grid(ctx, {{2, 3, 2}, {3, 4, 2}, {2, 6, 3}, {4, 4, 2}}, 4, 1),
                 [&ctx](const Point& g) { return random_valid_schedule(ctx, g); });
}

MGPU_CASE_ISOLATED("11_5.interleaved_bubble_and_in_flight") {
  // One FFN block per chunk (d_ff = 16 d_model) and one-feature embedding and head: chunks cost
  // the same to about 0.1%, so each stage's idle share is the interleaved bubble, and the
  // activation peak over the mean chunk's saved bytes rounds to the chunk-micro-batches held.
  for (const Point& g : interleaved_grid(ctx, {{2, 2, 2}, {2, 4, 3}, {4, 4, 2}, {4, 8, 2}}, 4, 1)) {
    const model::Model net(equal_stage_model(ctx, g.p * g.v));
    const model::Batch batch = net.make_batch(kSequences, 9);
    const std::vector<model::Batch> micro = pl::split_micro_batches(batch, g.m);
    // One micro-batch's saved activations per model chunk.
    const std::vector<double> per_chunk = saved_per_chunk(net, micro[0], g.p * g.v);
    const Step step =
        run_step(net, built::interleaved_one_f_one_b_schedule(g.p, g.m, g.v), batch, 1);
    std::vector<double> held;  // stage by stage
    for (int s = 0; s < g.p; ++s) {
      double mean_chunk = 0;  // the stage's chunks: model chunks s, s + p, ...
      for (int j = s; j < g.p * g.v; j += g.p)
        mean_chunk += per_chunk[static_cast<std::size_t>(j)] / g.v;
      held.push_back(std::round(
          static_cast<double>(stage_report(step, s).memory.peak(mgpu::Category::activations)) /
          mean_chunk));
    }
    const std::string name = label(g) + "interleaved";
    ctx.emit(name + "_bubble", stage_idle(step), DType::f32);
    ctx.emit(name + "_in_flight", held);
    emit_peaks(ctx, name + ".", step.reports, {mgpu::Category::activations});
  }
}

MGPU_CASE_ISOLATED("11_5.zb_h1_schedule") {
  for (const Point& g : schedule_grid(ctx))
    emit_schedule(ctx, label(g) + "zb_h1", built::zb_h1_schedule(g.p, g.m));
  ctx.emit_rejects("rejects_zero_stages", [&] { built::zb_h1_schedule(0, 2); });
  ctx.emit_rejects("rejects_zero_micro_batches", [&] { built::zb_h1_schedule(2, 0); });
}

MGPU_CASE_ISOLATED("11_5.zb_h1_gradients") {
  gradients_case(ctx, gradient_grid(ctx),
                 [](const Point& g) { return built::zb_h1_schedule(g.p, g.m); });
}

MGPU_CASE_ISOLATED("11_5.zb_h1_bubble_and_in_flight") {
  // FFN-only blocks (T_F = T_B = T_W) or attention blocks (T_W < T_F < T_B) with one-feature
  // embedding and head, so stages cost the same to about 0.1%: each stage's idle share on the
  // virtual clock is ZB-H1's, and every rank's activation peak is what it holds between halves.
  std::vector<Point> points = {{2, 4}, {4, 8}, {3, 6}, {4, 4}};
  Point d;
  do d = {static_cast<int>(ctx.uniform_int(2, 4)), ctx.pick({4, 6, 8, 12})};
  while (d.m < d.p || std::any_of(points.begin(), points.end(),
                                  [&](const Point& q) { return q.p == d.p && q.m == d.m; }));
  points.push_back(d);
  for (const Point& g : points) {
    for (bool attention : {false, true}) {
      const model::Model net(equal_stage_model(ctx, g.p, attention));
      const Step step =
          run_step(net, built::zb_h1_schedule(g.p, g.m), net.make_batch(kSequences, 9), 1);
      const std::string name = label(g) + (attention ? "attention" : "ffn");
      ctx.emit(name + "_bubble", stage_idle(step), DType::f32);
      emit_peaks(ctx, name + ".", step.reports, {mgpu::Category::activations});
    }
  }
}

namespace {

// Per stage (stage by stage; world rank p-1-s holds stage s), the share of the step the stage
// waits between the start of its first compute span and the end of its last: the bubble of a
// step when steps run back to back.
std::vector<double> inner_idle(const Step& step, int p) {
  std::vector<double> idle;
  for (int s = 0; s < p; ++s) {
    const mgpu::VirtualClock& clock = step.reports[static_cast<std::size_t>(p - 1 - s)].clock;
    double first = -1, last = 0;
    for (const mgpu::Span& span : clock.timeline()) {
      if (span.stream != mgpu::Stream::compute || span.kind != mgpu::SpanKind::compute) continue;
      if (first < 0) first = span.start;
      last = std::max(last, span.end);
    }
    idle.push_back((last - first - clock.compute_time()) / step.makespan);
  }
  return idle;
}

}  // namespace

MGPU_CASE_ISOLATED("11_5.zb_h2_schedule") {
  for (const Point& g :
       grid(ctx, {{1, 1}, {1, 5}, {2, 1}, {4, 2}, {3, 3}, {2, 3}, {4, 7}, {4, 8}, {8, 3}}, 8, 2))
    emit_schedule(ctx, label(g) + "zb_h2", built::zb_h2_schedule(g.p, g.m));
  ctx.emit_rejects("rejects_zero_stages", [&] { built::zb_h2_schedule(0, 2); });
  ctx.emit_rejects("rejects_zero_micro_batches", [&] { built::zb_h2_schedule(2, 0); });
}

MGPU_CASE_ISOLATED("11_5.zb_h2_gradients") {
  gradients_case(ctx, gradient_grid(ctx),
                 [](const Point& g) { return built::zb_h2_schedule(g.p, g.m); });
}

MGPU_CASE_ISOLATED("11_5.zb_h2_bubble_and_in_flight") {
  // FFN-only blocks (T_F = T_B = T_W, the formula's case) and attention blocks, one-feature
  // embedding and head: per stage the idle share of the whole step, the idle share inside the
  // stage's own part of it (zero once m >= 2p - 1 for FFN-only blocks), and every rank's peak.
  std::vector<Point> points = {{2, 4}, {4, 8}, {3, 6}, {4, 4}, {2, 1}};
  Point d;
  do d = {static_cast<int>(ctx.uniform_int(2, 4)), ctx.pick({2, 4, 6, 8, 12})};
  while (std::any_of(points.begin(), points.end(),
                     [&](const Point& q) { return q.p == d.p && q.m == d.m; }));
  points.push_back(d);
  for (const Point& g : points) {
    for (bool attention : {false, true}) {
      const model::Model net(equal_stage_model(ctx, g.p, attention));
      const Step step =
          run_step(net, built::zb_h2_schedule(g.p, g.m), net.make_batch(kSequences, 9), 1);
      const std::string name = label(g) + (attention ? "attention" : "ffn");
      ctx.emit(name + "_bubble", stage_idle(step), DType::f32);
      ctx.emit(name + "_inner_bubble", inner_idle(step, g.p), DType::f32);
      emit_peaks(ctx, name + ".", step.reports, {mgpu::Category::activations});
    }
  }
}
