// 11.5 Pipeline schedules: your implementation. Write GPipe and 1F1B as per-stage action lists,
// then the executor that runs any valid schedule over the stage ranks of a pipeline group, then
// the interleaved schedule that the same executor runs with several chunks per stage.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_5 <id>` gives hints for it.
#include "11_5_pipeline/schedules.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace mgpu::pipeline {

PipelineSchedule gpipe_schedule(int p, int m) {
  // TODO(11.5 gpipe_schedule): a PipelineSchedule that check_schedule accepts, with the order
  //   of the header's comment on every stage, so that each stage holds all m micro-batches at
  //   its peak. p or m below 1 throws std::invalid_argument naming both.
  throw NotImplemented("11.5 gpipe_schedule");
}

PipelineSchedule one_f_one_b_schedule(int p, int m) {
  // TODO(11.5 one_f_one_b_schedule): a valid schedule with GPipe's bubble in which stage s never
  //   holds more than min(m, p - s) micro-batches; for p = 2, m = 3 it is the header's example.
  //   check_schedule and schedule_in_flight (given) test a result without running it.
  throw NotImplemented("11.5 one_f_one_b_schedule");
}

double run_pipeline(Rank& rank, Comm& pp, const model::Model& model,
                    const PipelineSchedule& schedule, std::span<const float> params,
                    std::span<float> grads, std::span<const model::Batch> micro_batches) {
  // TODO(11.5 run_pipeline): the executor: this stage runs its program of any valid schedule in
  //   order and returns the mean loss over the micro-batches on the stage holding the last model
  //   chunk (0 elsewhere). Done when the accumulated grads equal model.forward_backward on the
  //   whole batch, the stage's stored activations follow the schedule (each (micro-batch, chunk)'s
  //   from its forward to its backward, no longer), and every receive gets the message meant for
  //   it whatever order a neighbour sends in. A schedule for another p or m throws. Stage and
  //   peers come from pp, never from rank.id(). Start with one chunk per stage (GPipe, 1F1B):
  //   chunk 0 of stage s is model chunk s, its neighbours s - 1 and s + 1. Calls: check_schedule,
  //   stage_units, pp.send / pp.recv with tags.
  // TODO(11.5 run_pipeline_forward): a forward action: the chunk's units run on micro-batch k's
  //   input, keeping a model::UnitCache per unit until the matching backward; the output moves
  //   on, and on the last model chunk it becomes the loss and its gradient, scaled so that the m
  //   micro-batches give the mean loss. Calls: model.input, model.unit_forward, model.unit_view,
  //   model.loss_backward, Buffer<float> under Category::activations.
  // TODO(11.5 run_pipeline_backward): a backward action: the gradient of the chunk's output
  //   flows back through its units, adding into their gradients and freeing the caches, and the
  //   input gradient goes to the stage holding the model chunk before. Calls:
  //   model.unit_backward, model.unit_view.
  throw NotImplemented("11.5 run_pipeline");
}

PipelineSchedule interleaved_one_f_one_b_schedule(int p, int m, int v) {
  // TODO(11.5 interleaved_one_f_one_b_schedule): Megatron's interleaved order, as the header
  //   spells it out: which micro-batch and chunk the i-th forward and the i-th backward take, a
  //   warm-up of min(m*v, 2*(p - 1 - s) + (v - 1)*p) forwards, one forward then one backward
  //   while forwards remain, then the backwards left. For p = 2, m = 2, v = 2 it is the header's
  //   example; check_schedule (which also plays the programs against each other and names a
  //   deadlock) and schedule_in_flight test a result without running it. Throws for p, m or v
  //   below 1 and for m not a multiple of p. Your run_pipeline runs it once it follows the
  //   chunks: chunk c of stage s is model chunk c*p + s of p*v.
  throw NotImplemented("11.5 interleaved_one_f_one_b_schedule");
}

}  // namespace mgpu::pipeline
