// The small transformer-like model every chapter trains: an input projection, L residual blocks
// (attention + FFN), an output head and a loss. Parameters and gradients live in one flat buffer
// per rank with a contiguous range per unit (as FSDP flat parameters), so chapters can shard,
// bucket or gather them by unit. Compute is charged to the rank's clock, saved activations to its
// ledger.
#pragma once

#include "mgpu/memory.hpp"
#include "mgpu/model/optim.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace mgpu {
class Rank;
}

/// The course model: layers (layers.hpp), the model built from them, optimizers (optim.hpp).
namespace mgpu::model {

/// Which loss the head output is trained with.
enum class LossKind {
  mse,            ///< mean squared error against real-valued targets (tokens, d_out)
  cross_entropy,  ///< softmax cross-entropy against one class label per token, d_out classes
};

/// Shape of the model and of its synthetic task.
struct ModelConfig {
  std::int64_t d_in = 8;      ///< input features per token
  std::int64_t d_model = 16;  ///< width of the residual stream
  std::int64_t d_ff = 32;     ///< inner width of each FFN (usually 4 * d_model)
  std::int64_t n_layers = 4;  ///< residual blocks
  std::int64_t n_heads = 2;   ///< attention heads; must divide d_model
  std::int64_t seq_len = 4;   ///< tokens per sequence (attention mixes tokens of one sequence)
  std::int64_t d_out = 4;     ///< outputs per token (classes for cross-entropy)
  bool attention = true;      ///< false: blocks are FFN only
  bool causal = true;         ///< causal attention mask (a token sees itself and earlier tokens)
  LossKind loss = LossKind::mse;  ///< training loss
  /// Throws std::invalid_argument naming the first field out of range.
  void validate() const;
};

/// One weight or bias tensor inside the flat parameter buffer.
struct TensorInfo {
  std::string name;        ///< e.g. "block2.w1"
  int unit = 0;            ///< unit the tensor belongs to
  std::size_t offset = 0;  ///< first element in the flat buffer
  std::int64_t rows = 0;   ///< rows (1 for a bias)
  std::int64_t cols = 0;   ///< columns
  /// rows * cols.
  std::size_t size() const { return static_cast<std::size_t>(rows * cols); }
};

/// A unit of the model: the embedding (0), a block (1..L) or the head (L+1). Its tensors are one
/// contiguous range of the flat buffer; units are stored in forward order.
struct UnitInfo {
  std::string name;            ///< "embed", "block0", ..., "head"
  std::size_t offset = 0;      ///< first element of its parameters in the flat buffer
  std::size_t count = 0;       ///< number of parameters
  std::int64_t in_width = 0;   ///< features per token going in
  std::int64_t out_width = 0;  ///< features per token coming out
};

/// A batch of whole sequences with the targets of the model's loss (plain host data, not a rank's
/// memory).
struct Batch {
  std::int64_t sequences = 0;        ///< number of sequences
  std::int64_t seq_len = 0;          ///< tokens per sequence
  std::int64_t d_in = 0;             ///< input features per token
  std::int64_t d_out = 0;            ///< target width (mse) or classes (cross-entropy)
  std::vector<float> inputs;         ///< (tokens, d_in)
  std::vector<float> targets;        ///< (tokens, d_out) for mse; empty for cross-entropy
  std::vector<std::int32_t> labels;  ///< tokens values for cross-entropy; empty for mse
  /// sequences * seq_len.
  std::int64_t tokens() const { return sequences * seq_len; }
  /// Sequences [first, first + count) as a batch of their own.
  /// @throws std::out_of_range when the range is not inside the batch.
  Batch slice(std::int64_t first, std::int64_t count) const;
};

/// What a block's forward keeps for its backward (the embedding and the head always keep their
/// input).
enum class Save {
  everything,              ///< every activation the backward needs
  without_attention_core,  ///< all but the attention core's p and o, which the caller rebuilds from
                           ///< q, k, v before the backward (selective recomputation, section 11.6)
};

/// Activations one unit saved in its forward pass for its backward pass, ledger-tracked under
/// Category::activations. unit_backward empties it, which is when the ledger sees them freed.
/// The embedding and the head keep x only; a block keeps x and its internals (q to o only with
/// attention; p and o stay empty when it ran with Save::without_attention_core).
///
/// A backward split in two (zero-bubble pipelines) passes through three states:
///   empty            filled = false: constructed, or emptied by unit_backward or
///                    unit_backward_weight;
///   forward saved    filled, !weight_pending: after unit_forward with this cache;
///   weight pending   filled, weight_pending: after unit_backward_input, which freed what only the
///                    input gradient needed and added the output gradients of the unit's linear
///                    layers (dy to dv below), which unit_backward_weight needs with the saved
///                    inputs (x, o, mid, a).
struct UnitCache {
  std::int64_t tokens = 0;      ///< rows of the saved tensors
  bool filled = false;          ///< set by unit_forward, cleared by unit_backward(_weight)
  bool weight_pending = false;  ///< set by unit_backward_input, cleared by unit_backward_weight
  Buffer<float> x;              ///< (tokens, in_width) the unit's input
  Buffer<float> q;              ///< (tokens, d_model) queries x Wq
  Buffer<float> k;              ///< (tokens, d_model) keys x Wk
  Buffer<float> v;              ///< (tokens, d_model) values x Wv
  Buffer<float> p;  ///< (tokens * n_heads, seq_len) probabilities, (seq, seq) per sequence and head
  Buffer<float> o;  ///< (tokens, d_model) the weighted sums P V, the output projection's input
  Buffer<float> mid;  ///< (tokens, d_model) residual stream after attention: the FFN's input
  Buffer<float> h;    ///< (tokens, d_ff) FFN pre-activation x W1 + b1
  Buffer<float> a;    ///< (tokens, d_ff) GELU(h)
  // Output gradients kept by unit_backward_input for unit_backward_weight (empty otherwise).
  Buffer<float> dy;  ///< (tokens, out_width) the unit's output gradient (head, embed: the linear's;
                     ///< block: W2's and b2's)
  Buffer<float> dh;  ///< (tokens, d_ff) block: gradient of h, W1's and b1's output gradient
  Buffer<float> dmid;  ///< (tokens, d_model) attention block: gradient of mid, Wo's
  Buffer<float> dq;    ///< (tokens, d_model) attention block: gradient of q, Wq's
  Buffer<float> dk;    ///< (tokens, d_model) attention block: gradient of k, Wk's
  Buffer<float> dv;    ///< (tokens, d_model) attention block: gradient of v, Wv's
  /// Bytes held.
  std::size_t bytes() const;
  /// Frees every saved buffer and returns to the empty state.
  void clear();
};

/// The flat parameters and gradients of one model copy on one rank.
struct Replica {
  Buffer<float> params;  ///< Category::weights, layout of Model::tensors()
  Buffer<float> grads;   ///< Category::grads, same layout, zero after construction
};

/// Called after a unit's gradients are final in a backward pass, with the unit index
/// (units finish in reverse order: L+1, L, ..., 0).
using GradsReadyHook = std::function<void(int unit)>;

/// The model: layout, initialisation, synthetic data, forward and backward. Holds no parameters
/// itself (they are passed in as flat spans), so one Model serves every rank and every shard.
class Model {
 public:
  /// Lays out the parameters of `config` (validated).
  explicit Model(const ModelConfig& config);

