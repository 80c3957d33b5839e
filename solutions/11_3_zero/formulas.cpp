// 11.3 reference solution: ZeRO training state and traffic per GPU, the fewest GPUs that fit,
// and DeepSpeed's and Megatron-LM's own estimates. Implements chapters/11_3_zero/formulas.hpp.
#include "11_3_zero/formulas.hpp"
#include "11_3_zero/checks.hpp"  // check_stage, check_common, check_setup (given)

#include "mgpu/check_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::zero {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

StateBytes zero_state_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                              std::int64_t dp) {
  check_common("zero_state_per_gpu", params, recipe, stage, dp);
  // Stage s shards the last s of (weights, grads, {master, optimizer}) taken from the right:
  // stage 1 shards master + optimizer, stage 2 adds grads, stage 3 adds weights.
  const double n = static_cast<double>(dp);
  auto share = [&](bool sharded, double bytes) { return params * bytes / (sharded ? n : 1.0); };
  StateBytes s;
  s.master_bytes = share(stage >= 1, recipe.bytes_master);
  s.optimizer_bytes = share(stage >= 1, recipe.bytes_optimizer);
  s.grads_bytes = share(stage >= 2, recipe.bytes_grads);
  s.weights_bytes = share(stage >= 3, recipe.bytes_weights);
  return s;
}

double zero_state_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                std::int64_t dp) {
  return zero_state_per_gpu(params, recipe, stage, dp).total_bytes();
}

TrafficBytes zero_traffic_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp) {
  check_common("zero_traffic_per_gpu", params, recipe, stage, dp);
  const double n = static_cast<double>(dp);
  const double f = (n - 1.0) / n;  // a ring reduce-scatter or all-gather sends f of the buffer
  const double grads = params * recipe.bytes_grads;
  const double weights = params * recipe.bytes_weights;
  TrafficBytes t;
  if (stage == 0) {
    t.all_reduce_bytes = 2.0 * f * grads;
  } else {
    // Each GPU only needs the summed gradient of its own shard...
    t.reduce_scatter_bytes = f * grads;
    // ...and afterwards everyone needs everyone's updated weights (stages 1, 2), or each layer's
    // weights just before it is used, in the forward and again in the backward (stage 3).
    t.all_gather_forward_bytes = f * weights;
    if (stage == 3) t.all_gather_backward_bytes = f * weights;
  }
  return t;
}

double zero_traffic_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp) {
  return zero_traffic_per_gpu(params, recipe, stage, dp).total_bytes();
}

std::optional<std::int64_t> min_gpus_to_fit(double params, const PrecisionRecipe& recipe, int stage,
                                            double capacity_bytes, std::int64_t multiple_of) {
  const char* where = "min_gpus_to_fit";
  check_common(where, params, recipe, stage, 1);
  check_positive(where, "capacity_bytes", capacity_bytes);
  check_count(where, "multiple_of", multiple_of);
  // Memory per GPU is replicated + sharded / N; only the sharded part shrinks with N.
  const double total = zero_state_bytes_per_gpu(params, recipe, stage, 1);
  double replicated_per_param = recipe.bytes_weights + recipe.bytes_grads;  // stage 1
  if (stage == 0) replicated_per_param += recipe.bytes_master + recipe.bytes_optimizer;
  if (stage == 2) replicated_per_param = recipe.bytes_weights;
  if (stage == 3) replicated_per_param = 0;
  const double replicated = params * replicated_per_param;
  const double sharded = total - replicated;
  if (total <= capacity_bytes) return multiple_of;
  if (replicated >= capacity_bytes) return std::nullopt;  // no N removes the replicated part
  // Smallest N with sharded / N <= capacity - replicated, then up to a multiple; the loop
  // corrects the rounding of the division in either direction.
  const double room = capacity_bytes - replicated;
  if (sharded / room > 1e15) return std::nullopt;  // beyond any cluster (and int64 rounding)
  std::int64_t n = static_cast<std::int64_t>(std::ceil(sharded / room));
  n = std::max<std::int64_t>(1, n);
  while (n > 1 && zero_state_bytes_per_gpu(params, recipe, stage, n - 1) <= capacity_bytes) --n;
  while (zero_state_bytes_per_gpu(params, recipe, stage, n) > capacity_bytes) ++n;
  return (n + multiple_of - 1) / multiple_of * multiple_of;
}

