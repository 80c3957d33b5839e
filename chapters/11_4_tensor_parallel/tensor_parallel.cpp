// 11.4 Tensor parallelism: your implementation. Split the linear layers of the FFN and the heads of
// attention over a tensor-parallel group so that each rank multiplies 1/t of every matrix and one
// all-reduce per pass puts the results back together.
#include "11_4_tensor_parallel/tensor_parallel.hpp"

namespace mgpu::tensor_parallel {

void column_parallel_forward(MatIn x, MatIn w_shard, MatOut y_shard) {
  // TODO(11.4 column_parallel_forward): check w_shard.rows() == x.cols() and y_shard is
  //   (x.rows(), w_shard.cols()) (args::fail names the problem); then
  //   model::linear_forward(x, w_shard, Eigen::RowVectorXf(), y_shard) -- no communication.
  throw NotImplemented("11.4 column_parallel_forward");
}

void column_parallel_backward(Comm& tp, MatIn x, MatIn w_shard, MatIn dy_shard, MatOut dx,
                              MatOut dw_shard) {
  // TODO(11.4 column_parallel_backward): check the shapes; model::linear_backward(x, w_shard,
  //   dy_shard, dx, dw_shard, an empty Eigen::RowVectorXf) writes the partial dx and adds to
  //   dw_shard; then tp.all_reduce(contiguous(dx, "column_parallel_backward"), ReduceOp::sum).
  throw NotImplemented("11.4 column_parallel_backward");
}

void row_parallel_forward(Comm& tp, MatIn x_shard, MatIn w_shard, model::VecIn bias, MatOut y) {
  // TODO(11.4 row_parallel_forward): check the shapes (bias of size 0 or y.cols());
  //   y = x_shard w_shard (model::linear_forward with an empty bias), then
  //   tp.all_reduce(contiguous(y, "row_parallel_forward"), ReduceOp::sum), then add the bias to
  //   every row (y.rowwise() += bias). Why after the all-reduce and not before?
  throw NotImplemented("11.4 row_parallel_forward");
}

void row_parallel_backward(MatIn x_shard, MatIn w_shard, MatIn dy, MatOut dx_shard,
                           MatOut dw_shard, model::VecOut db) {
  // TODO(11.4 row_parallel_backward): check the shapes; model::linear_backward(x_shard, w_shard,
  //   dy, dx_shard, dw_shard, db) does all three gradients. Why is no all-reduce needed here?
  throw NotImplemented("11.4 row_parallel_backward");
}

TpFfn make_tp_ffn(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t ffn_hidden,
                  std::uint64_t seed) {
  // TODO(11.4 make_tp_ffn): args::check_count the sizes; check_divides("make_tp_ffn", "t", t,
  //   "ffn_hidden", ffn_hidden, "..."); full = full_ffn_weights(hidden, ffn_hidden, seed).
  //   Buffer<float>(rank.memory(), Category::weights, count, "label") allocates (and zeroes);
  //   as_matrix(buffer, rows, cols) = column_shard(full.w1, tp.rank(), t) copies a shard in.
  //   dw1 and dw2 the same sizes under Category::grads.
  throw NotImplemented("11.4 make_tp_ffn");
}

TpFfnCache tp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x, MatOut y) {
  // TODO(11.4 tp_ffn_forward): f = ffn.ffn_hidden / ffn.t; cache.h and cache.a are (n, f) buffers
  //   in Category::activations. column_parallel_forward(x, as_matrix(ffn.w1, h, f), h view);
  //   model::gelu_forward(h view, a view); rank.compute(model::ffn_flops(n, h, f), ...);
  //   row_parallel_forward(tp, a view, as_matrix(ffn.w2, f, h), Eigen::RowVectorXf(), y).
  throw NotImplemented("11.4 tp_ffn_forward");
}

void tp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, MatIn x, const TpFfnCache& cache, MatIn dy,
                     MatOut dx) {
  // TODO(11.4 tp_ffn_backward): da, dh are (n, f) Category::activations temporaries.
  //   row_parallel_backward(a, w2, dy, da, dw2, an empty Eigen::RowVectorXf);
  //   model::gelu_backward(h, da, dh);
  //   rank.compute(2 * ffn_flops(n, h, f), ...); column_parallel_backward(tp, x, w1, dh, dx, dw1).
  throw NotImplemented("11.4 tp_ffn_backward");
}

TpAttention make_tp_attention(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t heads,
                              std::uint64_t seed, bool causal) {
  // TODO(11.4 make_tp_attention): check the counts; check_divides heads | hidden and t | heads.
  //   full = full_attention_weights(hidden, seed); wq, wk, wv: column_shard (h, h/t); wo:
  //   row_shard (h/t, h), all Category::weights; dwq..dwo the same sizes, Category::grads.
  throw NotImplemented("11.4 make_tp_attention");
}

TpAttentionCache tp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x,
                                      std::int64_t seq, MatOut y) {
  // TODO(11.4 tp_attention_forward): check shapes and that seq divides n; cache q, k, v, o are
  //   (n, h/t) and p is (n/seq * heads/t * seq, seq), all Category::activations.
  //   model::attention_forward(x, seq, heads/t, attn.causal, wq, wk, wv, wo views, q, k, v, p, o,
  //   y) gives this rank's partial y; charge attention_flops(n, seq, h, h/t); all-reduce y.
  throw NotImplemented("11.4 tp_attention_forward");
}

void tp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, MatIn x,
                           const TpAttentionCache& cache, MatIn dy, MatOut dx) {
  // TODO(11.4 tp_attention_backward): model::attention_backward with the same views and the
  //   gradient views dwq..dwo; charge 2 * attention_flops; all-reduce dx.
  throw NotImplemented("11.4 tp_attention_backward");
}

}  // namespace mgpu::tensor_parallel
