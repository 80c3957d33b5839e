// What the rank of an 11.6 step is given (step.hpp's measure_step makes it, the step bodies of
// checkpointing.cpp and selective.cpp read it), and the rank's half of a measured step. The
// step runs on a one-rank cluster, so the rank's own data is the whole batch: it builds the batch
// and the weights from their seeds.
#pragma once

#include <cstdint>
#include <span>

#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"

namespace mgpu::grade::checkpointing_cases {

/// One training step of the course model on one rank.
struct StepInput {
  mgpu::model::ModelConfig config;
  std::uint64_t seed = 0;        ///< of the weights
  std::uint64_t batch_seed = 0;  ///< of the batch
  std::int64_t sequences = 1;    ///< in the batch
  std::int64_t k = 0;            ///< checkpointing's interval (0: a plain step)
  bool selective = false;        ///< selective recomputation (false: a plain step)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepInput, config, seed, batch_seed, sequences, k, selective)

/// The rank's half of measure_step: `train(net, batch, params, grads)` runs the step (plainly,
/// checkpointed or with selective recompute) and returns the loss; the step's costs come from
/// checkpoints the cluster's side records around it, and its results are published.
template <class Train>
void publish_step(mgpu::Rank& rank, const StepInput& in, Train&& train) {
  const mgpu::model::Model net(in.config);
  const mgpu::model::Batch batch = net.make_batch(in.sequences, in.batch_seed);
  mgpu::model::Replica rep = net.make_replica(rank.memory(), in.seed);
  rank.memory().reset_peaks();
  rank.checkpoint("before");
  const double loss = train(net, batch, rep.params.span(), rep.grads.span());
  rank.checkpoint("after");
  publish_value(rank, "loss", loss);
  rank.publish("grads", rep.grads.span());
}

}  // namespace mgpu::grade::checkpointing_cases
