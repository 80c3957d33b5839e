// Graded cases of 11.3's running ZeRO stages on the course model; every rank runs zero.cpp's
// rank bodies on the inputs made here. Values: every rank's reduced gradient (before Adam), Adam's
// first moment, losses and weights at each stage. Costs, graded as their own cases: every rank's
// ledger peaks per category and traffic per op. The bf16 mixed-precision mode is graded the same
// way over all four stages; stage 2 with its reduce-scatters overlapped with the backward is
// graded on values, costs and the clock; and the bad stages and owned buffers that must be
// rejected. (The shard plan and the batch slices are plain cases, in zero.cpp.)
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "zero.inputs.hpp"

using namespace mgpu::grade;
namespace z = mgpu::zero;
namespace model = mgpu::model;
using mgpu::Category;

namespace {

constexpr std::array kCategories{Category::weights,   Category::grads,       Category::master,
                                 Category::optimizer, Category::activations, Category::comm};
constexpr std::array kCollectives{mgpu::OpKind::all_reduce, mgpu::OpKind::reduce_scatter,
                                  mgpu::OpKind::all_gather};

// One point of a case's grid: a model trained by a group of `ranks`.
struct Point {
  std::string name;
  model::ModelConfig config;
  int ranks = 1;
  std::int64_t sequences_per_rank = 2;
  mgpu::ClusterConfig cluster() const {
    mgpu::ClusterConfig cc;
    cc.world_size = ranks;
    return cc;
  }
};

// The edges every stage case covers, then a draw: one rank (each shard is a whole unit, a sum
// and an average agree), the tiny model on `ranks` ranks (empty owned ranges, padding in every
// unit), and a drawn model on the same ranks.
std::vector<Point> stage_grid(Ctx& ctx, int ranks) {
  return {{"one_rank", configs::drawn(ctx), 1},
          {"tiny", configs::tiny(), ranks},
          {"drawn", configs::drawn(ctx), ranks}};
}

// What a run left on one rank.
struct RankResult {
  std::vector<float> grads;  // state.grads after the last step: reduced (stages 0, 2, 3), local (1)
  std::vector<float> adam_m;  // Adam's first moment: linear in every step's reduced gradient
  std::vector<float>
      master;  // fp32 master weights (bf16_mixed only; full at stage 0, a shard above)
  std::vector<float> weights;                              // full weights after the run
  std::vector<double> losses;                              // per step, this rank's slice
  std::array<double, mgpu::kCategoryCount> state_peaks{};  // after make_zero_state
  std::array<double, mgpu::kCategoryCount> step_peaks{};   // during the steps only
  std::array<mgpu::TrafficCounts, kCollectives.size()>
      traffic{};         // during the steps, per collective
  double steps_end = 0;  // virtual time when this rank finished its steps
};

std::vector<RankResult> train(const Point& p, const mgpu::ClusterConfig& cc, int stage,
                              bool prefetch, int steps, std::uint64_t seed,
                              z::Precision precision = z::Precision::fp32, bool overlap = false) {
  std::vector<RankResult> out(static_cast<std::size_t>(cc.world_size));
  mgpu::Cluster cluster(cc);
  // A rank may be a process of its own: it publishes what it holds, and the books of each phase
  // come from checkpoints the cluster's side records. Every rank gets the same input: the weights
  // come from the shared seed, and zero_step takes the global batch and picks the rank's slice.
  ZeroTrainInput input;
  input.config = p.config;
  input.stage = stage;
  input.prefetch = prefetch;
  input.overlap = overlap;
  input.precision = precision;
  input.steps = steps;
  input.sequences = p.sequences_per_rank * cc.world_size;
  input.seed = seed;
  run_ranks(cluster, "11_3.train", [&](int) { return input; });
  for (int id = 0; id < cc.world_size; ++id) {
    RankResult& mine = out[static_cast<std::size_t>(id)];
    const auto& marks = cluster.report(id).checkpoints;
    const mgpu::Checkpoint &built = marks.at("state"), &start = marks.at("steps_start"),
                           &end = marks.at("steps_end");
    for (Category c : kCategories) {
      mine.state_peaks[static_cast<std::size_t>(c)] = static_cast<double>(built.memory.peak(c));
      mine.step_peaks[static_cast<std::size_t>(c)] = static_cast<double>(end.memory.peak(c));
    }
    mine.steps_end = end.now;
    for (std::size_t i = 0; i < kCollectives.size(); ++i) {
      const mgpu::TrafficCounts a = start.traffic.op(kCollectives[i]),
                                b = end.traffic.op(kCollectives[i]);
      mine.traffic[i] = {b.bytes_sent - a.bytes_sent, b.bytes_received - a.bytes_received,
                         b.messages_sent - a.messages_sent};
    }
    mine.losses = cluster.published<double>(id, "losses");
    mine.grads = cluster.published<float>(id, "grads");
    if (precision == z::Precision::bf16_mixed) mine.master = cluster.published<float>(id, "master");
    mine.adam_m = cluster.published<float>(id, "adam_m");
    mine.weights = cluster.published<float>(id, "weights");
  }
  return out;
}

// The values of a run: every rank's gradient and first moment (a gradient summed instead of
// averaged, or one rank's shard in another's place, shows here though Adam hides it in the
// weights), every rank's losses, rank 0's weights and whether the replicas agree.
void emit_values(Ctx& ctx, const std::string& at, const std::vector<RankResult>& ranks) {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string rank = ".rank" + std::to_string(r);
    ctx.emit(at + ".grads" + rank, every_kth(ranks[r].grads, 400), DType::f32);
    ctx.emit(at + ".adam_m" + rank, every_kth(ranks[r].adam_m, 400), DType::f32);
    losses.insert(losses.end(), ranks[r].losses.begin(), ranks[r].losses.end());
    weights.push_back(ranks[r].weights);
  }
  ctx.emit(at + ".losses", losses, DType::f32);
  ctx.emit(at + ".weights", every_kth(ranks[0].weights, 400), DType::f32);
  ctx.emit(at + ".replicas_identical", bitwise_identical(weights));
}

