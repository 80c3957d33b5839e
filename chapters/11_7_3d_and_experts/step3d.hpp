// 11.7 A 3D-parallel training step of the course model: tensor parallelism inside every block,
// pipeline stages run with 1F1B, and data parallelism with ZeRO-1 over the replicas, all on one
// ProcessGrid. The chapter's own small versions of 11.3, 11.4 and 11.5, so that this chapter
// depends on no other chapter's code. Each function's comment is its contract; the tests of
// tests/test_step3d_parts.cpp check each one on its own.
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
  Buffer<float> h;    ///< (n, f/t) this rank's FFN pre-activation, mid W_1 + b_1 on its columns
  Buffer<float> a;    ///< (n, f/t) its GELU
};

/// Forward of block unit `unit` on this rank's slices (`unit_params`: the unit's range of the
/// share's flat buffer, tensors in Model order wq, wk, wv, wo, w1, b1, w2, b2, cut as Cut says)
/// for input x (n, d), the same on every rank of `tp`.
/// Returns y (n, d), Category::activations, equal on every tp rank to what Model::unit_forward
/// gives for the whole block (y = mid + FFN(mid), mid = x + Attention(x)), within fp32 rounding.
/// Moves x into the cache and fills every field of it for tp_block_backward.
/// Meter: over `tp`, the bytes of two all-reduces of an (n, d) fp32 tensor, nothing else
/// (per_gpu_traffic's tensor-parallel term counts two forward and two backward per block).
/// Clock: the rank's share of the block's FLOPs, Model::unit_forward_flops / tp, charged as
/// "fwd <unit name>".
///
/// TODO(11.7 tp_block_forward) (step3d.cpp).
Buffer<float> tp_block_forward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                               std::span<const float> unit_params, Buffer<float> x,
                               std::int64_t tokens, BlockCache3d& cache);

/// Backward of tp_block_forward from dy (n, d), the same on every tp rank. Accumulates (+=)
/// into `unit_grads` the gradients of this rank's slices: each equals the matching slice (as
/// cut_share cuts it) of Model::unit_backward's gradient for the whole block, b_2's whole on
/// every rank. Returns dx (n, d), Category::activations, equal on every tp rank to
/// Model::unit_backward's. Empties the cache (its activations are freed on return).
/// Meter: over `tp`, the bytes of two all-reduces of an (n, d) fp32 tensor, nothing else.
/// Clock: twice the forward's FLOPs, charged as "bwd <unit name>".
/// @throws std::logic_error when the cache is empty (no forward ran with it).
///
/// TODO(11.7 tp_block_backward) (step3d.cpp).
Buffer<float> tp_block_backward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                                std::span<const float> unit_params, std::span<float> unit_grads,
                                BlockCache3d& cache, std::span<const float> dy);

/// Which way a tensor crosses a stage boundary.
enum class Direction {
  forward,   ///< an activation, to the next stage
  backward,  ///< a gradient, to the previous stage
};

/// Sends a boundary tensor, the same on every rank of this stage's tp group, to the
/// neighbouring stage in `direction` (the next stage for Direction::forward) over grid.pp(),
/// labelled `tag`. Every rank of the stage calls it with the same tensor and tag; the matching
/// receive_boundary on the neighbouring stage returns the tensor.
/// Meter: the stage sends the tensor once: each of its tp ranks sends tensor.size() / tp
/// elements over pp, so the stage's pp bytes add up to one copy (per_gpu_traffic's 1/tp).
/// @throws std::invalid_argument when tp does not divide tensor.size().
///
/// TODO(11.7 send_boundary) (step3d.cpp).
void send_boundary(ProcessGrid& grid, Direction direction, std::span<const float> tensor, int tag);

/// The other side of send_boundary: called by every rank of the receiving stage with the same
/// `elements` and `tag`, where `direction` is the direction the tensor travels (Direction::forward:
/// it comes from the previous stage). Returns the whole tensor, the same on every tp rank, as a
/// Category::activations buffer of `elements` elements.
/// Meter: over tp, the bytes of one all-gather that rebuilds the tensor (each rank sends
/// (tp - 1) / tp of it); the meter's pp bytes stay with the sender.
/// @throws std::invalid_argument when tp does not divide `elements`.
///
/// TODO(11.7 receive_boundary) (step3d.cpp).
Buffer<float> receive_boundary(Rank& rank, ProcessGrid& grid, Direction direction,
                               std::size_t elements, int tag);

/// ZeRO-1 over grid.dp(), from state.grads holding this replica's own gradient of the share.
/// After it returns:
/// - state.grads at this rank's shard, [dp_rank * shard, (dp_rank + 1) * shard), holds the sum of
///   that shard's gradient over the dp replicas (the rest of state.grads is unspecified);
/// - state.params, on every replica alike, equal one step of plain model::Adam on the summed
///   gradient, with state.adam's moments (which cover this rank's shard only) advanced once.
/// Meter: over dp, per_gpu_traffic's ZeRO-1 bytes for the padded share (a reduce-scatter and
/// an all-gather of it, no all-reduce). Ledger: no memory stays allocated after it returns.
///
/// TODO(11.7 zero1_update) (step3d.cpp).
void zero1_update(Rank& rank, ProcessGrid& grid, State3d& state);

/// The order in which stage `stage` of `stages` runs `micro_batches` (m) micro-batches under
/// 1F1B: (true, i) is the forward of micro-batch i, (false, i) its backward.
/// Returns 2m entries: the forwards in micro-batch order 0..m-1, the backwards in the same
/// order, each backward after its own forward; the number of micro-batches in flight (forwards
/// run minus backwards run) rises to min(m, stages - stage) and never exceeds it. Run on every
/// stage of a pipeline, the orders fit together without a deadlock.
/// Example: stage 0 of 2 with m = 3 runs F0 F1 B0 F2 B1 B2.
///
/// TODO(11.7 one_f_one_b_order) (step3d.cpp).
std::vector<std::pair<bool, int>> one_f_one_b_order(int stage, int stages, int micro_batches);

/// One training step of the layout in `grid` on `global` (B sequences); every rank of the grid
/// calls it with the same arguments. dp replica r trains on sequences [r B/dp, (r+1) B/dp),
/// cut into `micro_batches` (m) equal micro-batches that its pipeline runs in
/// one_f_one_b_order, crossing stage boundaries with send_boundary and receive_boundary; the
/// step ends with zero1_update.
/// After it returns, every rank's parameters equal one Adam step of one-rank training on
/// `global` (the gradient of the mean loss over all B sequences), cut as the rank holds them,
/// and its ZeRO-1 shard of state.grads holds that gradient.
/// Ledger: at most min(m, pp - stage) micro-batches' activations alive at once on a stage;
/// none after it returns. Meter: per_gpu_traffic's bytes per group (tp, pp, dp), plus one tp
/// all-gather per boundary tensor received.
/// Returns, on the last stage, the mean loss of this replica's sequences (before the update),
/// and std::nullopt elsewhere.
/// @throws std::invalid_argument, before any communication, when B is not a multiple of
///         dp * micro_batches, or a micro-batch's tokens are not a multiple of tp.
///
/// TODO(11.7 train_step_3d) (step3d.cpp).
std::optional<double> train_step_3d(Rank& rank, ProcessGrid& grid, const model::Model& model,
                                    State3d& state, const model::Batch& global, int micro_batches);

}  // namespace mgpu::layout
