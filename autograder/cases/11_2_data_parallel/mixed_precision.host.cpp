// Graded cases of 11.2's data parallelism in bf16 mixed precision (the ranks run
// mixed_precision.cpp's rank body): the values a few steps leave
// on every rank (bf16 gradient, fp32 moment and master, bf16 weights, losses), and the costs:
// the ledger per category against the recipe's 2 + 2 + 4 + 8 bytes, and the bytes on the wire.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "case.hpp"
#include "data_parallel.inputs.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
namespace model = mgpu::model;
using mgpu::Category;

namespace {

// Everything but comm is exact; the step's comm peak (fp32 scratch that a correct step may hold
// in another order) is the case's budget measure.
constexpr std::array kExact{Category::weights, Category::grads, Category::master,
                            Category::optimizer, Category::activations};

// What a run left on one rank.
struct RankResult {
  std::vector<float> grads16;    // the averaged bf16 gradient of the last step (widened, exact)
  std::vector<float> adam_m;     // Adam's first moment: linear in every step's averaged gradient
  std::vector<float> master;     // fp32 master weights
  std::vector<float> weights16;  // bf16 weights (widened, exact)
  std::vector<double> losses;    // per step, this rank's slice
  std::array<double, mgpu::kCategoryCount> built{};      // held when make_mixed_replica returned
  std::array<double, mgpu::kCategoryCount> step_peak{};  // peaks during the steps only
  mgpu::TrafficCounts all_reduce, total;                 // sent during the steps
};

// One point of the grid: a model trained by `ranks` ranks on 2 sequences per rank.
struct Point {
  std::string name;
  model::ModelConfig config;
  int ranks = 1;
};

std::vector<RankResult> train(const Point& p, int steps, std::uint64_t seed) {
  std::vector<RankResult> out(static_cast<std::size_t>(p.ranks));
  mgpu::Cluster cluster(p.ranks);
  // A rank may be a process of its own: what it holds is published and read back after the run;
  // the step peaks and traffic come from the cluster's reports (the replica is built without
  // communication, so the run's traffic is the steps').
  TrainInput input;
  input.config = p.config;
  input.steps = steps;
  input.sequences = 2 * p.ranks;
  input.seed = seed;
  run_ranks(cluster, "11_2.mixed_train", [&](int) { return input; });
  for (int id = 0; id < p.ranks; ++id) {
    RankResult& mine = out[static_cast<std::size_t>(id)];
    const mgpu::RankReport& rep = cluster.report(id);
    const std::vector<double> built = cluster.published<double>(id, "built");
    for (std::size_t c = 0; c < mgpu::kCategoryCount; ++c) {
      mine.built[c] = built[c];
      mine.step_peak[c] = static_cast<double>(rep.memory.peak(static_cast<Category>(c)));
    }
    mine.all_reduce = rep.traffic.op(mgpu::OpKind::all_reduce);
    mine.total = rep.traffic.total();
    mine.losses = cluster.published<double>(id, "losses");
    mine.grads16 = cluster.published<float>(id, "grads16");
    mine.weights16 = cluster.published<float>(id, "weights16");
    mine.adam_m = cluster.published<float>(id, "adam_m");
    mine.master = cluster.published<float>(id, "master");
  }
  return out;
}

// The grid: one rank (nothing to average), a fixed model on 3 ranks whose gradient length 3 does
// not divide, and a drawn model on the drawn rank count (the "ranks" the feedback's
// sum-vs-average hint uses).
std::vector<Point> grid(Ctx& ctx, int ranks) {
  model::ModelConfig uneven;
  uneven.d_in = 5;
  uneven.d_model = 8;
  uneven.n_heads = 2;
  uneven.d_ff = 16;
  uneven.n_layers = 2;
  uneven.seq_len = 3;
  uneven.d_out = 2;
  return {{"drawn", configs::drawn(ctx), ranks},
          {"one_rank", configs::drawn(ctx), 1},
          {"uneven", uneven, 3}};
}

// Values named "<point>.rank<r>.<what>", the bf16 ones ending in 16 so the rubric can give them a
// bf16 tolerance while the fp32 master and moment keep fp32's.
void emit_values(Ctx& ctx, const std::string& at, const std::vector<RankResult>& run) {
  std::vector<double> losses;
  std::vector<std::vector<float>> replicas;
  for (std::size_t r = 0; r < run.size(); ++r) {
    const std::string rank = at + ".rank" + std::to_string(r);
    ctx.emit(rank + ".grads16", every_kth(run[r].grads16, 400), DType::bf16);
    ctx.emit(rank + ".adam_m", every_kth(run[r].adam_m, 400), DType::f32);
    ctx.emit(rank + ".master", every_kth(run[r].master, 400), DType::f32);
    losses.insert(losses.end(), run[r].losses.begin(), run[r].losses.end());
    std::vector<float> both = run[r].weights16;
    both.insert(both.end(), run[r].master.begin(), run[r].master.end());
    replicas.push_back(std::move(both));
  }
  ctx.emit(at + ".losses", losses, DType::f32);
  ctx.emit(at + ".weights16", every_kth(run[0].weights16, 400), DType::bf16);
  ctx.emit(at + ".replicas_identical", bitwise_identical(replicas));
}

// Costs, exact per rank: every category but comm when the replica is built and at its peak during
// the steps, and the bytes and messages sent, by the all-reduce and in all.
void emit_costs(Ctx& ctx, const std::string& at, const std::vector<RankResult>& run) {
  auto per_rank = [&](auto field) {
    std::vector<double> v;
    for (const RankResult& r : run) v.push_back(field(r));
    return v;
  };
  for (Category c : kExact) {
    const auto i = static_cast<std::size_t>(c);
    const std::string name = "peak_" + std::string(mgpu::to_string(c));
    ctx.emit_per_rank(at + ".built." + name,
                      per_rank([&](const RankResult& r) { return r.built[i]; }));
    ctx.emit_per_rank(at + ".step." + name,
                      per_rank([&](const RankResult& r) { return r.step_peak[i]; }));
  }
  ctx.emit_per_rank(at + ".bytes_sent.all_reduce", per_rank([](const RankResult& r) {
                      return static_cast<double>(r.all_reduce.bytes_sent);
                    }));
  ctx.emit_per_rank(at + ".messages_sent.all_reduce", per_rank([](const RankResult& r) {
                      return static_cast<double>(r.all_reduce.messages_sent);
                    }));
  ctx.emit_per_rank(at + ".bytes_sent.total", per_rank([](const RankResult& r) {
                      return static_cast<double>(r.total.bytes_sent);
                    }));
}

void mixed_case(Ctx& ctx, bool costs) {
  const int ranks = ctx.pick({2, 3, 4, 5, 6, 8});
  const int steps = ctx.uniform_int(2, 3);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  ctx.emit("ranks", ranks);
  double comm_peak = 0;
  for (const Point& p : grid(ctx, ranks)) {
    const std::vector<RankResult> run = train(p, steps, seed);
    if (!costs) {
      emit_values(ctx, p.name, run);
      continue;
    }
    emit_costs(ctx, p.name, run);
    for (const RankResult& r : run)
      comm_peak = std::max(comm_peak, r.step_peak[static_cast<std::size_t>(Category::comm)]);
  }
  if (costs) ctx.measure("peak_comm_bytes", comm_peak);
}

}  // namespace

MGPU_CASE_ISOLATED("11_2.mixed_step") { mixed_case(ctx, false); }
MGPU_CASE_ISOLATED("11_2.mixed_memory_traffic") { mixed_case(ctx, true); }
