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
// receive gets its own message whatever order the neighbour sent in. A whole backward and an
// input half receive the same gradient, so they share the backward direction's tag.
int tag_of(const Action& a, int v) {
  return 2 * (a.micro_batch * v + a.chunk) + (a.pass == Pass::forward ? 0 : 1);
}

// Where the p*v model chunks live: round robin, so that a micro-batch visits every stage once
// per round and the pipeline fills in chunk-sized slots.
struct Chunks {
  int p, v;
  int model_chunk(int stage, int chunk) const { return chunk * p + stage; }
  int stage_of(int j) const { return j % p; }
  int chunk_of(int j) const { return j / p; }
};

// Where an action of this stage runs: its model chunk j in the chain of p*v, and its units.
struct Place {
  Chunks ring;
  int stage;
  int j;
  int last;  // the last model chunk, p*v - 1, which ends in the loss
  StageUnits units;
};

Place place_of(int stage, int p, const model::Model& model, const StageState& state,
               const Action& a) {
  const Chunks ring{p, state.chunks};
  const int j = ring.model_chunk(stage, a.chunk);
  return {ring, stage, j, p * state.chunks - 1, stage_units(model, p * state.chunks, j)};
}

// Caches are kept per (micro-batch, chunk): the forwards of one micro-batch on several chunks
// of this stage are in flight at once.
std::size_t slot_of(const StageState& state, const Action& a) {
  return static_cast<std::size_t>(a.micro_batch * state.chunks + a.chunk);
}

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

PipelineSchedule zb_h1_schedule(int p, int m) {
  check_p_m("zb_h1_schedule", p, m);
  PipelineSchedule s{p, m, std::vector<std::vector<Action>>(static_cast<std::size_t>(p))};
  // 1F1B's peak, that of its first stage: every stage may hold this many until their weight halves.
  const int cap = std::min(m, p);
  for (int stage = 0; stage < p; ++stage) {
    auto& program = s.per_stage[static_cast<std::size_t>(stage)];
    int forwards = 0, inputs = 0, weights = 0;  // how many of each pass the program has so far
    const auto weight = [&] { program.push_back({Pass::backward_weight, weights++}); };
    // 1F1B's warm-up: the forwards that fit before the first gradient can be back.
    while (forwards < std::min(m, p - 1 - stage)) program.push_back({Pass::forward, forwards++});
    while (forwards < m) {
      // Weight halves wait as long as the memory bound lets them: only when the next forward
      // would hold one micro-batch too many.
      while (forwards - weights >= cap) weight();
      program.push_back({Pass::forward, forwards++});
      program.push_back({Pass::backward_input, inputs++});
    }
    // Cool-down: while this stage waits for each gradient, a weight half fills the wait.
    while (inputs < m) {
      if (weights < inputs) weight();
      program.push_back({Pass::backward_input, inputs++});
    }
    while (weights < m) weight();
  }
  return s;
}

PipelineSchedule zb_h2_schedule(int p, int m) {
  check_p_m("zb_h2_schedule", p, m);
  PipelineSchedule s{p, m, std::vector<std::vector<Action>>(static_cast<std::size_t>(p))};
  // The first stage's forwards must cover the first micro-batch's round trip: p forwards out,
  // p - 1 input halves back, one slot each.
  const int cap = std::min(m, 2 * p - 1);
  const auto at = [](auto& v, int i) -> auto& { return v[static_cast<std::size_t>(i)]; };
  std::vector<int> forwards(static_cast<std::size_t>(p)), inputs = forwards, weights = forwards;
  // The slot at whose start each stage's forward (input half) of micro-batch k has ended; -1
  // while it has not run.
  std::vector<std::vector<int>> forward_end(static_cast<std::size_t>(p),
                                            std::vector<int>(static_cast<std::size_t>(m), -1));
  std::vector<std::vector<int>> input_end = forward_end;
  const auto ended = [&](const std::vector<std::vector<int>>& end, int stage, int k, int slot) {
    const int e = at(at(end, stage), k);
    return e >= 0 && e <= slot;
  };
  // Play the stages slot by slot; an action chosen in this slot ends after it, so what a stage
  // sees of its neighbours is what ended before the slot began.
  for (int slot = 0; std::any_of(weights.begin(), weights.end(), [m](int w) { return w < m; });
       ++slot) {
    for (int stage = 0; stage < p; ++stage) {
      auto& program = at(s.per_stage, stage);
      int& f = at(forwards, stage);
      int& b = at(inputs, stage);
      int& w = at(weights, stage);
      // The input half first: the stage before waits for it.
      if (b < f && (stage == p - 1 ? ended(forward_end, stage, b, slot)
                                   : ended(input_end, stage + 1, b, slot))) {
        at(at(input_end, stage), b) = slot + 1;
        program.push_back({Pass::backward_input, b++});
      } else if (f < m && f - w < cap && (stage == 0 || ended(forward_end, stage - 1, f, slot))) {
        at(at(forward_end, stage), f) = slot + 1;
        program.push_back({Pass::forward, f++});
      } else if (w < b) {
        // Nothing arrived that another stage waits for: a weight half fills the slot.
        program.push_back({Pass::backward_weight, w++});
      }
    }
  }
  return s;
}

