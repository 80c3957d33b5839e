// 11.3 ZeRO and FSDP: training state per GPU and traffic per step for each sharding stage,
// plus the estimates two real frameworks print (DeepSpeed, Megatron-LM) and why they differ.
// The running ZeRO chapter measures its memory ledger and traffic meter against these.
#pragma once

#include <cstdint>
#include <optional>

#include "mgpu/course.hpp"  // PrecisionRecipe and its presets

/// Section 11.3: ZeRO stages 0..3 (stage 3 is what PyTorch FSDP implements).
namespace mgpu::zero {

/// Training state held by one GPU, split into the four kinds a memory ledger tracks.
struct StateBytes {
  double weights_bytes = 0;    ///< working weights (bf16 in the default recipe)
  double grads_bytes = 0;      ///< gradients
  double master_bytes = 0;     ///< fp32 master weights
  double optimizer_bytes = 0;  ///< optimizer state (Adam's moments)
  /// Sum of the four kinds.
  [[nodiscard]] double total_bytes() const {
    return weights_bytes + grads_bytes + master_bytes + optimizer_bytes;
  }
};

/// Training state per GPU, by kind, with ZeRO stage `stage` over `dp` data-parallel GPUs.
///
/// With Psi = params and the recipe's bytes w, g, m, o per parameter:
/// - stage 0 (plain data parallelism): everything replicated, Psi*(w + g + m + o)
/// - stage 1 shards the optimizer state and master weights: Psi*(w + g) + Psi*(m + o)/N
/// - stage 2 also shards the gradients: Psi*w + Psi*(g + m + o)/N
/// - stage 3 also shards the weights: Psi*(w + g + m + o)/N
/// For the 16-byte recipe: 16 Psi, 4 Psi + 12 Psi/N, 2 Psi + 14 Psi/N, 16 Psi/N.
/// Shards are the exact fraction 1/N (no padding to equal sizes). With N = 1 every stage
/// equals stage 0. Transient buffers (a gathered layer in stage 3, communication buckets)
/// are not training state and are not counted.
/// @throws std::invalid_argument when stage is not 0..3 ("zero stage 4 does not exist: use 0,
///         1, 2 or 3"), dp is below 1, params is negative or not finite, or the recipe is invalid.
StateBytes zero_state_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                              std::int64_t dp);

/// zero_state_per_gpu(params, recipe, stage, dp).total_bytes(): the bytes one GPU keeps.
///
/// Example: 70e9 parameters, 16-byte recipe, stage 3 on 64 GPUs: 17.5e9 bytes.
/// @throws std::invalid_argument as zero_state_per_gpu.
double zero_state_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                std::int64_t dp);

/// Bytes one GPU sends per training step, by collective, for a ring implementation.
struct TrafficBytes {
  double all_reduce_bytes = 0;           ///< gradient all-reduce (stage 0)
  double reduce_scatter_bytes = 0;       ///< gradient reduce-scatter (stages 1..3)
  double all_gather_forward_bytes = 0;   ///< weight all-gather before the forward (stage 3),
                                         ///< or of the updated weights after the step (1, 2)
  double all_gather_backward_bytes = 0;  ///< weight all-gather again for the backward (stage 3)
  /// Sum of all collectives.
  [[nodiscard]] double total_bytes() const {
    return all_reduce_bytes + reduce_scatter_bytes + all_gather_forward_bytes +
           all_gather_backward_bytes;
  }
};

/// Bytes one GPU sends per step with ZeRO stage `stage` over `dp` GPUs, by collective.
///
/// With f = (N - 1)/N (the ring's share: a reduce-scatter or all-gather of S bytes sends f*S per
/// rank, an all-reduce 2*f*S):
/// - stage 0: one all-reduce of the gradients: all_reduce = 2 f Psi g
/// - stages 1 and 2: reduce-scatter the gradients (f Psi g), each GPU updates its shard, then
///   all-gather the updated weights (f Psi w, reported in all_gather_forward_bytes). Equal to
///   stage 0 when w = g, which is ZeRO's claim that stages 1 and 2 cost no extra traffic.
/// - stage 3: all-gather the weights before the forward (f Psi w) and again before the backward
///   (f Psi w), reduce-scatter the gradients (f Psi g): 1.5 times stage 0 when w = g.
/// N = 1 sends nothing.
/// @throws std::invalid_argument as zero_state_per_gpu.
TrafficBytes zero_traffic_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp);

/// zero_traffic_per_gpu(params, recipe, stage, dp).total_bytes().
/// @throws std::invalid_argument as zero_state_per_gpu.
double zero_traffic_bytes_per_gpu(double params, const PrecisionRecipe& recipe, int stage,
                                  std::int64_t dp);

/// The smallest GPU count N, a multiple of `multiple_of`, for which the training state per GPU
/// at this stage is at most `capacity_bytes`; std::nullopt when no N achieves it (stages 0..2
/// keep a replicated part that no N removes: stage 1 never fits when Psi*(w + g) reaches the
/// capacity), or when more than 1e15 GPUs would be needed.
///
/// Example: 70e9 parameters, 16-byte recipe, stage 3, 80e9 bytes: 14 (1120/14 = 80 exactly
/// fits); with multiple_of = 8 (whole 8-GPU servers): 16.
/// @throws std::invalid_argument when capacity_bytes is not positive, multiple_of is below 1,
///         or as zero_state_per_gpu (stage, params, recipe).
std::optional<std::int64_t> min_gpus_to_fit(double params, const PrecisionRecipe& recipe, int stage,
                                            double capacity_bytes, std::int64_t multiple_of = 1);

// ------------------------------------------------------------------ what frameworks print

