// 11.7 Expert parallelism on the simulated cluster: a mixture-of-experts layer whose E experts
// live E/n to a rank, with a softmax router choosing top-k experts per token, a capacity per
// expert, and two all_to_all_v exchanges (dispatch, combine) each way, forward and backward.
#pragma once

#include "11_7_3d_and_experts/formulas.hpp"
#include "mgpu/check_args.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/tensor.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

/// Section 11.7: a mixture-of-experts layer spread over an expert-parallel group.
///
/// Each expert is a single linear map y = x W_e with W_e (h, h), not a two-layer FFN: what this
/// chapter teaches is where the tokens go and how gradients find their way back, and one matrix
/// per expert keeps every pass a few lines (11.4 already did the FFN's insides). Swapping in an
/// FFN changes only the two lines that apply an expert.
namespace mgpu::experts {

using model::MatIn;
using model::MatOut;
using model::MatrixRM;

/// Shape and routing rules of the layer.
struct MoeConfig {
  std::int64_t hidden = 0;       ///< h, the width of a token's vector
  std::int64_t experts = 0;      ///< E, experts in the whole layer
  std::int64_t top_k = 1;        ///< k, experts each token is sent to (1 or 2 in practice)
  double capacity_factor = 1.0;  ///< slots per expert relative to a perfectly even share
};

/// Given: the unsplit weights every rank (and every test) draws from one seed.
struct FullMoe {
  MatrixRM router;                ///< (h, E): logits = x router
  std::vector<MatrixRM> experts;  ///< E matrices (h, h), expert e's W_e
};

/// Given: FullMoe with entries normal(0, 1/sqrt(h)) from model::Rng(seed): the router first,
/// then W_0, ..., W_{E-1}, each row-major.
inline FullMoe full_moe_weights(std::int64_t hidden, std::int64_t experts, std::uint64_t seed) {
  args::check_count("full_moe_weights", "hidden", hidden);
  args::check_count("full_moe_weights", "experts", experts);
  model::Rng rng(seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hidden));
  FullMoe f{MatrixRM(hidden, experts), {}};
  rng.fill_normal(std::span<float>(f.router.data(), static_cast<std::size_t>(f.router.size())),
                  scale);
  for (std::int64_t e = 0; e < experts; ++e) {
    MatrixRM w(hidden, hidden);
    rng.fill_normal(std::span<float>(w.data(), static_cast<std::size_t>(w.size())), scale);
    f.experts.push_back(std::move(w));
  }
  return f;
}

/// One rank's share of the layer, in its ledger. Rank r of n hosts the E/n experts
/// r*E/n, ..., (r+1)*E/n - 1 (its "local" experts 0..E/n-1); the router is small and every rank
/// holds all of it.
///
/// | buffer   | shape          | category          |
/// |----------|----------------|-------------------|
/// | router   | (h, E)         | Category::weights |
/// | w        | E/n x (h, h)   | Category::weights |
/// | drouter  | as router      | Category::grads   |
/// | dw       | as w           | Category::grads   |
struct MoeLayer {
  MoeConfig config;                ///< the layer's shape and routing rules
  int ranks = 1;                   ///< n, the expert-parallel group's size
  int rank = 0;                    ///< this rank's place in the group
  std::int64_t local_experts = 0;  ///< E/n
  Buffer<float> router;            ///< row-major (h, E)
  Buffer<float> w;                 ///< local expert i at offset i*h*h, row-major (h, h)
  /// Router gradient from this rank's tokens only (accumulated, +=). The router is replicated,
  /// so in training a data-parallel all-reduce would sum it; here the tests sum it over ranks.
  Buffer<float> drouter;
  Buffer<float> dw;  ///< gradients of the local experts (accumulated, +=)
};