// ------------------------------------------------------------------ what frameworks print

DeepSpeedEstimate deepspeed_zero2_estimate(double params, const DeepSpeedSetup& setup) {
  const char* where = "deepspeed_zero2_estimate";
  check_non_negative(where, "params", params);
  check_setup(where, setup);
  const double gpus = static_cast<double>(setup.gpus_per_node * setup.nodes);
  const double per_node = static_cast<double>(setup.gpus_per_node);
  const double factor = setup.additional_buffer_factor;
  DeepSpeedEstimate e;
  if (setup.cpu_offload) {
    e.gpu_bytes = 2.0 * params;
    e.cpu_bytes = params * std::max(4.0 * gpus, 16.0) * factor;
  } else {
    // 2 replicated (16-bit weights) + 18 sharded (16-bit and fp32 gradients, fp32 master, Adam).
    e.gpu_bytes = 2.0 * params + std::floor(18.0 * params / gpus);
    e.cpu_bytes = params * 4.0 * per_node * factor;
  }
  return e;
}

DeepSpeedEstimate deepspeed_zero3_estimate(double params, double largest_layer_params,
                                           const DeepSpeedSetup& setup) {
  const char* where = "deepspeed_zero3_estimate";
  check_non_negative(where, "params", params);
  check_non_negative(where, "largest_layer_params", largest_layer_params);
  if (largest_layer_params > params)
    fail(where, "largest_layer_params", show(largest_layer_params),
         "exceeds params=" + show(params) + ": a layer cannot be larger than the model");
  check_setup(where, setup);
  const double gpus = static_cast<double>(setup.gpus_per_node * setup.nodes);
  const double per_node = static_cast<double>(setup.gpus_per_node);
  const double nodes = static_cast<double>(setup.nodes);
  const double factor = setup.additional_buffer_factor;
  const double largest_layer = 4.0 * largest_layer_params;  // 16-bit weights + 16-bit grads
  DeepSpeedEstimate e;
  if (setup.cpu_offload) {
    const double host_bytes = setup.cpu_offload_params ? 18.0 : 16.0;
    e.gpu_bytes =
        setup.cpu_offload_params ? largest_layer : largest_layer + std::floor(2.0 * params / gpus);
    e.cpu_bytes = setup.zero_init ? params * host_bytes / nodes * factor
                                  : params * std::max(4.0 * per_node, host_bytes / nodes) * factor;
  } else {
    e.gpu_bytes = largest_layer + std::floor(18.0 * params / gpus);
    e.cpu_bytes = setup.zero_init ? largest_layer_params * 4.0 * per_node * factor
                                  : params * 4.0 * per_node * factor;
  }
  return e;
}

double megatron_state_bytes_per_gpu(double params, MegatronPrecision precision,
                                    bool distributed_optimizer, std::int64_t dp) {
  const char* where = "megatron_state_bytes_per_gpu";
  check_non_negative(where, "params", params);
  check_count(where, "dp", dp);
  double replicated = 0;  // model weights + gradients as the model holds them
  double sharded = 0;     // what the (distributed) optimizer holds
  switch (precision) {
    case MegatronPrecision::fp16_params_fp16_grads:
      replicated = 2 + 2;
      sharded = 4 + 4 + 8;
      break;
    case MegatronPrecision::bf16_params_fp32_grads:
      replicated = 2 + 4;
      sharded = 4 + 8;
      break;
    case MegatronPrecision::fp32_params_fp32_grads:
      replicated = 4 + 4;
      sharded = 8;
      break;
    default:
      fail(where, "precision", std::to_string(static_cast<int>(precision)),
           "is not a MegatronPrecision value");
  }
  const double n = distributed_optimizer ? static_cast<double>(dp) : 1.0;
  return params * (replicated + sharded / n);
}

}  // namespace mgpu::zero
