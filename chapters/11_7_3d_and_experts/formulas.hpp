// 11.7 3D parallelism and expert parallelism: how tp x pp x dp GPUs are numbered and checked,
// what each GPU holds and sends per step under a layout, and the all-to-all of an expert layer.
// The planner (`mgpu plan`) and the 3D training step (step3d.hpp) use these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mgpu/course.hpp"  // PrecisionRecipe, TransformerShape (data only)

/// Section 11.7: combining tensor, pipeline and data parallelism, and expert parallelism.
namespace mgpu::layout {

/// Degrees of the three kinds of parallelism. Their product is the GPU count.
struct Layout {
  std::int64_t tp = 1;  ///< tensor-parallel degree (GPUs splitting every matrix, inside a node)
  std::int64_t pp = 1;  ///< pipeline-parallel degree (stages)
  std::int64_t dp = 1;  ///< data-parallel degree (copies of the tp x pp arrangement)
};

/// tp * pp * dp. Example: {8, 4, 32} gives 1024.
/// @throws std::invalid_argument when a degree is below 1.
std::int64_t layout_gpus(const Layout& layout);

/// What is wrong with `layout` for a cluster of `gpus` GPUs in nodes of `gpus_per_node`, or
/// std::nullopt when nothing is. Checked in this order, the first failure is reported:
/// 1. every degree, gpus and gpus_per_node is at least 1;
/// 2. tp * pp * dp equals gpus ("tp*pp*dp = 8*4*16 = 512 but the cluster has 1024 GPUs");
/// 3. tp is at most gpus_per_node and divides it (tensor parallelism stays inside a node);
/// 4. when layers is positive, pp divides layers (equal stages). layers = 0 skips this check.
/// The message names the values and the fix.
std::optional<std::string> layout_problem(const Layout& layout, std::int64_t gpus,
                                          std::int64_t gpus_per_node, std::int64_t layers = 0);

/// Throws std::invalid_argument with layout_problem's message when it reports one.
void check_layout(const Layout& layout, std::int64_t gpus, std::int64_t gpus_per_node,
                  std::int64_t layers = 0);

/// Where a global rank sits in the layout: its index along each of the three axes.
struct RankCoords {
  std::int64_t tp = 0;  ///< index inside its tensor-parallel group, in [0, layout.tp)
  std::int64_t pp = 0;  ///< pipeline stage, in [0, layout.pp)
  std::int64_t dp = 0;  ///< data-parallel replica, in [0, layout.dp)
};

/// Coordinates of global rank `rank`, with tp varying fastest, then pp, then dp:
/// rank = tp + layout.tp * (pp + layout.pp * dp). Consecutive ranks, the GPUs of one node,
/// thus form the tensor-parallel groups.
/// @throws std::invalid_argument when a degree is below 1 or rank is not in
///         [0, layout_gpus(layout)).
RankCoords rank_coordinates(std::int64_t rank, const Layout& layout);

/// The inverse of rank_coordinates: tp + layout.tp * (pp + layout.pp * dp).
/// @throws std::invalid_argument when a degree is below 1 or a coordinate is out of its range.
std::int64_t global_rank(const RankCoords& coords, const Layout& layout);

/// Everything the per-GPU memory and traffic of a layout depend on.
struct LayoutModel {
  double params = 0;                        ///< Psi, the model's parameter count
  PrecisionRecipe recipe = kBf16MixedAdam;  ///< bytes per parameter by kind
  Layout layout;                            ///< tp, pp, dp
  int zero_stage = 0;                       ///< ZeRO stage 0..3 over the dp group
  TransformerShape shape;                   ///< seq, micro_batch, hidden, heads, layers
  std::int64_t micro_batches = 1;           ///< m: micro-batches per step per pipeline
  /// Activations one layer keeps per micro-batch on one GPU, already for this tp, sequence
  /// parallelism and recompute choice (compute it with memory::activation_bytes_per_layer).
  double activation_bytes_per_layer = 0;
  double bytes_per_activation = 2;        ///< element size of communicated activations
  Recompute recompute = Recompute::none;  ///< full recompute repeats the
                                          ///< forward all-reduces
};

/// Memory of one GPU under a layout, by kind.
struct GpuMemory {
  double weights_bytes = 0;     ///< working weights
  double grads_bytes = 0;       ///< gradients
  double master_bytes = 0;      ///< master weights
  double optimizer_bytes = 0;   ///< optimizer state
  double activation_bytes = 0;  ///< activations at the peak of a 1F1B step (first stage)
  /// Training state: the four kinds other than activations.
  [[nodiscard]] double state_bytes() const {
    return weights_bytes + grads_bytes + master_bytes + optimizer_bytes;
  }
  /// Everything.
  [[nodiscard]] double total_bytes() const { return state_bytes() + activation_bytes; }
};

/// Memory of the busiest GPU (first pipeline stage) under model.layout.
///
/// Training state: tensor and pipeline parallelism each hold a 1/(tp*pp) share of every
/// parameter (embeddings and replicated layer norms ignored), so the GPU's share is
/// Psi' = params / (tp * pp); ZeRO stage s then shards Psi' over the dp group exactly as
/// zero::zero_state_per_gpu(Psi', recipe, s, dp) (stage 0: w+g+m+o per parameter; stage 1
/// shards m and o; stage 2 also g; stage 3 also w).
/// Activations (1F1B schedule): activation_bytes_per_layer * layers/pp * min(m, pp), the first
/// stage's layers times the micro-batches it holds in flight.
/// @throws std::invalid_argument when the layout's degrees are below 1, pp does not divide
///         shape.layers, zero_stage is not 0..3, params or activation_bytes_per_layer is negative,
///         micro_batches is below 1, or the recipe is invalid.
GpuMemory per_gpu_memory(const LayoutModel& model);

/// Bytes one GPU sends per training step, by kind of parallelism.
struct GpuTraffic {
  double data_parallel_bytes = 0;    ///< gradient/weight collectives over the dp group
  double tensor_parallel_bytes = 0;  ///< activation all-reduces inside the tp group
  double pipeline_bytes = 0;         ///< activations and gradients across stage boundaries
  /// Everything.
  [[nodiscard]] double total_bytes() const {
    return data_parallel_bytes + tensor_parallel_bytes + pipeline_bytes;
  }
};

/// Bytes the busiest GPU sends per step under model.layout (ring collectives), with
/// Psi' = params/(tp*pp), A = seq * micro_batch * hidden * bytes_per_activation, m micro-batches:
/// - data parallel, over dp with f = (dp - 1)/dp: stage 0: 2 f Psi' g; stages 1, 2:
///   f Psi' (g + w); stage 3: f Psi' (2w + g) (as zero::zero_traffic_bytes_per_gpu on Psi').
/// - tensor parallel: each of the layers/pp layers on this GPU all-reduces A twice forward and
///   twice backward per micro-batch, each costing 2 (tp - 1)/tp * A; full recompute reruns the
///   forward, adding its 2 all-reduces (6 per layer instead of 4); selective recompute adds none.
/// - pipeline: a middle stage sends A forward and A backward per micro-batch (2 m A); with
///   pp = 2 each stage sends m A; with pp = 1 nothing. A stage is tp GPUs, and each sends only
///   its 1/tp slice of every boundary tensor (Megatron's scatter/gather across stages; under
///   sequence parallelism the tensor is already split that way), so one GPU sends 1/tp of the
///   stage's bytes: 2 m A / tp in a middle stage.
///   Without sequence parallelism the receiving stage rebuilds the whole tensor with an
///   all-gather over its tp links, (tp - 1)/tp A per tensor received. That term is not
///   counted: it stays inside a server, on links about ten times faster than those the pipeline
///   term crosses, though in bytes it is tp - 1 times the pipeline term.
/// @throws std::invalid_argument as per_gpu_memory, and when bytes_per_activation is not
///         positive or a shape field is below 1.
GpuTraffic per_gpu_traffic(const LayoutModel& model);

// ------------------------------------------------------------------ expert parallelism

/// Experts each rank hosts when `experts` experts are spread over `ranks` ranks: experts/ranks.
/// @throws std::invalid_argument when experts or ranks is below 1 or ranks does not divide
///         experts ("64 experts over 6 ranks: use a rank count that divides 64").
std::int64_t experts_per_rank(std::int64_t experts, std::int64_t ranks);

/// Bytes one rank sends in the all-to-all exchanges of one expert layer's forward pass.
///
/// Each of the rank's `tokens_per_rank` tokens sends its hidden vector (hidden elements of
/// bytes_per_element) to each of its top_k experts. With routing spread evenly over the
/// `experts` experts on `ranks` ranks, the fraction (ranks - 1)/ranks of those copies lives
/// on another rank and leaves it. The dispatch sends them out and the combine sends the expert
/// outputs back, the same volume again:
///   2 * tokens_per_rank * top_k * hidden * bytes_per_element * (ranks - 1)/ranks.
/// ranks = 1 sends nothing. No dropped tokens are modelled, and the capacity factor does not
/// enter: with a variable-size all-to-all (Comm::all_to_all_v) only the copies that exist travel.
/// A fixed-size all-to-all, padded to each expert's capacity, would send factor times as much.
/// @throws std::invalid_argument when tokens_per_rank is negative, hidden, top_k, experts or
///         ranks is below 1, top_k exceeds experts, ranks does not divide experts, or
///         bytes_per_element is not positive.
double expert_all_to_all_bytes_per_rank(std::int64_t tokens_per_rank, std::int64_t hidden,
                                        std::int64_t top_k, std::int64_t experts,
                                        std::int64_t ranks, double bytes_per_element);

}  // namespace mgpu::layout
