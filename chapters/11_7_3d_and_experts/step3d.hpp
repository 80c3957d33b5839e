// 11.7 A 3D-parallel training step of the course model: tensor parallelism inside every block
// (attention and FFN, column- then row-parallel), pipeline stages run with 1F1B, and data
// parallelism with ZeRO-1 over the replicas, all on one ProcessGrid. The chapter's own small
// versions of 11.3, 11.4 and 11.5, so that this chapter depends on no other chapter's code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "11_7_3d_and_experts/grid.hpp"
#include "11_7_3d_and_experts/share.hpp"
#include "mgpu/memory.hpp"
#include "mgpu/model/model.hpp"

namespace mgpu::layout {

/// Activations one block saved for one micro-batch on one rank (Category::activations). n is
/// the micro-batch's tokens, d the model width, f the FFN width, t the tp degree.
struct BlockCache3d {
  Buffer<float> x;    ///< (n, d) the block's input
  Buffer<float> q;    ///< (n, d/t) queries of this rank's heads
  Buffer<float> k;    ///< (n, d/t) their keys
  Buffer<float> v;    ///< (n, d/t) their values
  Buffer<float> o;    ///< (n, d/t) their outputs, before W_O
  Buffer<float> p;    ///< (n/seq * heads/t * seq, seq) attention probabilities
  Buffer<float> mid;  ///< (n, d) the FFN's input, x + attention(x)
  Buffer<float> h;    ///< (n, f/t) this rank's FFN pre-activation, x W_1 + b_1
  Buffer<float> a;    ///< (n, f/t) its GELU
};

/// Forward of block unit `unit` on this rank's slices (`unit_params`: the unit's range of the
/// share's flat buffer, tensors in Model order wq, wk, wv, wo, w1, b1, w2, b2, cut as Cut says).
/// y = mid + FFN(mid) with mid = x + Attention(x), as Model::unit_forward computes, from the
/// rank's heads and FFN columns: each half produces a partial sum that one all-reduce over `tp`
/// completes (two per block), and b_2, held whole, is added once after the sum. Moves x into
/// the cache and returns y (n, d), both Category::activations. Charges the rank's share of the
/// block's FLOPs (Model::unit_forward_flops / tp) as "fwd <unit name>".
///
/// TODO 15 of 11.7 (step3d.cpp).
Buffer<float> tp_block_forward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                               std::span<const float> unit_params, Buffer<float> x,
                               std::int64_t tokens, BlockCache3d& cache);

/// Backward of tp_block_forward from dy (n, d), the same on every tp rank: accumulates (+=) the
/// gradients of this rank's slices into `unit_grads` (b_2's on every rank alike) and returns dx
/// (n, d), the same on every tp rank after two all-reduces over `tp` (one per half). Empties the
/// cache. Charges twice the forward's FLOPs as "bwd <unit name>".
///
/// TODO 16 of 11.7 (step3d.cpp).
Buffer<float> tp_block_backward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                                std::span<const float> unit_params, std::span<float> unit_grads,
                                BlockCache3d& cache, std::span<const float> dy);

/// Which way a tensor crosses a stage boundary.
enum class Direction {
  forward,   ///< an activation, to the next stage
  backward,  ///< a gradient, to the previous stage
};

/// Sends a boundary tensor, the same (n, d) on every rank of this stage's tp group, to the
/// neighbouring stage in `direction` over grid.pp() with `tag`. Every tp rank sends only its
/// 1/tp slice (rows [i n/t, (i+1) n/t) for tp rank i) to its partner with the same tp index, so
/// the stage sends each tensor once. Requires tokens divisible by tp.
///
/// TODO 17 of 11.7 (step3d.cpp).
void send_boundary(ProcessGrid& grid, Direction direction, std::span<const float> tensor, int tag);

/// The other side of send_boundary: receives this rank's slice from the neighbouring stage in
/// `direction` (the previous stage for Direction::forward) over grid.pp() with `tag`, and
/// rebuilds the whole (n, d) tensor with an all-gather over grid.tp(). Returns it as a
/// Category::activations buffer of `elements` elements.
///
/// TODO 18 of 11.7 (step3d.cpp).
Buffer<float> receive_boundary(Rank& rank, ProcessGrid& grid, Direction direction,
                               std::size_t elements, int tag);

/// ZeRO-1 over grid.dp(): reduce-scatters the share's gradients so that this rank holds the
/// sum over the replicas of its shard (written back into state.grads at its shard), steps Adam
/// on that shard of state.params only, and all-gathers the updated shards so that every replica
/// holds the same new parameters.
///
/// TODO 19 of 11.7 (step3d.cpp).
void zero1_update(Rank& rank, ProcessGrid& grid, State3d& state);

/// One training step of the layout in `grid`: clears the gradients; dp replica r takes
/// sequences [r B/dp, (r+1) B/dp) of `global` (B sequences) and splits them into
/// `micro_batches` equal micro-batches, which the pipeline runs in one_f_one_b_order; the
/// stage boundaries go through send_boundary/receive_boundary (tag = micro-batch index); the
/// last stage seeds each backward with the loss gradient scaled by 1/(micro_batches * dp), so
/// the gradients summed over micro-batches and replicas are those of the global mean loss; then
/// zero1_update. Every rank of the grid calls it with the same arguments.
/// Returns, on the last stage, the mean loss of this replica's sequences (before the update),
/// and std::nullopt elsewhere.
/// @throws std::invalid_argument when B is not a multiple of dp * micro_batches, or a
///         micro-batch's tokens are not a multiple of tp.
///
/// TODO 20 of 11.7 (step3d.cpp).
std::optional<double> train_step_3d(Rank& rank, ProcessGrid& grid, const model::Model& model,
                                    State3d& state, const model::Batch& global, int micro_batches);

}  // namespace mgpu::layout