/// GPU and CPU bytes as DeepSpeed's estimators report them.
struct DeepSpeedEstimate {
  double gpu_bytes = 0;  ///< per GPU
  double cpu_bytes = 0;  ///< per node (host memory)
};

/// Where DeepSpeed's estimators place the state and how many GPUs they spread it over.
struct DeepSpeedSetup {
  std::int64_t gpus_per_node = 1;         ///< GPUs in each node, 1 or more
  std::int64_t nodes = 1;                 ///< nodes, 1 or more
  bool cpu_offload = false;               ///< optimizer state (and fp32 gradients) in host memory
  bool cpu_offload_params = false;        ///< stage 3 only: parameters in host memory too
  bool zero_init = true;                  ///< stage 3 only: model built already partitioned
  double additional_buffer_factor = 1.5;  ///< slack DeepSpeed multiplies host memory by
};

/// DeepSpeed's ZeRO-2 estimate (deepspeed.runtime.zero.stage_1_and_2,
/// `estimate_zero2_model_states_mem_needs`), reimplemented from DeepSpeed v0.14.3 and later
/// (the formula is unchanged since; PR 5099).
///
/// With T = gpus_per_node * nodes:
/// - without offload: gpu = 2 Psi + floor(18 Psi / T); cpu = 4 Psi * gpus_per_node * factor
/// - with offload:    gpu = 2 Psi;                     cpu = Psi * max(4 T, 16) * factor
/// Why it differs from zero_state_bytes_per_gpu(stage 2) = 2 Psi + 14 Psi/N: the replicated
/// part is the same 16-bit weights, but DeepSpeed's shard counts 18 bytes, 16-bit gradient (2)
/// + fp32 gradient (4) + fp32 master (4) + Adam (8): its optimizer step reads an fp32 copy of
/// the gradient shard. (Releases up to v0.14.2 printed 4 Psi + floor(16 Psi / T).) The host
/// figure is what loading the fp32 model costs per node, padded by additional_buffer_factor;
/// the GPU figure has no buffer factor.
/// @throws std::invalid_argument when params is negative, gpus_per_node or nodes is below 1,
///         or additional_buffer_factor is below 1.
DeepSpeedEstimate deepspeed_zero2_estimate(double params, const DeepSpeedSetup& setup);

/// DeepSpeed's ZeRO-3 estimate (deepspeed.runtime.zero.stage3,
/// `estimate_zero3_model_states_mem_needs`), reimplemented from its source as of DeepSpeed
/// v0.16 (no change in the v0.14.3 revision that fixed the ZeRO-2 figure).
///
/// With T = gpus_per_node * nodes, Lmax = largest_layer_params, f = additional_buffer_factor:
/// - no offload:              gpu = 4 Lmax + floor(18 Psi / T);
///                            cpu = 4 Lmax * gpus_per_node * f (zero_init) or
///                                  4 Psi * gpus_per_node * f (otherwise)
/// - offload optimizer only:  gpu = 4 Lmax + floor(2 Psi / T);
///                            cpu = 16 Psi / nodes * f (zero_init) or
///                                  Psi * max(4 gpus_per_node, 16 / nodes) * f
/// - offload params too:      gpu = 4 Lmax;
///                            cpu = 18 Psi / nodes * f (zero_init) or
///                                  Psi * max(4 gpus_per_node, 18 / nodes) * f
/// Why it differs from 16 Psi/N: the largest layer is gathered in full, 16-bit weights and
/// 16-bit gradients (4 Lmax bytes), and the shard counts 18 bytes per parameter: 2 (bf16 weight
/// shard) + 16 (fp32 master, Adam, fp32 gradient shard); ZeRO-2's 18 has the same 16, with the
/// 16-bit gradient shard in place of the weight shard (its weights stay whole).
/// @throws std::invalid_argument when params or largest_layer_params is negative,
///         largest_layer_params exceeds params, or as deepspeed_zero2_estimate.
DeepSpeedEstimate deepspeed_zero3_estimate(double params, double largest_layer_params,
                                           const DeepSpeedSetup& setup);

/// The parameter and gradient types Megatron-LM's memory table distinguishes.
enum class MegatronPrecision {
  fp16_params_fp16_grads,  ///< fp16 model, fp16 gradients (an fp32 gradient copy for the step)
  bf16_params_fp32_grads,  ///< bf16 model, gradients accumulated in fp32 `main_grad`
  fp32_params_fp32_grads,  ///< everything in fp32
};

/// Training state per GPU as Megatron-LM documents it (its distributed-optimizer README):
/// replicated bytes R plus sharded bytes S per parameter, Psi*(R + S) without the distributed
/// optimizer and Psi*(R + S/dp) with it.
///
/// - fp16 params, fp16 grads: R = 4 (2 weight + 2 grad), S = 16 (4 master + 4 fp32 grad + 8 Adam):
///   20, or 4 + 16/d
/// - bf16 params, fp32 grads: R = 6 (2 weight + 4 fp32 main_grad), S = 12 (4 master + 8 Adam):
///   18, or 6 + 12/d. The 2 extra bytes over the 16-byte table come from accumulating gradients
///   in fp32 (numerically safer over many micro-batches); this equals zero_state_bytes_per_gpu
///   with kMegatronBf16Fp32Grads at stage 0 (or stage 1 with the distributed optimizer).
/// - fp32 params, fp32 grads: R = 8, S = 8 (Adam; the weights are the master): 16, or 8 + 8/d
/// @throws std::invalid_argument when params is negative or not finite, or dp is below 1.
double megatron_state_bytes_per_gpu(double params, MegatronPrecision precision,
                                    bool distributed_optimizer, std::int64_t dp);

}  // namespace mgpu::zero
