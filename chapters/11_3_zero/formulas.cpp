// 11.3 skeleton: ZeRO training state and traffic per GPU, the fewest GPUs that fit, and the
// estimates DeepSpeed and Megatron-LM print. The contract is in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_3 <id>` gives hints for it.
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
  // TODO(11.3 zero_state_per_gpu): each field of StateBytes for this stage: 16, 4+12/N, 2+14/N
  // and 16/N bytes per parameter in total for the 16-byte recipe, every stage equal to stage 0
  // at N = 1, and no stage holding more than the one below it. check_common (checks.hpp)
  // rejects bad input.
  throw NotImplemented("11.3 zero_state_per_gpu");
}

double zero_state_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                std::int64_t dp) {
  // TODO(11.3 zero_state_bytes_per_gpu): the total bytes one GPU keeps; 70e9 parameters at
  // stage 3 on 64 GPUs keep 17.5e9.
  throw NotImplemented("11.3 zero_state_bytes_per_gpu");
}

TrafficBytes zero_traffic_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp) {
  // TODO(11.3 zero_traffic_per_gpu): the bytes one GPU sends per step, in the TrafficBytes field
  // of each collective that runs at this stage: with equal weight and gradient bytes, stages 1
  // and 2 send as much as stage 0 and stage 3 half as much again; one GPU sends nothing. Ring
  // accounting as in section 11.2; check_common rejects bad input.
  throw NotImplemented("11.3 zero_traffic_per_gpu");
}

double zero_traffic_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp) {
  // TODO(11.3 zero_traffic_bytes_per_gpu): the total of all collectives.
  throw NotImplemented("11.3 zero_traffic_bytes_per_gpu");
}

std::optional<std::int64_t> min_gpus_to_fit(double params, const PrecisionRecipe& recipe, int stage,
                                            double capacity_bytes, std::int64_t multiple_of) {
  // TODO(11.3 min_gpus_to_fit): the smallest multiple of `multiple_of` at which
  // zero_state_bytes_per_gpu fits in `capacity_bytes` (70e9 parameters at stage 3 in 80e9
  // bytes: 14, or 16 in whole 8-GPU servers), or std::nullopt when no count would do (see the
  // header). The answer is exact: your count fits and the next smaller candidate does not, even
  // where a floating-point division lands a hair off. Checks: check_common with dp = 1,
  // check_positive, check_count.
  throw NotImplemented("11.3 min_gpus_to_fit");
}

// ------------------------------------------------------------------ what frameworks print

DeepSpeedEstimate deepspeed_zero2_estimate(double params, const DeepSpeedSetup& setup) {
  // TODO(11.3 deepspeed_zero2_estimate): the header's figures with and without offload, floors
  // included, so that they match what DeepSpeed prints. check_non_negative and check_setup.
  throw NotImplemented("11.3 deepspeed_zero2_estimate");
}

DeepSpeedEstimate deepspeed_zero3_estimate(double params, double largest_layer_params,
                                           const DeepSpeedSetup& setup) {
  // TODO(11.3 deepspeed_zero3_estimate): the header's figures for each offload and zero_init
  // choice; a largest layer outside [0, params] throws.
  throw NotImplemented("11.3 deepspeed_zero3_estimate");
}

double megatron_state_bytes_per_gpu(double params, MegatronPrecision precision,
                                    bool distributed_optimizer, std::int64_t dp) {
  // TODO(11.3 megatron_state_bytes_per_gpu): Megatron-LM's documented bytes per parameter for
  // each MegatronPrecision: 18 for bf16 with fp32 gradients, 6 + 12/d with the distributed
  // optimizer. An unknown precision value throws.
  throw NotImplemented("11.3 megatron_state_bytes_per_gpu");
}

}  // namespace mgpu::zero
