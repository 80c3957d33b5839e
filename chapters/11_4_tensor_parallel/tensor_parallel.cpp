// 11.4 Tensor parallelism: your implementation. Split the linear layers of the FFN and the heads of
// attention over a tensor-parallel group so that each rank multiplies 1/t of every matrix and one
// all-reduce per pass puts the results back together; then split the tokens between the blocks.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_4 <id>` gives hints for it.
#include "11_4_tensor_parallel/tensor_parallel.hpp"

namespace mgpu::tensor_parallel {

MatrixRM column_shard(MatIn w, int rank, int t) {
  // TODO(11.4 column_shard): this rank's block of w's columns, so that the t blocks side by side
  //   in rank order give w back. A bad t or rank throws (args::check_count, args::fail,
  //   check_divides name the argument and the reason). Eigen's middleCols takes a block.
  throw NotImplemented("11.4 column_shard");
}

MatrixRM row_shard(MatIn w, int rank, int t) {
  // TODO(11.4 row_shard): this rank's block of w's rows, so that the t blocks stacked in rank
  //   order give w back; bad arguments throw as in column_shard.
  throw NotImplemented("11.4 row_shard");
}

void column_parallel_forward(MatIn x, MatIn w_shard, MatOut y_shard) {
  // TODO(11.4 column_parallel_forward): y_shard holds this rank's columns of x W, exactly what
  //   the unsplit layer gives in those columns; shapes that do not fit throw (args::fail names
  //   the matrix and both shapes). model::linear_forward does the product.
  throw NotImplemented("11.4 column_parallel_forward");
}

void column_parallel_backward(Comm& tp, MatIn x, MatIn w_shard, MatIn dy_shard, MatOut dx,
                              MatOut dw_shard) {
  // TODO(11.4 column_parallel_backward): on return dx is the unsplit layer's whole input
  //   gradient on every rank, and dw_shard has accumulated (+=) this rank's columns of the
  //   unsplit dW. Decide which of the two needs the other ranks. Calls: model::linear_backward
  //   (an empty Eigen::RowVectorXf for no bias), Comm collectives on contiguous(matrix, where).
  throw NotImplemented("11.4 column_parallel_backward");
}

void row_parallel_forward(Comm& tp, MatIn x_shard, MatIn w_shard, model::VecIn bias, MatOut y) {
  // TODO(11.4 row_parallel_forward): on return y equals the unsplit layer's x W + b on every
  //   rank, with the bias counted exactly once although every rank holds all of it. Shapes, and
  //   a bias of size other than 0 or y.cols(), throw. Calls: model::linear_forward, a Comm
  //   collective on contiguous(y, where).
  throw NotImplemented("11.4 row_parallel_forward");
}

void row_parallel_backward(MatIn x_shard, MatIn w_shard, MatIn dy, MatOut dx_shard, MatOut dw_shard,
                           model::VecOut db) {
  // TODO(11.4 row_parallel_backward): dx_shard is this rank's columns of the unsplit input
  //   gradient, dw_shard and db accumulate this rank's share of theirs (db may have size 0).
  //   The traffic meter must show that this pass sends nothing: say to yourself why that is
  //   right. model::linear_backward computes the gradients.
  throw NotImplemented("11.4 row_parallel_backward");
}

TpFfn make_tp_ffn(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t ffn_hidden,
                  std::uint64_t seed) {
  // TODO(11.4 make_tp_ffn): this rank's TpFfn, the shards that make the unsplit FFN of
  //   full_ffn_weights(hidden, ffn_hidden, seed) work with one all-reduce per pass, and zeroed
  //   gradients; the ledger holds ffn_params_per_rank floats of weights and as many of grads.
  //   Bad sizes throw. Calls: args::check_count, check_divides, full_ffn_weights, column_shard,
  //   row_shard, Buffer<float>(rank.memory(), category, count, label), as_matrix.
  throw NotImplemented("11.4 make_tp_ffn");
}

TpFfnCache tp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x, MatOut y) {
  // TODO(11.4 tp_ffn_forward): y is the unsplit model::ffn_forward's output on every rank after
  //   exactly one all-reduce, and the returned cache (Category::activations) holds what the
  //   backward needs. Charge the local matmuls to the clock with rank.compute and
  //   model::ffn_flops. Build it from your layers above and model::gelu_forward.
  throw NotImplemented("11.4 tp_ffn_forward");
}

void tp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, MatIn x, const TpFfnCache& cache, MatIn dy,
                     MatOut dx) {
  // TODO(11.4 tp_ffn_backward): dx is the unsplit FFN's input gradient on every rank, dw1 and
  //   dw2 accumulate this rank's shards of the unsplit gradients, and exactly one all-reduce is
  //   sent. Temporaries go under Category::activations; charge the clock as the header says.
  //   Calls: your layers' backward functions, model::gelu_backward.
  throw NotImplemented("11.4 tp_ffn_backward");
}

