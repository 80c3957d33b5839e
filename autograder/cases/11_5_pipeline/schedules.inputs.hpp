// What 11.5's schedule cases hand to student code (schedules.host.cpp makes it, schedules.cpp's
// student calls and rank bodies read it): the shape of a schedule to build, and for a pipelined
// step what run_pipeline's contract gives every stage rank: the model's shape and the seed its
// replicated weights are built from, the whole schedule (every stage's program: the executor
// checks it whole) and the step's micro-batches (every stage runs every micro-batch).
#pragma once

#include <cstdint>
#include <vector>

#include "11_5_pipeline/schedule_given.hpp"
#include "mgpu/model/model.hpp"
#include "rank_code.hpp"

// A schedule as JSON: how one built by student code comes back from its process, and how a step
// hands it to its ranks.
namespace mgpu::pipeline {
NLOHMANN_JSON_SERIALIZE_ENUM(Pass, {{Pass::forward, "forward"},
                                    {Pass::backward, "backward"},
                                    {Pass::backward_input, "backward_input"},
                                    {Pass::backward_weight, "backward_weight"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Action, pass, micro_batch, chunk)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PipelineSchedule, stages, micro_batches, per_stage, chunks)
}  // namespace mgpu::pipeline

namespace mgpu::model {
/// A micro-batch, whole: its shape, inputs, and targets or labels.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Batch, sequences, seq_len, d_in, d_out, inputs, targets, labels)
}  // namespace mgpu::model

namespace mgpu::grade {

/// The arguments of a schedule builder: p stages, m micro-batches, v chunks per stage (read by
/// interleaved_one_f_one_b_schedule only).
struct ScheduleShape {
  int p = 1;
  int m = 1;
  int v = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ScheduleShape, p, m, v)

/// One pipelined step on one stage rank: run_pipeline with `schedule` on `micro_batches`, the
/// replica built from `seed` (replicated weights, as every stage builds them), in a pipeline group
/// whose ranks are the world's in reverse.
struct StepInput {
  mgpu::model::ModelConfig config;
  mgpu::pipeline::PipelineSchedule schedule;
  std::vector<mgpu::model::Batch> micro_batches;
  std::uint64_t seed = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepInput, config, schedule, micro_batches, seed)

/// One run_pipeline call on a schedule it should reject, the pipeline group being the world:
/// `with_units` calls the form with the rank's stage_units of a 2-stage split; a rank whose `runs`
/// is false does nothing.
struct RejectInput {
  mgpu::model::ModelConfig config;
  mgpu::pipeline::PipelineSchedule schedule;
  std::vector<mgpu::model::Batch> micro_batches;
  bool with_units = true;
  bool runs = true;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RejectInput, config, schedule, micro_batches, with_units, runs)

}  // namespace mgpu::grade