/// Given: this rank's share of the layer whose unsplit weights are full_moe_weights(config.hidden,
/// config.experts, seed), for group rank ep.rank() of ep.size(), gradients zero.
/// @throws std::invalid_argument when a size is below 1, top_k exceeds experts, the capacity
///         factor is not positive, or ep.size() does not divide experts.
inline MoeLayer make_moe_layer(Rank& rank, Comm& ep, const MoeConfig& config, std::uint64_t seed) {
  const char* where = "make_moe_layer";
  args::check_count(where, "hidden", config.hidden);
  args::check_count(where, "top_k", config.top_k);
  args::check_count(where, "experts", config.experts);
  // Checked here rather than with experts_per_rank, so the layer does not wait on that TODO.
  if (config.experts % ep.size() != 0)
    args::fail(where, "experts", std::to_string(config.experts),
               "is not a multiple of the group size " + std::to_string(ep.size()) +
                   ": use a rank count that divides the expert count");
  const std::int64_t local = config.experts / ep.size();
  if (config.top_k > config.experts)
    args::fail(where, "top_k", std::to_string(config.top_k),
               "exceeds the expert count: use k <= E");
  args::check_positive(where, "capacity_factor", config.capacity_factor);
  const FullMoe full = full_moe_weights(config.hidden, config.experts, seed);
  const auto h = static_cast<std::size_t>(config.hidden);
  const auto e = static_cast<std::size_t>(config.experts);
  const auto n_local = static_cast<std::size_t>(local);
  MoeLayer layer{
      config,
      ep.size(),
      ep.rank(),
      local,
      Buffer<float>(rank.memory(), Category::weights, h * e, "moe router"),
      Buffer<float>(rank.memory(), Category::weights, n_local * h * h, "moe experts"),
      Buffer<float>(rank.memory(), Category::grads, h * e, "moe router grad"),
      Buffer<float>(rank.memory(), Category::grads, n_local * h * h, "moe experts grad")};
  as_matrix(layer.router, h, e) = full.router;
  for (std::size_t i = 0; i < n_local; ++i)
    as_matrix(layer.w, h, h, i * h * h) =
        full.experts[static_cast<std::size_t>(ep.rank()) * n_local + i];
  return layer;
}

/// Slots each expert offers the tokens of one rank: ceil(capacity_factor * tokens * top_k /
/// experts), the even share of the tokens' k copies scaled by the factor. Capacity is counted
/// per source rank (as GShard's groups), so each rank decides on its own which copies to drop.
/// Example: 8 tokens, k = 2, 4 experts, factor 1.0 gives 4; factor 1.25 gives 5.
///
/// TODO(11.7 expert_capacity) (moe.cpp).
/// @throws std::invalid_argument when tokens is negative, top_k or experts is below 1, top_k
///         exceeds experts, or capacity_factor is not positive and finite.
std::int64_t expert_capacity(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                             double capacity_factor);

/// What the router decided for one rank's T tokens. Copy c = t*k + j is token t's j-th choice.
struct Routing {
  std::int64_t tokens = 0;   ///< T
  std::int64_t top_k = 1;    ///< k
  std::vector<int> expert;   ///< (T*k) the global expert of copy c; best first within a token
  std::vector<float> gate;   ///< (T*k) its softmax probability, the weight of its output
  std::vector<char> kept;    ///< (T*k) 1 when the copy got a slot, 0 when it was dropped
  std::int64_t dropped = 0;  ///< copies without a slot, the count of zeros in kept
  MatrixRM probs;            ///< (T, E) the softmax of the logits, kept for the backward pass
};

/// The router of one rank's tokens x (T, h): logits = x router (h, E), probabilities = softmax
/// over each row, and each token's k most probable experts, best first (ties to the lower
/// expert). The gate of a copy is its probability over all E experts, not renormalised over the
/// k chosen: as Switch (k = 1) and Megatron-core's router with the softmax before the top-k do;
/// GShard and Mixtral renormalise the k gates to sum to 1 instead.
/// Capacity, with token-order dropping (Megatron-core's "position" drop policy): copies claim
/// slots in the order c = 0, 1, ..., T*k - 1 (token by token, each token's best choice first);
/// a copy whose expert already has expert_capacity(T, k, E, factor) copies is dropped: it is
/// not sent, its output is zero and its gate gets no gradient.
///
/// TODO(11.7 moe_route) (moe.cpp).
/// @throws std::invalid_argument when router is not (h, E) for x's h, or as expert_capacity.
Routing moe_route(MatIn x, MatIn router, std::int64_t top_k, double capacity_factor);