// The values of a bf16 run: every rank's bf16 gradient, fp32 moment and master, the losses,
// rank 0's bf16 weights and whether the replicas agree. The names end in what they are, so the
// rubric can judge the bf16 ones (grads16, weights16) at a bf16 tolerance.
void emit_mixed_values(Ctx& ctx, const std::string& where, const std::vector<RankResult>& run) {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  for (std::size_t r = 0; r < run.size(); ++r) {
    const std::string rank = where + ".rank" + std::to_string(r);
    ctx.emit(rank + ".grads16", every_kth(run[r].grads, 400), DType::bf16);
    ctx.emit(rank + ".adam_m", every_kth(run[r].adam_m, 400), DType::f32);
    ctx.emit(rank + ".master", every_kth(run[r].master, 400), DType::f32);
    losses.insert(losses.end(), run[r].losses.begin(), run[r].losses.end());
    weights.push_back(run[r].weights);
  }
  ctx.emit(where + ".losses", losses, DType::f32);
  ctx.emit(where + ".weights16", every_kth(run[0].weights, 400), DType::bf16);
  ctx.emit(where + ".replicas_identical", bitwise_identical(weights));
}

// The costs of a run, exact per rank: the ledger's peak per category after building the state
// and during the steps (a stage holds what its table says, and a step's transient buffers are
// what the algorithm allocates: gathered units released, one unit's gradient at a time), and
// the bytes and messages each rank sent per collective. Without `with_step_comm` the step's comm
// peak is left to the caller (a budget, where a correct variant may hold less); without
// `with_state_comm` so is the transient comm peak of building the state.
void emit_costs(Ctx& ctx, const std::string& at, const std::vector<RankResult>& ranks,
                bool with_step_comm = true, bool with_state_comm = true) {
  auto per_rank = [&](auto field) {
    std::vector<double> v;
    for (const RankResult& r : ranks) v.push_back(field(r));
    return v;
  };
  for (Category c : kCategories) {
    const auto i = static_cast<std::size_t>(c);
    const std::string name = "peak_" + std::string(mgpu::to_string(c));
    if (c != Category::comm || with_state_comm)
      ctx.emit_per_rank(at + ".state." + name,
                        per_rank([&](const RankResult& r) { return r.state_peaks[i]; }));
    if (c != Category::comm || with_step_comm)
      ctx.emit_per_rank(at + ".step." + name,
                        per_rank([&](const RankResult& r) { return r.step_peaks[i]; }));
  }
  for (std::size_t i = 0; i < kCollectives.size(); ++i) {
    const std::string op(mgpu::to_string(kCollectives[i]));
    ctx.emit_per_rank(at + ".bytes_sent." + op, per_rank([&](const RankResult& r) {
                        return static_cast<double>(r.traffic[i].bytes_sent);
                      }));
    ctx.emit_per_rank(at + ".messages_sent." + op, per_rank([&](const RankResult& r) {
                        return static_cast<double>(r.traffic[i].messages_sent);
                      }));
  }
}

