// 11.6 Activation checkpointing: peak activation memory with a checkpoint every k layers, the
// k that minimises it (about sqrt(L), Chen et al. 2016), and the compute that recomputation adds.
// The running checkpointing chapter measures its memory ledger and FLOP counter against these.
#pragma once

#include <cstdint>

/// Section 11.6: activation (gradient) checkpointing.
namespace mgpu::checkpointing {

/// Peak stored activations, in layer-activation units, for L layers with a checkpoint every k.
///
/// Units: one unit is what one layer keeps for its backward when nothing is recomputed (its
/// "full activations"); a checkpoint (a layer input) is also counted as one unit here, the
/// simple model of Chen et al. 2016. Use checkpointed_peak_bytes when the two sizes differ.
///
/// The model splits the L layers into ceil(L/k) segments of k layers (the last may be
/// shorter), keeps the input of every segment through the forward pass, and in the backward
/// pass recomputes one segment at a time, holding its full activations while it
/// back-propagates through it. The peak is all checkpoints plus one longest segment:
///   ceil(L/k) + k.
/// k = L stores 1 checkpoint and recomputes everything in one go (1 + L); without
/// checkpointing the peak is L (see no_checkpoint_peak_units).
/// @throws std::invalid_argument when layers is below 1 or k is not in [1, layers].
std::int64_t checkpointed_peak_units(std::int64_t layers, std::int64_t k);

/// Peak stored activations without checkpointing, in the same units: every layer's, L.
/// @throws std::invalid_argument when layers is below 1.
std::int64_t no_checkpoint_peak_units(std::int64_t layers);

/// The same peak in bytes, given the bytes of one checkpoint (a layer input, e.g. 2*s*b*h for a
/// transformer layer in 16 bits) and of one layer's full activations (e.g.
/// s*b*h*(34 + 5*a*s/h), section 11.1): ceil(L/k) * checkpoint_bytes + k * layer_bytes.
/// @throws std::invalid_argument as checkpointed_peak_units, and when either size is negative or
///         not finite.
double checkpointed_peak_bytes(std::int64_t layers, std::int64_t k, double checkpoint_bytes,
                               double layer_bytes);

/// The k in [1, L] that minimises checkpointed_peak_units(L, k); the smallest such k on a tie.
/// The minimum peak is ceil(2*sqrt(L)) units instead of L, reached near k = sqrt(L) (several k
/// may tie: for L = 1000 every k from 28 to 36 gives 64). Cost O(sqrt(L)).
/// Example: L = 16 gives k = 4 (peak 8 units instead of 16).
/// @throws std::invalid_argument when layers is below 1.
std::int64_t best_checkpoint_interval(std::int64_t layers);

/// The k in [1, L] that minimises checkpointed_peak_bytes(L, k, checkpoint_bytes, layer_bytes);
/// the smallest such k on a tie. Near sqrt(L * checkpoint_bytes / layer_bytes): cheap
/// checkpoints favour short segments. With layer_bytes = 0 the answer is L when
/// checkpoint_bytes is positive (one segment) and 1 when both are 0.
/// @throws std::invalid_argument as checkpointed_peak_bytes.
std::int64_t best_checkpoint_interval_bytes(std::int64_t layers, double checkpoint_bytes,
                                            double layer_bytes);

/// Extra compute that recomputation adds, as a fraction of a step without it.
///
/// A step costs F (forward) + B (backward) with B = backward_over_forward * F (2 for
/// transformers: the backward computes gradients for both inputs and weights). Recomputing
/// `recomputed_layers` of the L layers adds that share of one forward:
///   (recomputed_layers / layers) / (1 + backward_over_forward).
/// Checkpointing every segment reruns every layer: 1/3 more compute at the usual ratio 2.
/// @throws std::invalid_argument when layers is below 1, recomputed_layers is not in
///         [0, layers], or backward_over_forward is negative or not finite.
double recompute_extra_flops_fraction(std::int64_t recomputed_layers, std::int64_t layers,
                                      double backward_over_forward = 2.0);

}  // namespace mgpu::checkpointing
