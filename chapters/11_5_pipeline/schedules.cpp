// 11.5 Pipeline schedules: your implementation. Write GPipe and 1F1B as per-stage action lists,
// then the executor that runs any valid schedule over the stage ranks of a pipeline group.
#include "11_5_pipeline/schedules.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace mgpu::pipeline {

PipelineSchedule gpipe_schedule(int p, int m) {
  // TODO(11.5 gpipe_schedule): reject p < 1 or m < 1 with std::invalid_argument naming both.
  //   PipelineSchedule{p, m, per_stage} with per_stage.size() == p; every stage's program is
  //   {forward, 0}, ..., {forward, m-1}, then {backward, 0}, ..., {backward, m-1}.
  throw NotImplemented("11.5 gpipe_schedule");
}

PipelineSchedule one_f_one_b_schedule(int p, int m) {
  // TODO(11.5 one_f_one_b_schedule): reject p < 1 or m < 1. For each stage s:
  //   warmup = min(m, p - 1 - s); push that many forwards (0, 1, ...); then while forwards
  //   remain push the next forward and the oldest backward; then the remaining backwards.
  //   check_schedule and schedule_in_flight (given, in the header) let you test the result.
  throw NotImplemented("11.5 one_f_one_b_schedule");
}

double run_pipeline(Rank& rank, Comm& pp, const model::Model& model, StageUnits units,
                    const PipelineSchedule& schedule, std::span<const float> params, std::span<float> grads,
                    std::span<const model::Batch> micro_batches) {
  // TODO(11.5 run_pipeline): check_schedule(schedule); check p == pp.size(), m == micro_batches.size().
  //   Keep, per micro-batch, a std::vector<model::UnitCache> (one per stage unit) and, on the last
  //   stage, a Buffer<float> with the head output's gradient. Then walk
  //   schedule.per_stage[pp.rank()]:
  //   forward k:  x = model.input(rank, mb) on stage 0, else a Buffer<float>(rank.memory(),
  //               Category::activations, tokens * in_width, "label") filled by pp.recv(x.span(),
  //               stage - 1, tag); x = model.unit_forward(rank, u, model.unit_view(params, u),
  //               std::move(x), tokens, &cache) for each unit; last stage: loss_backward(x, mb,
  //               dloss, 1/m) into the kept buffer (add loss/m to the result); else pp.send to stage + 1.
  //   backward k: d = the kept gradient (last stage) or pp.recv from stage + 1; d =
  //               model.unit_backward(...) from the last unit down; pp.send(d) to stage - 1 unless stage 0.
  //   Tags: e.g. 2k for activations and 2k + 1 for gradients.
  throw NotImplemented("11.5 run_pipeline");
}

}  // namespace mgpu::pipeline