  /// The configuration.
  const ModelConfig& config() const { return config_; }
  /// Total number of parameters (the length of the flat buffer).
  std::size_t num_params() const { return num_params_; }
  /// Number of units: n_layers + 2.
  int num_units() const { return static_cast<int>(units_.size()); }
  /// Units in forward order.
  const std::vector<UnitInfo>& units() const { return units_; }
  /// Every tensor in the order it is stored.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  /// The part of a flat buffer that belongs to unit `u`.
  template <class T>
  std::span<T> unit_view(std::span<T> flat, int u) const {
    const UnitInfo& info = unit(u);
    return flat.subspan(info.offset, info.count);
  }
  /// Unit `u`; throws std::out_of_range for a bad index.
  const UnitInfo& unit(int u) const;

  /// Fills `params` deterministically from `seed`: weights ~ N(0, 1/fan_in) (residual outputs
  /// scaled down by sqrt(2 L)), biases 0. Same seed, same bits, on every platform.
  void init_params(std::span<float> params, std::uint64_t seed) const;
  /// A freshly initialised replica allocated in `ledger`.
  Replica make_replica(MemoryLedger& ledger, std::uint64_t seed) const;
  /// A synthetic batch of `sequences` sequences drawn from `seed`: normal inputs and targets
  /// given by a fixed random teacher that mixes each token with the ones before it.
  Batch make_batch(std::int64_t sequences, std::uint64_t seed) const;

