// The student code of 11.5's schedule cases (schedules.host.cpp): the schedule builders, each a
// student call given only the schedule's shape, and the rank bodies that run the student's
// executor on one stage rank with what run_pipeline's contract gives that stage.
#include <vector>

#include "11_5_pipeline/schedules.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "schedules.inputs.hpp"

using namespace mgpu::grade;
namespace pl = mgpu::pipeline;
namespace model = mgpu::model;

MGPU_STUDENT_CALL("11_5.gpipe_schedule", ScheduleShape) { return pl::gpipe_schedule(in.p, in.m); }

MGPU_STUDENT_CALL("11_5.one_f_one_b_schedule", ScheduleShape) {
  return pl::one_f_one_b_schedule(in.p, in.m);
}

MGPU_STUDENT_CALL("11_5.interleaved_one_f_one_b_schedule", ScheduleShape) {
  return pl::interleaved_one_f_one_b_schedule(in.p, in.m, in.v);
}

MGPU_STUDENT_CALL("11_5.zb_h1_schedule", ScheduleShape) { return pl::zb_h1_schedule(in.p, in.m); }

MGPU_STUDENT_CALL("11_5.zb_h2_schedule", ScheduleShape) { return pl::zb_h2_schedule(in.p, in.m); }

// One pipelined step in a pipeline group whose ranks are the world's in reverse (stage s on world
// rank p-1-s), so an executor that takes world ranks for stages fails. The loss and the whole
// gradient buffer are published: the rank may be a process of its own.
MGPU_RANK_BODY("11_5.pipeline_step", StepInput) {
  const model::Model net(in.config);
  const int p = in.schedule.stages;
  mgpu::Comm pp = rank.world().split(0, p - 1 - rank.id(), "pp");
  model::Replica replica = net.make_replica(rank.memory(), in.seed);
  const double loss = pl::run_pipeline(rank, pp, net, in.schedule, replica.params.span(),
                                       replica.grads.span(), in.micro_batches);
  publish_value(rank, "loss", loss);
  rank.publish("grads", replica.grads.span());
}

// run_pipeline on a schedule it must reject (the case judges whether it throws
// std::invalid_argument); the pipeline group is the world.
MGPU_RANK_BODY("11_5.pipeline_reject", RejectInput) {
  if (!in.runs) return;
  const model::Model net(in.config);
  model::Replica replica = net.make_replica(rank.memory(), 1);
  if (in.with_units)
    pl::run_pipeline(rank, rank.world(), net, pl::stage_units(net, 2, rank.id()), in.schedule,
                     replica.params.span(), replica.grads.span(), in.micro_batches);
  else
    pl::run_pipeline(rank, rank.world(), net, in.schedule, replica.params.span(),
                     replica.grads.span(), in.micro_batches);
}