// A stage's grid, graded on its values or on its costs. "ranks" is the group size of every
// point but the first, so a wrong factor is named as the rank count it equals.
void stage_case(Ctx& ctx, int stage, bool costs) {
  const int ranks = ctx.pick({3, 4, 5, 6, 8});
  const int steps = ctx.uniform_int(2, 3);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  ctx.emit("ranks", ranks);
  for (const Point& p : stage_grid(ctx, ranks)) {
    const std::vector<RankResult> run = train(p, p.cluster(), stage, false, steps, seed);
    if (costs)
      emit_costs(ctx, p.name, run);
    else
      emit_values(ctx, p.name, run);
  }
}

}  // namespace

MGPU_CASE_ISOLATED("11_3.stage0_step") { stage_case(ctx, 0, false); }
MGPU_CASE_ISOLATED("11_3.stage1_step") { stage_case(ctx, 1, false); }
MGPU_CASE_ISOLATED("11_3.stage2_step") { stage_case(ctx, 2, false); }
MGPU_CASE_ISOLATED("11_3.stage3_step") { stage_case(ctx, 3, false); }

MGPU_CASE_ISOLATED("11_3.stage0_memory_traffic") { stage_case(ctx, 0, true); }
MGPU_CASE_ISOLATED("11_3.stage1_memory_traffic") { stage_case(ctx, 1, true); }
MGPU_CASE_ISOLATED("11_3.stage2_memory_traffic") { stage_case(ctx, 2, true); }
MGPU_CASE_ISOLATED("11_3.stage3_memory_traffic") { stage_case(ctx, 3, true); }

namespace {

// The grid of the overlap cases: a drawn model on one rank, the tiny model on `ranks`, and the
// overlap model (3 to 6 blocks, drawn) on `ranks` with 8 sequences each, the one timed on
// slow_cluster. Draws the drawn model first, then the overlap model's blocks.
std::vector<Point> overlap_grid(Ctx& ctx, int ranks) {
  return {{"one_rank", configs::drawn(ctx), 1},
          {"tiny", configs::tiny(), ranks},
          {"overlap", configs::overlap(ctx.uniform_int(3, 6)), ranks, 8}};
}

}  // namespace

MGPU_CASE_ISOLATED("11_3.fsdp_prefetch") {
  // Stage 3 with prefetch: values and costs at one rank and on the tiny model, then on a slow
  // "GPU" and link where a unit's gather takes about as long as its compute, so posting the next
  // gather before computing the current unit shortens the step markedly (the budgeted measure).
  // The step's comm peak is a budget, not a value: a step that prefetches nothing holds less, and
  // loses the time budget only; one that keeps gathered units holds more, and loses this budget.
  const int ranks = ctx.pick({2, 4, 8});
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  ctx.emit("ranks", ranks);
  const std::vector<Point> grid = overlap_grid(ctx, ranks);
  double comm_peak = 0, end = 0;
  for (const Point& p : grid) {
    const bool timed = p.name == "overlap";
    const std::vector<RankResult> run =
        train(p, timed ? slow_cluster(ranks) : p.cluster(), 3, true, 2, seed);
    emit_values(ctx, p.name, run);
    emit_costs(ctx, p.name, run, false);
    for (const RankResult& r : run) {
      comm_peak = std::max(comm_peak, r.step_peaks[static_cast<std::size_t>(Category::comm)]);
      if (timed) end = std::max(end, r.steps_end);
    }
  }
  ctx.measure("step_seconds", end / 2);
  ctx.measure("peak_comm_bytes", comm_peak);
}

