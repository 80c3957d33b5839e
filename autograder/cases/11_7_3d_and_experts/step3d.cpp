// The rank bodies and the student call of 11.7's 3D training step cases (step3d.host.cpp): two
// published steps, one unpublished step, and the 1F1B order of one stage.
#include <cstddef>
#include <optional>
#include <vector>

#include "11_7_3d_and_experts/step3d.hpp"
#include "mgpu/cluster.hpp"
#include "rank_code.hpp"
#include "step3d.inputs.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::cases_11_7;
namespace ly = mgpu::layout;

namespace {

constexpr int kSteps = 2;

}  // namespace

// kSteps steps; after each, the last stage's loss, this rank's ZeRO-1 shard of the gradients and
// its share of the parameters. A rank may be a process of its own: what it saw leaves it through
// publish.
MGPU_RANK_BODY("11_7.step3d_train", Step3dInput) {
  const mgpu::model::Model model(in.config);
  const mgpu::model::Batch batch = model.make_batch(in.sequences, in.batch_seed);
  ly::ProcessGrid grid(rank.world(), in.layout);
  ly::State3d state = ly::make_state_3d(rank, grid, model, in.seed);
  std::vector<double> loss, grads, params;  // per step: last stage's loss, own shard, share
  std::vector<double> has_loss;             // per step: 1 on the last stage, 0 elsewhere
  const std::size_t first = static_cast<std::size_t>(grid.coords().dp) * state.share.shard;
  for (int step = 0; step < kSteps; ++step) {
    const std::optional<double> l =
        ly::train_step_3d(rank, grid, model, state, batch, in.micro_batches);
    has_loss.push_back(l ? 1.0 : 0.0);
    if (l) loss.push_back(*l);
    const auto g = state.grads.span().subspan(first, state.share.shard);
    grads.insert(grads.end(), g.begin(), g.end());
    const auto w = state.params.span().first(state.share.count);
    params.insert(params.end(), w.begin(), w.end());
  }
  rank.publish("has_loss", has_loss);
  rank.publish("loss", loss);
  rank.publish("grads", grads);
  rank.publish("params", params);
}

// One step and nothing published: the cluster's reports show what it sent, or whether it
// rejected its arguments.
MGPU_RANK_BODY("11_7.step3d_once", Step3dInput) {
  const mgpu::model::Model model(in.config);
  const mgpu::model::Batch batch = model.make_batch(in.sequences, in.batch_seed);
  ly::ProcessGrid grid(rank.world(), in.layout);
  ly::State3d state = ly::make_state_3d(rank, grid, model, in.seed);
  (void)ly::train_step_3d(rank, grid, model, state, batch, in.micro_batches);
}

MGPU_STUDENT_CALL("11_7.one_f_one_b_order", OrderInput) {
  return ly::one_f_one_b_order(in.stage, in.stages, in.micro_batches);
}
