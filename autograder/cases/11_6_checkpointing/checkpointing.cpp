// The student code of 11.6's checkpointing cases (checkpointing.host.cpp holds the cases): the
// step body (a plain step, or one checkpointed every k blocks), the checkpointed step with a k
// that must be rejected, and the student call of best_interval.
#include <cstdint>

#include "11_6_checkpointing/checkpointing.hpp"
#include "checkpointing.inputs.hpp"
#include "rank_code.hpp"
#include "step.inputs.hpp"

using namespace mgpu::grade::checkpointing_cases;
namespace ck = mgpu::checkpointing;
namespace model = mgpu::model;

// One measured step: plain when in.k is 0, else with a checkpoint every in.k blocks.
MGPU_RANK_BODY("11_6.checkpointed_step", StepInput) {
  publish_step(
      rank, in, [&](const model::Model& net, const model::Batch& batch, auto params, auto grads) {
        return in.k == 0 ? net.forward_backward(rank, params, grads, batch)
                         : ck::checkpointed_forward_backward(rank, net, params, grads, batch, in.k);
      });
}

// A checkpointed step at in.k, unmeasured: for a k outside [1, L], which must be rejected.
MGPU_RANK_BODY("11_6.checkpointed_k", StepInput) {
  const model::Model net(in.config);
  const model::Batch batch = net.make_batch(in.sequences, in.batch_seed);
  model::Replica rep = net.make_replica(rank.memory(), in.seed);
  ck::checkpointed_forward_backward(rank, net, rep.params.span(), rep.grads.span(), batch, in.k);
}

MGPU_STUDENT_CALL("11_6.best_interval", IntervalInput) {
  return ck::best_interval(model::Model(in.config), in.tokens);
}
