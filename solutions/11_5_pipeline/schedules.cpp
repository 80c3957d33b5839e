// 11.5 reference solution: GPipe, 1F1B and interleaved 1F1B schedules as per-stage action lists,
// and the executor that runs any valid schedule, with any number of chunks per stage, over the
// stage ranks of a pipeline group.
#include "11_5_pipeline/schedules.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace mgpu::pipeline {

namespace {

void check_p_m(const char* where, int p, int m) {
  if (p < 1 || m < 1)
    throw std::invalid_argument(std::string(where) + ": p=" + std::to_string(p) +
                                ", m=" + std::to_string(m) +
                                "; a pipeline needs at least one stage and one micro-batch");
}

// The tag of the message an action receives: one per (micro-batch, chunk, direction), so every
// receive gets its own message whatever order the neighbour sent in.
int tag_of(const Action& a, int v) {
  return 2 * (a.micro_batch * v + a.chunk) + (a.pass == Pass::backward ? 1 : 0);
}

// Where the p*v model chunks live: round robin, so that a micro-batch visits every stage once
// per round and the pipeline fills in chunk-sized slots.
struct Chunks {
  int p, v;
  int model_chunk(int stage, int chunk) const { return chunk * p + stage; }
  int stage_of(int j) const { return j % p; }
  int chunk_of(int j) const { return j / p; }
};

// What one in-flight (micro-batch, chunk) keeps on this stage between its forward and backward.
struct InFlight {
  std::vector<model::UnitCache> caches;  // one per unit of the chunk
  Buffer<float> dloss;                   // last model chunk only: the gradient of the head output
};

}  // namespace

PipelineSchedule gpipe_schedule(int p, int m) {
  check_p_m("gpipe_schedule", p, m);
  PipelineSchedule s{p, m, std::vector<std::vector<Action>>(static_cast<std::size_t>(p))};
  for (auto& program : s.per_stage) {
    for (int k = 0; k < m; ++k) program.push_back({Pass::forward, k});
    for (int k = 0; k < m; ++k) program.push_back({Pass::backward, k});
  }
  return s;
}

PipelineSchedule one_f_one_b_schedule(int p, int m) {
  check_p_m("one_f_one_b_schedule", p, m);
  PipelineSchedule s{p, m, std::vector<std::vector<Action>>(static_cast<std::size_t>(p))};
  for (int stage = 0; stage < p; ++stage) {
    auto& program = s.per_stage[static_cast<std::size_t>(stage)];
    const int warmup = std::min(m, p - 1 - stage);
    int next_f = 0, next_b = 0;
    while (next_f < warmup) program.push_back({Pass::forward, next_f++});
    while (next_f < m) {
      program.push_back({Pass::forward, next_f++});
      program.push_back({Pass::backward, next_b++});
    }
    while (next_b < m) program.push_back({Pass::backward, next_b++});
  }
  return s;
}