  /// FLOPs of unit `u`'s forward on `tokens` tokens (matmuls only); backward is charged twice this.
  double unit_forward_flops(int u, std::int64_t tokens) const;
  /// FLOPs of unit_backward_input: every linear layer's input gradient dX = dY W^T (2*n*in*out
  /// each, as its forward) plus, in an attention block, the whole core backward (dV = P^T dO,
  /// dP = dO V^T, dQ = dS K, dK = dS^T Q: 2 * attention_core_flops), which has no weights.
  /// The embedding's dX is counted too, as unit_backward computes and charges it.
  double unit_backward_input_flops(int u, std::int64_t tokens) const;
  /// FLOPs of unit_backward_weight: every linear layer's weight gradient dW = X^T dY (2*n*in*out
  /// each); bias sums are not counted (matmuls only). For every unit,
  /// unit_backward_input_flops + unit_backward_weight_flops == 2 * unit_forward_flops, the charge
  /// of unit_backward: the linear layers cost their forward once in each half and the core
  /// twice its forward in the input half.
  double unit_backward_weight_flops(int u, std::int64_t tokens) const;
  /// FLOPs of a forward pass over `tokens` tokens (sum over units).
  double forward_flops(std::int64_t tokens) const;

  /// Forward of unit `u`: x (tokens, in_width) -> returned (tokens, out_width), allocated in the
  /// rank's ledger as activations. With a cache, x and the internals backward needs are moved
  /// into it (for an attention block with Save::without_attention_core, all but p and o, which
  /// are freed on return); without (inference, or a checkpointed pass), x is freed on return.
  /// Charges unit_forward_flops to the rank's clock as "fwd <unit name>".
  /// @throws std::logic_error when the cache's weight half is still pending (its gradients would
  ///         be lost).
  Buffer<float> unit_forward(Rank& rank, int u, std::span<const float> unit_params, Buffer<float> x,
                             std::int64_t tokens, UnitCache* cache,
                             Save save = Save::everything) const;
  /// Backward of unit `u` from dy (tokens, out_width): accumulates (+=) into unit_grads, returns
  /// dx (tokens, in_width) and empties the cache. Charges twice the forward FLOPs as "bwd <unit
  /// name>".
  /// @throws std::logic_error when the cache is empty or its weight half is pending, or when an
  ///         attention block's p or o is missing (saved without the core and not rebuilt).
  Buffer<float> unit_backward(Rank& rank, int u, std::span<const float> unit_params,
                              std::span<float> unit_grads, UnitCache& cache,
                              std::span<const float> dy) const;
  /// The first half of unit_backward, the part the previous unit (or pipeline stage) waits for:
  /// returns dx (tokens, in_width) from dy (tokens, out_width) and computes no weight gradient.
  /// The cache goes from "forward saved" to "weight pending" (UnitCache): it frees q, k, v, p
  /// and h (needed for dx only) and keeps x, o, mid, a; it adds copies or results the weight half
  /// needs, so the caller may free dy on return: dy (tokens, out_width) in every unit, dh
  /// (tokens, d_ff) in a block, dmid, dq, dk, dv (tokens, d_model each) in an attention block.
  /// cache.bytes() between the halves, with n = tokens, d = d_model, f = d_ff, 4 bytes a float:
  ///   embedding, head        4n (in_width + out_width)
  ///   FFN-only block         4n (2d + 2f)   (x, dy; a, dh)
  ///   attention block        4n (8d + 2f)   (x, o, mid, dy, dmid, dq, dk, dv; a, dh)
  /// so activations stay on the ledger until the weight half, not the input half: the memory a
  /// zero-bubble schedule trades for its smaller bubble. Charges unit_backward_input_flops as
  /// "bwd-in <unit name>". dx has unit_backward's bits.
  /// @throws std::logic_error naming the unit when the cache is empty, when its weight half is
  ///         still pending (input half run twice), or when an attention block's p or o is missing
  ///         (saved with Save::without_attention_core and not rebuilt), as unit_backward does.
  Buffer<float> unit_backward_input(Rank& rank, int u, std::span<const float> unit_params,
                                    UnitCache& cache, std::span<const float> dy) const;
  /// The second half of unit_backward: accumulates (+=) the weight and bias gradients of unit `u`
  /// into unit_grads from the cache unit_backward_input left, then empties it (the ledger sees
  /// x, o, mid, a and the kept gradients freed here). Needs no parameters and no other unit's
  /// state, so it may run any time after its input half, in any order among units. Input half
  /// then weight half leave unit_grads with unit_backward's bits; one unit's weight halves of
  /// several micro-batches add in the order they run (float addition), so they match a run of
  /// unit_backward bit for bit when they run in its micro-batch order. Charges
  /// unit_backward_weight_flops as "bwd-w <unit name>".
  /// @throws std::logic_error naming the unit when unit_backward_input has not run on the cache.
  void unit_backward_weight(Rank& rank, int u, std::span<float> unit_grads, UnitCache& cache) const;
  /// The batch's inputs copied into a ledger-tracked activations buffer (tokens, d_in): the `x`
  /// of unit 0, for callers that drive unit_forward themselves (pipeline stages, FSDP,
  /// checkpointing).
  Buffer<float> input(Rank& rank, const Batch& batch) const;
  /// The loss of head output `out` (tokens, d_out) on `batch`, and its gradient written to dout,
  /// times `scale`.
  double loss_backward(std::span<const float> out, const Batch& batch, std::span<float> dout,
                       float scale = 1.0f) const;
  /// The loss of head output `out` on `batch`.
  double loss_value(std::span<const float> out, const Batch& batch) const;