/// The tokens' journey to their experts and back. Copies bound for rank r go in one block,
/// ordered by global expert, then by copy index c: so a receiver reads, from every source, the
/// rows of its local expert 0, then those of local expert 1, and so on.
struct Dispatch {
  std::vector<std::int64_t> order;       ///< the kept copies c in the order they were sent
  std::vector<std::size_t> send_counts;  ///< (n) floats sent to each rank (rows * h)
  std::vector<std::size_t> recv_counts;  ///< (n) floats received from each rank
  /// (n * E/n) rows received from source s for local expert i, at s*(E/n) + i.
  std::vector<std::int64_t> rows_from;
  std::int64_t received_rows = 0;  ///< rows this rank's experts must process
  Buffer<float> received;          ///< (received_rows, h), Category::activations
};

/// Sends every kept copy of x's rows to the rank of its expert, and fills every field of
/// Dispatch on every rank (a receiver learns its recv_counts and rows_from from the senders).
/// Meter: over ep, one Comm::all_to_all of E doubles per rank (the counts per local expert) and
/// one Comm::all_to_all_v carrying exactly the kept copies bound for other ranks.
///
/// TODO(11.7 moe_dispatch) (moe.cpp).
/// @throws std::invalid_argument when x is not (routing.tokens, h).
Dispatch moe_dispatch(Rank& rank, Comm& ep, const MoeLayer& layer, MatIn x, const Routing& routing);

/// Sends the experts' outputs (received_rows, h), in the order the rows arrived, back to the
/// ranks that sent them, and writes into y (T, h) each token's returned copies summed, weighted
/// by their gates; a token whose copies were all dropped gets zeros. Meter: one
/// Comm::all_to_all_v over ep, as many bytes as the dispatch's, each pair's the other way. Returns
/// the returned copies (order.size(), h), in dispatch.order, in Category::activations: the backward
/// pass needs them for the gate gradient.
///
/// TODO(11.7 moe_combine) (moe.cpp).
/// @throws std::invalid_argument when expert_out or y has the wrong shape.
Buffer<float> moe_combine(Rank& rank, Comm& ep, const Dispatch& dispatch, MatIn expert_out,
                          const Routing& routing, MatOut y);

/// What moe_forward keeps for the backward pass.
struct MoeCache {
  Routing routing;         ///< moe_route's choices for this rank's tokens
  Dispatch dispatch;       ///< moe_dispatch's send order, counts and the rows this rank received
  Buffer<float> returned;  ///< moe_combine's result (order.size(), h)
};

/// The layer's forward pass on one rank's tokens x (T, h): y (T, h) overwritten with
///   y_t = sum over token t's kept copies of gate * (x_t W_expert),
/// routing, capacity and drops as moe_route decides them. Meter: exactly two all_to_all_v
/// (and the counts' all_to_all) over ep. Clock: the experts' matmuls on this rank's received
/// rows.
///
/// TODO(11.7 moe_forward) (moe.cpp).
/// @throws std::invalid_argument when x or y is not (T, h).
MoeCache moe_forward(Rank& rank, Comm& ep, const MoeLayer& layer, MatIn x, MatOut y);

/// The backward pass given dy (T, h): dx (T, h) overwritten with the input gradient through both
/// the experts and the router; layer.dw accumulates the local experts' gradients from every
/// rank's tokens; layer.drouter accumulates this rank's tokens' router gradient. Meter: two more
/// all_to_all_v over ep, of the same sizes as the forward's.
///
/// TODO(11.7 moe_backward) (moe.cpp).
/// @throws std::invalid_argument when x, dy or dx is not (T, h).
void moe_backward(Rank& rank, Comm& ep, MoeLayer& layer, MatIn x, const MoeCache& cache, MatIn dy,
                  MatOut dx);

}  // namespace mgpu::experts
