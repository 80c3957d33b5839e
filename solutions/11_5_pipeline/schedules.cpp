// 11.5 reference solution: GPipe and 1F1B schedules as per-stage action lists, and the executor
// that runs any valid schedule over the stage ranks of a pipeline group.
#include "11_5_pipeline/schedules.hpp"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>

namespace mgpu::pipeline {

namespace {

void check_p_m(const char* where, int p, int m) {
  if (p < 1 || m < 1)
    throw std::invalid_argument(std::string(where) + ": p=" + std::to_string(p) + ", m=" + std::to_string(m) +
                                "; a pipeline needs at least one stage and one micro-batch");
}

// Tags: even for activations going forward, odd for gradients going back, so one micro-batch's
// two messages between the same pair of stages can never be confused.
int forward_tag(int k) { return 2 * k; }
int backward_tag(int k) { return 2 * k + 1; }

// What one in-flight micro-batch keeps on this stage between its forward and its backward.
struct InFlight {
  std::vector<model::UnitCache> caches;  // one per unit of the stage
  Buffer<float> dloss;                   // last stage only: the gradient of the head output
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

double run_pipeline(Rank& rank, Comm& pp, const model::Model& model, StageUnits units,
                    const PipelineSchedule& schedule, std::span<const float> params, std::span<float> grads,
                    std::span<const model::Batch> micro_batches) {
  check_schedule(schedule);
  if (schedule.stages != pp.size() || schedule.micro_batches != static_cast<int>(micro_batches.size()))
    throw std::invalid_argument("run_pipeline: the schedule is for p=" + std::to_string(schedule.stages) +
                                ", m=" + std::to_string(schedule.micro_batches) + " but the group has " +
                                std::to_string(pp.size()) + " stages and " + std::to_string(micro_batches.size()) +
                                " micro-batches were given; build the schedule for this group and batch");
  const int stage = pp.rank();
  const bool first = stage == 0;
  const bool last = stage == pp.size() - 1;
  const float scale = 1.0f / static_cast<float>(schedule.micro_batches);
  const auto n_units = static_cast<std::size_t>(units.last - units.first);
  std::vector<InFlight> held(micro_batches.size());
  double loss = 0;

  for (const Action& a : schedule.per_stage[static_cast<std::size_t>(stage)]) {
    const model::Batch& mb = micro_batches[static_cast<std::size_t>(a.micro_batch)];
    const std::int64_t tokens = mb.tokens();
    InFlight& slot = held[static_cast<std::size_t>(a.micro_batch)];
    if (a.pass == Pass::forward) {
      Buffer<float> x;
      if (first) {
        x = model.input(rank, mb);
      } else {
        x = Buffer<float>(rank.memory(), Category::activations,
                          static_cast<std::size_t>(tokens * model.unit(units.first).in_width), "pp.recv.x");
        pp.recv(x.span(), stage - 1, forward_tag(a.micro_batch));
      }
      slot.caches = std::vector<model::UnitCache>(n_units);
      for (int u = units.first; u < units.last; ++u)
        x = model.unit_forward(rank, u, model.unit_view(params, u), std::move(x), tokens,
                               &slot.caches[static_cast<std::size_t>(u - units.first)]);
      if (last) {
        slot.dloss = Buffer<float>(rank.memory(), Category::activations, x.size(), "pp.dloss");
        loss += model.loss_backward(x.span(), mb, slot.dloss.span(), scale) * scale;
      } else {
        pp.send(x.span(), stage + 1, forward_tag(a.micro_batch));
      }
    } else {
      Buffer<float> d;
      if (last) {
        d = std::move(slot.dloss);
      } else {
        d = Buffer<float>(rank.memory(), Category::activations,
                          static_cast<std::size_t>(tokens * model.unit(units.last - 1).out_width), "pp.recv.dy");
        pp.recv(d.span(), stage + 1, backward_tag(a.micro_batch));
      }
      for (int u = units.last - 1; u >= units.first; --u)
        d = model.unit_backward(rank, u, model.unit_view(params, u), model.unit_view(grads, u),
                                slot.caches[static_cast<std::size_t>(u - units.first)], d.span());
      slot.caches.clear();
      if (!first) pp.send(d.span(), stage - 1, backward_tag(a.micro_batch));
    }
  }
  return last ? loss : 0.0;
}

}  // namespace mgpu::pipeline