  /// Forward and backward over the whole model on `batch`; returns the mean loss over the batch.
  /// Gradients are ACCUMULATED into `grads` (zero them first for a fresh step), so micro-batches
  /// can add up. `on_grads_ready(u)` runs right after unit u's gradients are final.
  double forward_backward(Rank& rank, std::span<const float> params, std::span<float> grads,
                          const Batch& batch, const GradsReadyHook& on_grads_ready = {}) const;
  /// Forward only (no activations kept): the mean loss on `batch`.
  double evaluate(Rank& rank, std::span<const float> params, const Batch& batch) const;

 private:
  ModelConfig config_;
  std::vector<UnitInfo> units_;
  std::vector<TensorInfo> tensors_;
  std::vector<int> first_tensor_;  // index into tensors_ of each unit's first tensor
  std::size_t num_params_ = 0;
};

/// Adam with its two moments held in a rank's ledger (Category::optimizer).
class Adam {
 public:
  /// State for `count` parameters (a whole replica, or a shard), zero-initialised.
  Adam(MemoryLedger& ledger, std::size_t count, const AdamConfig& config = {});
  /// One step over `params` with `grads` (both `count` long); advances the step counter.
  void step(std::span<float> params, std::span<const float> grads);
  /// Steps taken so far.
  std::int64_t steps() const { return steps_; }
  /// The hyper-parameters.
  const AdamConfig& config() const { return config_; }

 private:
  AdamConfig config_;
  Buffer<float> m_, v_;
  std::int64_t steps_ = 0;
};

/// Fills every element of `data` with zero (e.g. gradients before a step).
void zero(std::span<float> data);

}  // namespace mgpu::model
