// The module's exercises as functions, built on the chapter formulas of 11.2, 11.3 and 11.5.
// Apply exercises return the number the text asks for; check and extend become a
// classification and a quantitative comparison. Explanations stay prose (see README.md).
#pragma once

#include <cstdint>

#include "11_2_data_parallel/formulas.hpp"  // LinkModel

/// The module 11 exercises.
namespace mgpu::exercises {

/// Decimal gigabyte, the unit the text's answers use: 1 GB = 1e9 bytes.
inline constexpr double kBytesPerGB = 1e9;

/// Apply 1: GB of training state per GPU with ZeRO stage 3 at 16 bytes per parameter (the
/// course's bf16 mixed recipe). The text asks for 70e9 parameters on 64 GPUs (its answer is in
/// README.md, behind a click). Computed by your 11.3 chapter code, not retyped.
/// @throws std::invalid_argument when params is negative or gpus is below 1.
double zero3_state_gb_per_gpu(double params, std::int64_t gpus);

/// Apply 2: pipeline bubble fraction of GPipe with `stages` stages and `micro_batches`
/// micro-batches. The text asks for 4 stages and 8 micro-batches. Computed by your 11.5 chapter
/// code, not retyped.
/// @throws std::invalid_argument when stages or micro_batches is below 1.
double bubble_fraction(std::int64_t stages, std::int64_t micro_batches);

/// Apply 3: GB per GPU with ZeRO stage 1 (16-byte recipe). The text asks you to write the
/// formula first, then evaluate it for 7e9 parameters on 8 GPUs with your 11.3 chapter code.
/// @throws std::invalid_argument when params is negative or gpus is below 1.
double zero1_state_gb_per_gpu(double params, std::int64_t gpus);

/// The four ways of splitting training that the module covers.
enum class Technique {
  data_parallel,      ///< split the batch; every GPU holds the whole model
  zero,               ///< data parallelism with sharded training state (ZeRO / FSDP)
  tensor_parallel,    ///< split every matrix of every layer
  pipeline_parallel,  ///< split the layers into stages
};

/// What a technique does to one GPU's training state, for the check exercise.
enum class Effect {
  reduces_memory_per_gpu,  ///< each GPU holds less training state as GPUs are added
  only_raises_throughput,  ///< each GPU still holds all of it; only the work is divided
};

/// Check: does `technique` shrink the training state each GPU holds as GPUs are added, or only
/// add throughput? Answer as the text's sections argue; why is the prose part of the exercise.
/// @throws std::invalid_argument when technique is not a Technique value.
Effect training_state_effect(Technique technique);

/// Whether the communication of `technique` sits on the critical path of a step: the next
/// computation waits for it and it cannot be overlapped with independent work, as each
/// technique is implemented in this course's chapters. A pipeline's bubble is idle time of its
/// own and is not counted here.
/// @throws std::invalid_argument when technique is not a Technique value.
bool communication_on_critical_path(Technique technique);

/// Extend, the numbers behind the answer: one tensor-parallel all-reduce of a block's activation
/// inside a server versus across servers.
struct TensorParallelLinkComparison {
  double payload_bytes = 0;       ///< seq * micro_batch * hidden * bytes_per_element
  double intra_node_seconds = 0;  ///< ring all-reduce time over the fast link (e.g. NVLink)
  double inter_node_seconds = 0;  ///< ring all-reduce time over the network between servers
  double slowdown = 0;            ///< inter_node_seconds / intra_node_seconds
};

/// Extend: times one ring all-reduce of a block activation (seq * micro_batch * hidden elements
/// of bytes_per_element) over t ranks with data_parallel::ring_all_reduce_seconds, once on
/// `intra_node` and once on `inter_node`, and their ratio (the README asks you to predict it
/// for the text's numbers).
/// @throws std::invalid_argument when seq, micro_batch, hidden or t is below 1, or t = 1
///         (nothing to compare: a single rank does not communicate), bytes_per_element is not
///         positive, or a link is invalid (see data_parallel::ring_all_reduce_seconds).
TensorParallelLinkComparison tensor_parallel_link_comparison(
    std::int64_t seq, std::int64_t micro_batch, std::int64_t hidden, std::int64_t t,
    double bytes_per_element, const data_parallel::LinkModel& intra_node,
    const data_parallel::LinkModel& inter_node);

}  // namespace mgpu::exercises
