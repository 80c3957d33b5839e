// 11.3 skeleton: ZeRO training state and traffic per GPU, the fewest GPUs that fit, and the
// estimates DeepSpeed and Megatron-LM print. The contract is in formulas.hpp; fill in each TODO.
#include "11_3_zero/formulas.hpp"
#include "11_3_zero/checks.hpp"  // check_stage, check_common, check_setup (given)

#include "mgpu/check_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::zero {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

StateBytes zero_state_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                              std::int64_t dp) {
  // TODO(11.3): check_common, then fill each field of StateBytes: params * bytes of that kind,
  // divided by dp when this stage shards that kind. Stage 1 shards master + optimizer,
  // stage 2 also the gradients, stage 3 also the weights.
  throw NotImplemented("11.3 zero_state_per_gpu");
}

double zero_state_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                std::int64_t dp) {
  // TODO(11.3): one line on top of zero_state_per_gpu.
  throw NotImplemented("11.3 zero_state_bytes_per_gpu");
}

TrafficBytes zero_traffic_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp) {
  // TODO(11.3): check_common. A ring reduce-scatter or all-gather of S bytes sends (N-1)/N * S
  // per rank; an all-reduce is one of each. Decide, stage by stage, which collectives run on
  // which buffer (gradients: bytes_grads, weights: bytes_weights) and fill TrafficBytes.
  throw NotImplemented("11.3 zero_traffic_per_gpu");
}

double zero_traffic_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp) {
  // TODO(11.3): one line on top of zero_traffic_per_gpu.
  throw NotImplemented("11.3 zero_traffic_bytes_per_gpu");
}

std::optional<std::int64_t> min_gpus_to_fit(double params, const PrecisionRecipe& recipe, int stage,
                                            double capacity_bytes, std::int64_t multiple_of) {
  // TODO(11.3): validate (check_common with dp = 1, capacity > 0, multiple_of >= 1). Split the
  // per-GPU bytes into a replicated part R and a sharded part S (memory = R + S/N). If it fits
  // on one GPU, the answer is multiple_of; if R alone does not fit, std::nullopt. Otherwise
  // solve for N, then make sure with zero_state_bytes_per_gpu that N fits and N - 1 does not
  // (floating-point division can be off by one), and round up to a multiple of multiple_of.
  throw NotImplemented("11.3 min_gpus_to_fit");
}

// ------------------------------------------------------------------ what frameworks print

DeepSpeedEstimate deepspeed_zero2_estimate(double params, const DeepSpeedSetup& setup) {
  // TODO(11.3): validate (params, check_setup), then the two cases of the header's formula.
  throw NotImplemented("11.3 deepspeed_zero2_estimate");
}

DeepSpeedEstimate deepspeed_zero3_estimate(double params, double largest_layer_params,
                                           const DeepSpeedSetup& setup) {
  // TODO(11.3): validate (largest layer within the model), then the three cases of the header.
  throw NotImplemented("11.3 deepspeed_zero3_estimate");
}

double megatron_state_bytes_per_gpu(double params, MegatronPrecision precision,
                                    bool distributed_optimizer, std::int64_t dp) {
  // TODO(11.3): pick the replicated and sharded bytes per parameter for `precision`; only the
  // distributed optimizer divides the sharded part by dp.
  throw NotImplemented("11.3 megatron_state_bytes_per_gpu");
}

}  // namespace mgpu::zero
