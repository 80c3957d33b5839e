// 11.7 Context parallelism on the simulated cluster: ring attention. A context-parallel group of
// c ranks splits every sequence's tokens c ways; each rank keeps the queries, keys and values of
// its own tokens, and the keys and values travel round the ring so that every query meets every
// key it may see. Causal masking on global positions, with a contiguous and a load-balanced
// ("zig-zag") split of the tokens, forward and backward, plus the formulas of its costs.
#pragma once

#include "mgpu/check_args.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

/// Section 11.7: context parallelism (ring attention) over a group `cp` of c ranks.
///
/// This is the attention core only (softmax(Q K^T / sqrt(dh) + causal mask) V, per head, as
/// model::attention_core_forward computes it on whole sequences): the projections around it act
/// on each token by itself and need no communication, so they run on each rank's tokens as they
/// are.
namespace mgpu::context {

using model::MatIn;
using model::MatOut;
using model::MatrixRM;

/// How a sequence of s tokens is divided among the c ranks of the group.
enum class Split {
  /// Rank i holds the i-th of c equal chunks: global positions [i s/c, (i+1) s/c). Needs c | s.
  contiguous,
  /// The sequence in 2c equal chunks of s/(2c); rank i holds chunk i, then chunk 2c-1-i, in that
  /// order. Pairs an early chunk with a late one so that every rank does the same causal work.
  /// Needs 2c | s.
  zigzag,
};

/// The shape every call of this file shares.
struct CpShape {
  std::int64_t seq = 0;             ///< s, tokens per whole sequence (all ranks together)
  std::int64_t heads = 1;           ///< heads; the inner width hd is split into blocks of hd/heads
  Split split = Split::contiguous;  ///< how the tokens are divided
};

/// The global positions (0..s-1) of the s/c tokens rank `rank` of `ranks` holds from each
/// sequence, in the order the rank stores them (ascending within a chunk; for the zig-zag split
/// chunk i's positions come before chunk 2c-1-i's). Over all ranks, every position appears once.
/// Example: s = 8, c = 2, zig-zag: rank 0 holds {0, 1, 6, 7}, rank 1 holds {2, 3, 4, 5}.
///
/// TODO of 11.7 (context_parallel.cpp).
/// @throws std::invalid_argument when seq or ranks is below 1, rank is outside [0, ranks), or
///         ranks (contiguous) or 2 ranks (zig-zag) does not divide seq.
std::vector<std::int64_t> cp_positions(std::int64_t seq, int ranks, int rank, Split split);

/// What ring_attention_forward keeps for the backward pass, all in Category::activations.
/// rows = sequences * s/c tokens of this rank (sequence after sequence, each in cp_positions
/// order); hd = the inner width.
struct RingCache {
  std::int64_t rows = 0;   ///< this rank's tokens
  std::int64_t width = 0;  ///< hd
  Buffer<float> q;         ///< (rows, hd) this rank's queries
  Buffer<float> k;         ///< (rows, hd) this rank's keys
  Buffer<float> v;         ///< (rows, hd) this rank's values
  Buffer<float> out;       ///< (rows, hd) this rank's output
  /// (rows, heads) row-major: log(sum over the keys the query sees of exp(score)) per query and
  /// head, the one number per query that lets the backward rebuild any block's probabilities
  /// exactly, instead of keeping the (s x s) probabilities.
  Buffer<float> lse;
};

/// Given: throws std::invalid_argument, naming `where`, unless the shape is valid for a group
/// of `ranks` (seq and heads at least 1, seq divisible by ranks, or by 2 ranks for the zig-zag
/// split) and `m` has a whole number of sequences' worth of this rank's tokens (rows a multiple
/// of s/c, at least one sequence) and a width divisible by the heads.
inline void check_cp_shape(const char* where, const CpShape& shape, int ranks, MatIn m) {
  args::check_count(where, "seq", shape.seq);
  args::check_count(where, "heads", shape.heads);
  args::check_count(where, "ranks", ranks);
  const std::int64_t pieces = shape.split == Split::zigzag ? 2 * ranks : ranks;
  if (shape.seq % pieces != 0)
    args::fail(where, "seq", std::to_string(shape.seq),
               "is not divisible by " + std::to_string(pieces) +
                   (shape.split == Split::zigzag ? " (2c chunks of the zig-zag split)"
                                                 : " (c chunks of the contiguous split)") +
                   ": pad the sequences or choose another group size");
  const std::int64_t local = shape.seq / ranks;
  if (m.rows() == 0 || m.rows() % local != 0)
    args::fail(where, "rows", std::to_string(m.rows()),
               "is not a positive multiple of the " + std::to_string(local) +
                   " tokens per sequence a rank holds (s/c)");
  if (m.cols() == 0 || m.cols() % shape.heads != 0)
    args::fail(where, "width", std::to_string(m.cols()),
               "is not a positive multiple of heads=" + std::to_string(shape.heads));
}

/// The forward pass of causal attention on this rank's tokens. q, k, v, out (rows, hd) hold
/// this rank's tokens of every sequence (rows = sequences * s/c, sequence after sequence, in
/// cp_positions order). After it returns, out equals the rows of this rank's tokens in
/// model::attention_core_forward(Q, K, V, s, heads, causal = true) on the whole sequences (fp32
/// rounding aside): a query at global position i sees exactly the keys at global positions <= i
/// of its own sequence.
///
/// Communication: only point-to-point over `cp`, round the ring: every rank sends its own keys
/// and values on exactly c - 1 times (2 rows hd floats each time, cp_forward_bytes_per_rank in
/// all) and receives as many; no collective. The visiting keys and values live in Category::comm
/// buffers, freed on return.
/// Compute: the rank's clock is charged with rank.compute for 4 hd FLOPs per (query, key) pair
/// it lets through the mask, per sequence (cp_attention_flops); a pair the mask removes costs
/// nothing, nor does a block entirely in a query's future.
/// Memory: returns the cache, and holds nothing else under Category::activations once it
/// returns (cp_saved_activation_bytes_per_rank).
///
/// TODO of 11.7 (context_parallel.cpp).
/// @throws std::invalid_argument as check_cp_shape, or when k, v or out is not q's shape.
RingCache ring_attention_forward(Rank& rank, Comm& cp, const CpShape& shape, MatIn q, MatIn k,
                                 MatIn v, MatOut out);

/// The backward pass from d_out (rows, hd), the gradient of this rank's output. After it
/// returns, dq, dk, dv (rows, hd) are overwritten with the rows of this rank's tokens of
/// model::attention_core_backward on the whole sequences: dk and dv of a key hold the
/// contributions of every query, on every rank, that sees it.
///
/// Communication: point-to-point over `cp` only: the keys and values go round the ring again
/// (c - 1 sends of 2 rows hd floats), and the gradients of the keys and values, accumulated by
/// every rank their block visits, travel round too and end on the rank that owns them (c - 1
/// sends of 2 rows hd floats): cp_backward_bytes_per_rank in all.
/// Compute: 2.5 times the forward's FLOPs (2.5 cp_attention_flops, 10 hd per pair the mask lets
/// through: the scores recomputed, then dV, dP, dQ and dK), charged with rank.compute.
///
/// TODO of 11.7 (context_parallel.cpp).
/// @throws std::invalid_argument as check_cp_shape, or when d_out, dq, dk or dv is not the
///         cache's shape.
void ring_attention_backward(Rank& rank, Comm& cp, const CpShape& shape, const RingCache& cache,
                             MatIn d_out, MatOut dq, MatOut dk, MatOut dv);

// ------------------------------------------------------------------------------------ formulas
// Sizes in tokens and floats; bytes of fp32 (4 per value). `sequences` is the number of whole
// sequences in the batch, `width` the inner width hd. Each throws std::invalid_argument as
// check_cp_shape would (sizes below 1, seq not divisible).

/// Bytes one rank sends in ring_attention_forward.
///
/// TODO of 11.7 (context_parallel.cpp).
double cp_forward_bytes_per_rank(std::int64_t sequences, std::int64_t seq, std::int64_t width,
                                 int ranks, Split split);

/// Bytes one rank sends in ring_attention_backward.
///
/// TODO of 11.7 (context_parallel.cpp).
double cp_backward_bytes_per_rank(std::int64_t sequences, std::int64_t seq, std::int64_t width,
                                  int ranks, Split split);

/// Bytes one rank holds in its RingCache between the passes; times c, the unsplit layer's.
///
/// TODO of 11.7 (context_parallel.cpp).
double cp_saved_activation_bytes_per_rank(std::int64_t sequences, std::int64_t seq,
                                          std::int64_t width, std::int64_t heads, int ranks,
                                          Split split);

/// Forward FLOPs rank `rank` is charged in ring_attention_forward: 4 width per (query, key)
/// pair of its queries that the causal mask lets through, over all sequences. Contiguous: the
/// last rank does about 2c - 1 times the first's work; zig-zag: every rank the same.
///
/// TODO of 11.7 (context_parallel.cpp).
/// @throws std::invalid_argument also when rank is outside [0, ranks).
double cp_attention_flops(std::int64_t sequences, std::int64_t seq, std::int64_t width, int ranks,
                          int rank, Split split);

}  // namespace mgpu::context