TpAttention make_tp_attention(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t heads,
                              std::uint64_t seed, bool causal) {
  // TODO(11.4 make_tp_attention): this rank's TpAttention holding whole heads' shares of
  //   full_attention_weights(hidden, seed), so that one all-reduce per pass rebuilds the unsplit
  //   attention; attention_params_per_rank floats of weights and of grads in the ledger. Bad
  //   sizes throw. The same given helpers as make_tp_ffn.
  throw NotImplemented("11.4 make_tp_attention");
}

TpAttentionCache tp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x,
                                      std::int64_t seq, MatOut y) {
  // TODO(11.4 tp_attention_forward): y is the unsplit attention's output on every rank after one
  //   all-reduce; the cache (Category::activations) keeps what model::attention_backward needs
  //   (its shapes are in the TpAttentionCache comment). model::attention_forward accepts a subset
  //   of the heads; charge the clock with model::attention_flops. Bad shapes throw.
  throw NotImplemented("11.4 tp_attention_forward");
}

void tp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, MatIn x,
                           const TpAttentionCache& cache, MatIn dy, MatOut dx) {
  // TODO(11.4 tp_attention_backward): dx is the unsplit attention's input gradient on every
  //   rank, dwq..dwo accumulate this rank's shards, one all-reduce in all. Calls:
  //   model::attention_backward, rank.compute.
  throw NotImplemented("11.4 tp_attention_backward");
}

SpFfnCache sp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x_shard, MatOut y_shard) {
  // TODO(11.4 sp_ffn_forward): y_shard is this rank's token_rows of the unsplit FFN's output,
  //   after exactly one all-gather and one reduce-scatter; the cache keeps the x shard (not the
  //   gathered x), h and a under Category::activations, and the (n, h) transients live in
  //   Category::comm only while used. Calls: Comm::all_gather, Comm::reduce_scatter,
  //   column_parallel_forward, model::gelu_forward, model::linear_forward, rank.compute.
  throw NotImplemented("11.4 sp_ffn_forward");
}

void sp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, const SpFfnCache& cache, MatIn dy_shard,
                     MatOut dx_shard) {
  // TODO(11.4 sp_ffn_backward): dx_shard is this rank's token_rows of the unsplit input
  //   gradient and dw1, dw2 accumulate as in tp_ffn_backward, with two all-gathers (dy, and x
  //   again from the cache) and one reduce-scatter, nothing else. Calls: token_rows,
  //   row_parallel_backward, model::gelu_backward, model::linear_backward (an empty
  //   Eigen::RowVectorXf for no bias), rank.compute.
  throw NotImplemented("11.4 sp_ffn_backward");
}

SpAttentionCache sp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x_shard,
                                      std::int64_t seq, MatOut y_shard) {
  // TODO(11.4 sp_attention_forward): y_shard is this rank's token_rows of the unsplit attention's
  //   output, after exactly one all-gather and one reduce-scatter. A shard may begin or end
  //   inside a sequence: why does that not cut any head's attention short, and where must the
  //   heads run for it not to? The cache keeps the x shard (not the gathered x) and this rank's
  //   heads' q, k, v, p, o under Category::activations; the (n, h) transients live in
  //   Category::comm only while used. Calls: Comm::all_gather, Comm::reduce_scatter,
  //   model::attention_forward (heads / t heads, as in tp_attention_forward), rank.compute.
  throw NotImplemented("11.4 sp_attention_forward");
}

void sp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, const SpAttentionCache& cache,
                           MatIn dy_shard, MatOut dx_shard) {
  // TODO(11.4 sp_attention_backward): dx_shard is this rank's token_rows of the unsplit input
  //   gradient and dwq..dwo accumulate as in tp_attention_backward, with two all-gathers (dy, and
  //   x again from the cache) and one reduce-scatter, nothing else. Calls: token_rows,
  //   model::attention_backward, Comm::reduce_scatter, rank.compute.
  throw NotImplemented("11.4 sp_attention_backward");
}

SpLayerNormCache sp_layer_norm_forward(Rank& rank, Comm& tp, const SpLayerNorm& ln, MatIn x_shard,
                                       MatOut y_shard) {
  // TODO(11.4 sp_layer_norm_forward): y_shard is this rank's rows of the unsplit layer norm, with
  //   no communication; the cache (Category::activations) keeps xhat and rstd for this rank's
  //   rows only. Calls: model::layer_norm_forward (kLayerNormEps), row_vector, as_matrix.
  throw NotImplemented("11.4 sp_layer_norm_forward");
}

void sp_layer_norm_backward(Rank& rank, Comm& tp, SpLayerNorm& ln, const SpLayerNormCache& cache,
                            MatIn dy_shard, MatOut dx_shard) {
  // TODO(11.4 sp_layer_norm_backward): dx_shard is this rank's rows of the unsplit input
  //   gradient; dgamma and dbeta gain the gradients over all n tokens, the same on every rank,
  //   after exactly one all-reduce. What must that all-reduce not touch, when the gradients
  //   accumulate over micro-batches? Calls: model::layer_norm_backward, Comm::all_reduce.
  throw NotImplemented("11.4 sp_layer_norm_backward");
}

}  // namespace mgpu::tensor_parallel