double run_pipeline(Rank& rank, Comm& pp, const model::Model& model,
                    const PipelineSchedule& schedule, std::span<const float> params,
                    std::span<float> grads, std::span<const model::Batch> micro_batches) {
  check_schedule(schedule);
  if (schedule.stages != pp.size() ||
      schedule.micro_batches != static_cast<int>(micro_batches.size()))
    throw std::invalid_argument(
        "run_pipeline: the schedule is for p=" + std::to_string(schedule.stages) +
        ", m=" + std::to_string(schedule.micro_batches) + " but the group has " +
        std::to_string(pp.size()) + " stages and " + std::to_string(micro_batches.size()) +
        " micro-batches were given; build the schedule for this group and batch");
  const int stage = pp.rank();
  const int p = schedule.stages, v = schedule.chunks;
  const Chunks ring{p, v};
  const int last_chunk = p * v - 1;
  const float scale = 1.0f / static_cast<float>(schedule.micro_batches);
  std::vector<StageUnits> chunk_units;  // this stage's chunks, by chunk index
  for (int c = 0; c < v; ++c)
    chunk_units.push_back(stage_units(model, p * v, ring.model_chunk(stage, c)));
  std::vector<InFlight> held(micro_batches.size() * static_cast<std::size_t>(v));  // by k * v + c
  double loss = 0;

  for (const Action& a : schedule.per_stage[static_cast<std::size_t>(stage)]) {
    const model::Batch& mb = micro_batches[static_cast<std::size_t>(a.micro_batch)];
    const std::int64_t tokens = mb.tokens();
    const int j = ring.model_chunk(stage, a.chunk);
    const StageUnits units = chunk_units[static_cast<std::size_t>(a.chunk)];
    InFlight& slot = held[static_cast<std::size_t>(a.micro_batch * v + a.chunk)];
    if (a.pass == Pass::forward) {
      Buffer<float> x;
      if (j == 0) {
        x = model.input(rank, mb);
      } else {
        x = Buffer<float>(rank.memory(), Category::activations,
                          static_cast<std::size_t>(tokens * model.unit(units.first).in_width),
                          "pp.recv.x");
        pp.recv(x.span(), ring.stage_of(j - 1), tag_of(a, v));
      }
      slot.caches =
          std::vector<model::UnitCache>(static_cast<std::size_t>(units.last - units.first));
      for (int u = units.first; u < units.last; ++u)
        x = model.unit_forward(rank, u, model.unit_view(params, u), std::move(x), tokens,
                               &slot.caches[static_cast<std::size_t>(u - units.first)]);
      if (j == last_chunk) {
        slot.dloss = Buffer<float>(rank.memory(), Category::activations, x.size(), "pp.dloss");
        loss += model.loss_backward(x.span(), mb, slot.dloss.span(), scale) * scale;
      } else {
        pp.send(x.span(), ring.stage_of(j + 1),
                tag_of({Pass::forward, a.micro_batch, ring.chunk_of(j + 1)}, v));
      }
    } else {
      Buffer<float> d;
      if (j == last_chunk) {
        d = std::move(slot.dloss);
      } else {
        d = Buffer<float>(rank.memory(), Category::activations,
                          static_cast<std::size_t>(tokens * model.unit(units.last - 1).out_width),
                          "pp.recv.dy");
        pp.recv(d.span(), ring.stage_of(j + 1), tag_of(a, v));
      }
      for (int u = units.last - 1; u >= units.first; --u)
        d = model.unit_backward(rank, u, model.unit_view(params, u), model.unit_view(grads, u),
                                slot.caches[static_cast<std::size_t>(u - units.first)], d.span());
      slot.caches.clear();
      if (j > 0)
        pp.send(d.span(), ring.stage_of(j - 1),
                tag_of({Pass::backward, a.micro_batch, ring.chunk_of(j - 1)}, v));
    }
  }
  return stage == ring.stage_of(last_chunk) ? loss : 0.0;
}

PipelineSchedule interleaved_one_f_one_b_schedule(int p, int m, int v) {
  check_p_m("interleaved_one_f_one_b_schedule", p, m);
  if (v < 1)
    throw std::invalid_argument("interleaved_one_f_one_b_schedule: v=" + std::to_string(v) +
                                "; each stage needs at least one chunk");
  if (m % p != 0)
    throw std::invalid_argument(
        "interleaved_one_f_one_b_schedule: m=" + std::to_string(m) +
        " is not a multiple of p=" + std::to_string(p) +
        "; the micro-batches go through the chunks in groups of p, so pick m = " +
        std::to_string((m / p + 1) * p));
  PipelineSchedule s{p, m, std::vector<std::vector<Action>>(static_cast<std::size_t>(p)), v};
  const int total = m * v;
  // The i-th chunk-forward (or backward) of a stage: groups of p micro-batches, each group going
  // through the chunks in order (forward) or in reverse (backward).
  const auto nth = [p, v](Pass pass, int i) {
    const int round = (i / p) % v;
    return Action{pass, (i / (p * v)) * p + i % p, pass == Pass::forward ? round : v - 1 - round};
  };
  for (int stage = 0; stage < p; ++stage) {
    auto& program = s.per_stage[static_cast<std::size_t>(stage)];
    // Enough forwards that the first gradient is back when the warm-up ends: twice the stages
    // after this one (there and back), plus the rounds of chunks before the last one.
    const int warmup = std::min(total, 2 * (p - 1 - stage) + (v - 1) * p);
    int f = 0, b = 0;
    while (f < warmup) program.push_back(nth(Pass::forward, f++));
    while (f < total) {
      program.push_back(nth(Pass::forward, f++));
      program.push_back(nth(Pass::backward, b++));
    }
    while (b < total) program.push_back(nth(Pass::backward, b++));
  }
  return s;
}

}  // namespace mgpu::pipeline