// The bf16 mixed-precision grid: every stage, then stage 3 with prefetch, on the edge points and
// a drawn model. Value names end in what they are, so the rubric can give the bf16 ones (grads16,
// weights16) a bf16 tolerance and leave the fp32 master and moments at fp32's. The costs are the
// state per category and the traffic per collective, exact; the transient comm peaks (where
// widening and rounding buffers may legitimately come and go in another order) are a budget.
void mixed_case(Ctx& ctx, bool costs) {
  const int ranks = ctx.pick({3, 4, 5, 6, 8});
  const int steps = ctx.uniform_int(2, 3);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  ctx.emit("ranks", ranks);
  double comm_peak = 0;
  for (int variant = 0; variant <= 4; ++variant) {
    const int stage = std::min(variant, 3);
    const bool prefetch = variant == 4;
    const std::string at = "s" + std::to_string(stage) + (prefetch ? "p" : "");
    for (const Point& p : stage_grid(ctx, ranks)) {
      const std::vector<RankResult> run =
          train(p, p.cluster(), stage, prefetch, steps, seed, z::Precision::bf16_mixed);
      const std::string where = at + "." + p.name;
      if (costs) {
        emit_costs(ctx, where, run, false, false);
        for (const RankResult& r : run)
          comm_peak = std::max(comm_peak, r.step_peaks[static_cast<std::size_t>(Category::comm)]);
        continue;
      }
      emit_mixed_values(ctx, where, run);
    }
  }
  if (costs) ctx.measure("peak_comm_bytes", comm_peak);
}

MGPU_CASE_ISOLATED("11_3.mixed_step") { mixed_case(ctx, false); }
MGPU_CASE_ISOLATED("11_3.mixed_memory_traffic") { mixed_case(ctx, true); }

MGPU_CASE_ISOLATED("11_3.zero2_overlap") {
  // Stage 2 with overlap, in fp32 and in bf16, at one rank, on the tiny model and on the overlap
  // model on a slow "GPU" and link, where a unit's reduce-scatter takes about as long as a
  // unit's backward. Values as stage 2 (the same reductions in the same order, so a gradient
  // read before its reduce-scatter was waited shows here), state peaks and traffic exact. The
  // step time is budgeted: waiting each reduce-scatter right after posting it leaves the comm
  // stream's time on the critical path. The comm peak is a budget too: the reference keeps at
  // most kMaxReduceScattersInFlight staging copies; keeping them all holds a full gradient.
  const int ranks = ctx.pick({2, 4, 8});
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  ctx.emit("ranks", ranks);
  const std::vector<Point> grid = overlap_grid(ctx, ranks);
  for (z::Precision precision : {z::Precision::fp32, z::Precision::bf16_mixed}) {
    const bool mixed = precision == z::Precision::bf16_mixed;
    const std::string suffix = mixed ? "_bf16" : "";
    double comm_peak = 0, end = 0;
    for (const Point& p : grid) {
      const bool timed = p.name == "overlap";
      const std::vector<RankResult> run =
          train(p, timed ? slow_cluster(ranks) : p.cluster(), 2, false, 2, seed, precision, true);
      const std::string at = (mixed ? "bf16." : "fp32.") + p.name;
      if (mixed)
        emit_mixed_values(ctx, at, run);
      else
        emit_values(ctx, at, run);
      emit_costs(ctx, at, run, false, !mixed);
      for (const RankResult& r : run) {
        comm_peak = std::max(comm_peak, r.step_peaks[static_cast<std::size_t>(Category::comm)]);
        if (timed) end = std::max(end, r.steps_end);
      }
    }
    ctx.measure("step_seconds" + suffix, end / 2);
    ctx.measure("peak_comm_bytes" + suffix, comm_peak);
  }
}

MGPU_CASE_ISOLATED("11_3.zero_rejects") {
  const model::ModelConfig config = configs::drawn(ctx);
  mgpu::Cluster cluster(2);
  auto rejects = [&](const char* name, const char* body, int stage) {
    ctx.emit_rejects(name, [&] {
      run_ranks(cluster, body, [&](int) { return ZeroRejectInput{config, stage}; });
    });
  };
  rejects("rejects_stage_4", "11_3.make_zero_state", 4);
  // A stage bounded only from above would accept this.
  rejects("rejects_negative_stage", "11_3.make_zero_state", -1);
  rejects("rejects_wrong_owned_length", "11_3.gather_wrong_length", 0);
  // One element short of the owned range on every rank (unit 0 has at least 6 parameters, so
  // both ranks own some): it fits in the slot, so only an exact-length check rejects it.
  rejects("rejects_short_owned", "11_3.gather_short_owned", 0);
}
