// The rank body of 11.2's mixed-precision cases (mixed_precision.host.cpp): builds the student's
// bf16 replica, trains it and publishes what it holds; the ledger and meter stay with the host.
#include <span>
#include <vector>

#include "11_2_data_parallel/data_parallel.hpp"
#include "data_parallel.inputs.hpp"
#include "rank_code.hpp"

namespace dp = mgpu::data_parallel;
namespace model = mgpu::model;

namespace {

std::vector<float> widened(std::span<const mgpu::bf16> values) {
  std::vector<float> out(values.size());
  model::to_float(values, out);
  return out;
}

}  // namespace

MGPU_RANK_BODY("11_2.mixed_train", mgpu::grade::TrainInput) {
  const model::Model net(in.config);
  mgpu::MemoryLedger& ledger = rank.memory();
  dp::MixedReplica replica =
      dp::make_mixed_replica(ledger, net, in.seed, model::AdamConfig{.lr = 1e-3f});
  std::vector<double> built(mgpu::kCategoryCount);
  for (std::size_t c = 0; c < mgpu::kCategoryCount; ++c)
    built[c] = static_cast<double>(ledger.current(static_cast<mgpu::Category>(c)));
  rank.publish("built", built);
  ledger.reset_peaks();  // from here on the peaks are the replica plus what a step adds
  std::vector<double> losses;
  for (int s = 0; s < in.steps; ++s) {
    const model::Batch batch =
        net.make_batch(in.sequences, in.seed + 100 + static_cast<std::uint64_t>(s));
    losses.push_back(dp::data_parallel_step_mixed(rank, rank.world(), net, replica, batch));
  }
  rank.publish("losses", losses);
  rank.publish("grads16", widened(replica.grads16.span()));
  rank.publish("weights16", widened(replica.weights16.span()));
  rank.publish("adam_m", replica.adam_m);
  rank.publish("master", replica.master);
}