void run_forward_action(Rank& rank, Comm& pp, const model::Model& model, StageState& state,
                        const Action& a, std::span<const float> params,
                        const model::Batch& micro_batch) {
  const Place at = place_of(pp.rank(), pp.size(), model, state, a);
  const int v = state.chunks;
  const std::int64_t tokens = micro_batch.tokens();
  Buffer<float> x;
  if (at.j == 0) {
    x = model.input(rank, micro_batch);
  } else {
    x = Buffer<float>(rank.memory(), Category::activations,
                      static_cast<std::size_t>(tokens * model.unit(at.units.first).in_width),
                      "pp.recv.x");
    pp.recv(x.span(), at.ring.stage_of(at.j - 1), tag_of(a, v));
  }
  auto& caches = state.caches[slot_of(state, a)];
  caches = std::vector<model::UnitCache>(static_cast<std::size_t>(at.units.last - at.units.first));
  for (int u = at.units.first; u < at.units.last; ++u)
    x = model.unit_forward(rank, u, model.unit_view(params, u), std::move(x), tokens,
                           &caches[static_cast<std::size_t>(u - at.units.first)]);
  if (at.j == at.last) {
    const float scale = 1.0f / static_cast<float>(state.micro_batches);
    Buffer<float>& dloss = state.loss_grads[static_cast<std::size_t>(a.micro_batch)];
    dloss = Buffer<float>(rank.memory(), Category::activations, x.size(), "pp.dloss");
    state.loss += model.loss_backward(x.span(), micro_batch, dloss.span(), scale) * scale;
  } else {
    pp.send(x.span(), at.ring.stage_of(at.j + 1),
            tag_of({Pass::forward, a.micro_batch, at.ring.chunk_of(at.j + 1)}, v));
  }
}

void run_backward_action(Rank& rank, Comm& pp, const model::Model& model, StageState& state,
                         const Action& a, std::span<const float> params, std::span<float> grads,
                         const model::Batch& micro_batch) {
  const Place at = place_of(pp.rank(), pp.size(), model, state, a);
  const int v = state.chunks;
  const std::int64_t tokens = micro_batch.tokens();
  auto& caches = state.caches[slot_of(state, a)];
  if (a.pass == Pass::backward_weight) {
    // The weight half needs only what the input half left in the caches: no message.
    for (int u = at.units.last - 1; u >= at.units.first; --u)
      model.unit_backward_weight(rank, u, model.unit_view(grads, u),
                                 caches[static_cast<std::size_t>(u - at.units.first)]);
    caches.clear();
    return;
  }
  Buffer<float> d;
  if (at.j == at.last) {
    d = std::move(state.loss_grads[static_cast<std::size_t>(a.micro_batch)]);
  } else {
    d = Buffer<float>(rank.memory(), Category::activations,
                      static_cast<std::size_t>(tokens * model.unit(at.units.last - 1).out_width),
                      "pp.recv.dy");
    pp.recv(d.span(), at.ring.stage_of(at.j + 1), tag_of(a, v));
  }
  for (int u = at.units.last - 1; u >= at.units.first; --u) {
    model::UnitCache& cache = caches[static_cast<std::size_t>(u - at.units.first)];
    d = a.pass == Pass::backward_input
            ? model.unit_backward_input(rank, u, model.unit_view(params, u), cache, d.span())
            : model.unit_backward(rank, u, model.unit_view(params, u), model.unit_view(grads, u),
                                  cache, d.span());
  }
  // A whole backward has freed the activations; an input half leaves them for the weight half.
  if (a.pass == Pass::backward) caches.clear();
  if (at.j > 0)
    pp.send(d.span(), at.ring.stage_of(at.j - 1),
            tag_of({Pass::backward, a.micro_batch, at.ring.chunk_of(at.j - 1)}, v));
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
  StageState state(schedule.micro_batches, schedule.chunks);
  // The stage runs its program in order; the schedule, not the executor, decides what comes next.
  for (const Action& a : schedule.per_stage[static_cast<std::size_t>(pp.rank())]) {
    const model::Batch& mb = micro_batches[static_cast<std::size_t>(a.micro_batch)];
    if (a.pass == Pass::forward)
      run_forward_action(rank, pp, model, state, a, params, mb);
    else
      run_backward_action(rank, pp, model, state, a, params, grads, mb);
  }
  return state.loss;
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
