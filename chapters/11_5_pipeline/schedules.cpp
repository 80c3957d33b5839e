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
  // TODO(11.5 one_f_one_b_schedule): the schedule the header defines: valid, micro-batches in
  //   order, stage s never holding more than min(m, p - s) and never putting off a forward it
  //   could run within that limit. How many forwards does stage s run before its first backward,
  //   and why that many? check_schedule and schedule_in_flight (given) test a result without
  //   running it.
  throw NotImplemented("11.5 one_f_one_b_schedule");
}

PipelineSchedule zb_h1_schedule(int p, int m) {
  // TODO(11.5 zb_h1_schedule): the zero-bubble schedule the header defines: 1F1B's order of
  //   forwards and input halves, with each weight half as late as the bound of min(m, p) held
  //   micro-batches lets it while forwards remain, then in the waits of the cool-down. Where does
  //   a stage of 1F1B sit idle after its last forward, and what could it do there that no other
  //   stage waits for? check_schedule and schedule_in_flight test a result without running it.
  throw NotImplemented("11.5 zb_h1_schedule");
}

PipelineSchedule zb_h2_schedule(int p, int m) {
  // TODO(11.5 zb_h2_schedule): the zero-bubble schedule the header defines: valid, every pass
  //   in micro-batch order, at most min(m, 2p - 1) held on any stage, and no stage waiting
  //   between its first action and its last (for m >= 2p - 1) when every action takes one slot.
  //   Why 2p - 1, and what should a stage run when nothing it waits for has arrived yet?
  //   check_schedule and schedule_in_flight test a result without running it.
  throw NotImplemented("11.5 zb_h2_schedule");
}

void run_forward_action(Rank& rank, Comm& pp, const model::Model& model, StageState& state,
                        const Action& a, std::span<const float> params,
                        const model::Batch& micro_batch) {
  // TODO(11.5 run_forward_action): one micro-batch forward through one chunk of this stage, as
  //   the header states: where its input comes from, what it leaves in `state`, where its output
  //   goes. The loss of the m micro-batches must add up to the mean loss. Stage and peers come
  //   from pp, never from rank.id(). Start with one chunk per stage (chunk 0 of stage s is model
  //   chunk s, its neighbours s - 1 and s + 1); which tag tells this message apart from every
  //   other one a neighbour may send first? Calls: stage_units, model.input,
  //   model.unit_forward, model.unit_view, model.loss_backward, pp.send / pp.recv, Buffer<float>
  //   under Category::activations.
  throw NotImplemented("11.5 run_forward_action");
}

void run_backward_action(Rank& rank, Comm& pp, const model::Model& model, StageState& state,
                         const Action& a, std::span<const float> params, std::span<float> grads,
                         const model::Batch& micro_batch) {
  // TODO(11.5 run_backward_action): the same micro-batch back through the same chunk: the
  //   gradient of the chunk's output flows back through its units, adding into their gradients
  //   and freeing the saved activations, and the input gradient goes where the header says.
  //   Then the two halves (a.pass backward_input, backward_weight), which split that work
  //   between them. Calls: model.unit_backward, model.unit_backward_input,
  //   model.unit_backward_weight, model.unit_view, pp.send / pp.recv.
  throw NotImplemented("11.5 run_backward_action");
}

double run_pipeline(Rank& rank, Comm& pp, const model::Model& model,
                    const PipelineSchedule& schedule, std::span<const float> params,
                    std::span<float> grads, std::span<const model::Batch> micro_batches) {
  // TODO(11.5 run_pipeline): the executor: this stage runs its program of any valid schedule in
  //   order, with your two actions, and returns the mean loss over the micro-batches on the
  //   stage holding the last model chunk (0 elsewhere). A schedule that check_schedule rejects,
  //   or one built for another p or m, throws before anything runs. Done when the accumulated
  //   grads equal model.forward_backward on the whole batch for GPipe and 1F1B, and for any
  //   schedule that runs the backward in two halves.
  throw NotImplemented("11.5 run_pipeline");
}

PipelineSchedule interleaved_one_f_one_b_schedule(int p, int m, int v) {
  // TODO(11.5 interleaved_one_f_one_b_schedule): Megatron's interleaved order as the header
  //   defines it. Which micro-batch and chunk does a stage's i-th forward take, and its i-th
  //   backward? How many forwards fit before stage s's first gradient can be back? For p = 2,
  //   m = 2, v = 2 it is the header's example; check_schedule (which also plays the programs
  //   against each other and names a deadlock) and schedule_in_flight test a result without
  //   running it. Throws for p, m or v below 1 and for m not a multiple of p. Your run_pipeline
  //   runs it once your actions follow the chunks: chunk c of stage s is model chunk c*p + s.
  throw NotImplemented("11.5 interleaved_one_f_one_b_schedule");
}

}  // namespace mgpu::pipeline
