// 11.4 Tensor parallelism, reference solution: column- and row-parallel linear layers, the
// tensor-parallel FFN and attention by heads, each with one all-reduce per pass, and both with
// sequence parallelism (an all-gather and a reduce-scatter in place of each all-reduce).
#include "11_4_tensor_parallel/tensor_parallel.hpp"

#include <string>
#include <utility>

namespace mgpu::tensor_parallel {

namespace {

// Throws std::invalid_argument naming `where` and the matrix unless it is (rows, cols).
void check_shape(const char* where, const char* name, Eigen::Index rows, Eigen::Index cols,
                 Eigen::Index want_rows, Eigen::Index want_cols) {
  if (rows != want_rows || cols != want_cols)
    args::fail(where, name, "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")",
               "has the wrong shape: expected (" + std::to_string(want_rows) + ", " +
                   std::to_string(want_cols) + ")");
}

// Throws std::invalid_argument unless a bias (or its gradient) has `size` 0 (no bias) or `out`.
void check_bias(const char* where, const char* name, Eigen::Index size, Eigen::Index out) {
  if (size != 0 && size != out)
    args::fail(where, name, "of size " + std::to_string(size),
               "does not match the " + std::to_string(out) +
                   " outputs: pass one value per output, or none");
}

}  // namespace

MatrixRM column_shard(MatIn w, int rank, int t) {
  args::check_count("column_shard", "t", t);
  if (rank < 0 || rank >= t)
    args::fail("column_shard", "rank", std::to_string(rank), "is outside [0, t): use a group rank");
  check_divides("column_shard", "t", t, "columns", w.cols(),
                "each rank takes a whole number of columns");
  const Eigen::Index c = w.cols() / t;
  return w.middleCols(rank * c, c);
}

MatrixRM row_shard(MatIn w, int rank, int t) {
  args::check_count("row_shard", "t", t);
  if (rank < 0 || rank >= t)
    args::fail("row_shard", "rank", std::to_string(rank), "is outside [0, t): use a group rank");
  check_divides("row_shard", "t", t, "rows", w.rows(), "each rank takes a whole number of rows");
  const Eigen::Index r = w.rows() / t;
  return w.middleRows(rank * r, r);
}

void column_parallel_forward(MatIn x, MatIn w_shard, MatOut y_shard) {
  check_shape("column_parallel_forward", "w_shard", w_shard.rows(), w_shard.cols(), x.cols(),
              w_shard.cols());
  check_shape("column_parallel_forward", "y_shard", y_shard.rows(), y_shard.cols(), x.rows(),
              w_shard.cols());
  const Eigen::RowVectorXf no_bias;
  model::linear_forward(x, w_shard, no_bias, y_shard);
}

void column_parallel_backward(Comm& tp, MatIn x, MatIn w_shard, MatIn dy_shard, MatOut dx,
                              MatOut dw_shard) {
  const char* where = "column_parallel_backward";
  check_shape(where, "w_shard", w_shard.rows(), w_shard.cols(), x.cols(), w_shard.cols());
  check_shape(where, "dy_shard", dy_shard.rows(), dy_shard.cols(), x.rows(), w_shard.cols());
  check_shape(where, "dx", dx.rows(), dx.cols(), x.rows(), x.cols());
  check_shape(where, "dw_shard", dw_shard.rows(), dw_shard.cols(), w_shard.rows(), w_shard.cols());
  Eigen::RowVectorXf no_db;
  model::linear_backward(x, w_shard, dy_shard, dx, dw_shard, no_db);
  // Each rank's dx covers only its output columns: the whole gradient is the sum over the group.
  tp.all_reduce(contiguous(dx, where), ReduceOp::sum);
}

void row_parallel_forward(Comm& tp, MatIn x_shard, MatIn w_shard, model::VecIn bias, MatOut y) {
  const char* where = "row_parallel_forward";
  check_shape(where, "w_shard", w_shard.rows(), w_shard.cols(), x_shard.cols(), w_shard.cols());
  check_shape(where, "y", y.rows(), y.cols(), x_shard.rows(), w_shard.cols());
  check_bias(where, "bias", bias.size(), w_shard.cols());
  const Eigen::RowVectorXf no_bias;
  model::linear_forward(x_shard, w_shard, no_bias, y);
  // x_shard W_shard sums over this rank's rows of W only: add the group's partial outputs.
  tp.all_reduce(contiguous(y, where), ReduceOp::sum);
  // Every rank holds the whole bias: added once to the sum, not t times through it.
  if (bias.size() != 0) y.rowwise() += bias;
}

void row_parallel_backward(MatIn x_shard, MatIn w_shard, MatIn dy, MatOut dx_shard, MatOut dw_shard,
                           model::VecOut db) {
  const char* where = "row_parallel_backward";
  check_shape(where, "w_shard", w_shard.rows(), w_shard.cols(), x_shard.cols(), w_shard.cols());
  check_shape(where, "dy", dy.rows(), dy.cols(), x_shard.rows(), w_shard.cols());
  check_shape(where, "dx_shard", dx_shard.rows(), dx_shard.cols(), x_shard.rows(), x_shard.cols());
  check_shape(where, "dw_shard", dw_shard.rows(), dw_shard.cols(), w_shard.rows(), w_shard.cols());
  check_bias(where, "db", db.size(), w_shard.cols());
  // dy is whole on every rank, so db (its column sums) is the whole bias gradient everywhere.
  model::linear_backward(x_shard, w_shard, dy, dx_shard, dw_shard, db);
}

TpFfn make_tp_ffn(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t ffn_hidden,
                  std::uint64_t seed) {
  args::check_count("make_tp_ffn", "hidden", hidden);
  args::check_count("make_tp_ffn", "ffn_hidden", ffn_hidden);
  const int t = tp.size();
  check_divides("make_tp_ffn", "t", t, "ffn_hidden", ffn_hidden,
                "each rank needs a whole number of columns of W1");
  const FullFfn full = full_ffn_weights(hidden, ffn_hidden, seed);
  const std::int64_t f = ffn_hidden / t;
  const auto count = static_cast<std::size_t>(hidden * f);
  TpFfn ffn;
  ffn.hidden = hidden;
  ffn.ffn_hidden = ffn_hidden;
  ffn.t = t;
  ffn.w1 = Buffer<float>(rank.memory(), Category::weights, count, "tp_ffn.w1");
  ffn.w2 = Buffer<float>(rank.memory(), Category::weights, count, "tp_ffn.w2");
  ffn.dw1 = Buffer<float>(rank.memory(), Category::grads, count, "tp_ffn.dw1");
  ffn.dw2 = Buffer<float>(rank.memory(), Category::grads, count, "tp_ffn.dw2");
  const auto h = static_cast<std::size_t>(hidden);
  const auto fs = static_cast<std::size_t>(f);
  as_matrix(ffn.w1, h, fs) = column_shard(full.w1, tp.rank(), t);
  as_matrix(ffn.w2, fs, h) = row_shard(full.w2, tp.rank(), t);
  return ffn;
}

TpFfnCache tp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x, MatOut y) {
  const char* where = "tp_ffn_forward";
  check_shape(where, "x", x.rows(), x.cols(), x.rows(), ffn.hidden);
  check_shape(where, "y", y.rows(), y.cols(), x.rows(), ffn.hidden);
  const auto n = static_cast<std::size_t>(x.rows());
  const auto h = static_cast<std::size_t>(ffn.hidden);
  const auto f = static_cast<std::size_t>(ffn.ffn_hidden / ffn.t);
  TpFfnCache cache;
  cache.tokens = x.rows();
  cache.h = Buffer<float>(rank.memory(), Category::activations, n * f, "tp_ffn.h");
  cache.a = Buffer<float>(rank.memory(), Category::activations, n * f, "tp_ffn.a");
  const auto w1 = as_matrix(ffn.w1, h, f);
  const auto w2 = as_matrix(ffn.w2, f, h);
  auto hm = as_matrix(cache.h, n, f);
  auto am = as_matrix(cache.a, n, f);
  column_parallel_forward(x, w1, hm);
  model::gelu_forward(hm, am);
  rank.compute(model::ffn_flops(x.rows(), ffn.hidden, ffn.ffn_hidden / ffn.t), where);
  row_parallel_forward(tp, am, w2, Eigen::RowVectorXf(), y);
  return cache;
}

void tp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, MatIn x, const TpFfnCache& cache, MatIn dy,
                     MatOut dx) {
  const char* where = "tp_ffn_backward";
  check_shape(where, "x", x.rows(), x.cols(), cache.tokens, ffn.hidden);
  check_shape(where, "dy", dy.rows(), dy.cols(), cache.tokens, ffn.hidden);
  check_shape(where, "dx", dx.rows(), dx.cols(), cache.tokens, ffn.hidden);
  const auto n = static_cast<std::size_t>(cache.tokens);
  const auto h = static_cast<std::size_t>(ffn.hidden);
  const auto f = static_cast<std::size_t>(ffn.ffn_hidden / ffn.t);
  Buffer<float> da(rank.memory(), Category::activations, n * f, "tp_ffn.da");
  Buffer<float> dh(rank.memory(), Category::activations, n * f, "tp_ffn.dh");
  auto dam = as_matrix(da, n, f);
  auto dhm = as_matrix(dh, n, f);
  auto dw1 = as_matrix(ffn.dw1, h, f);
  auto dw2 = as_matrix(ffn.dw2, f, h);
  Eigen::RowVectorXf no_db2;
  row_parallel_backward(as_matrix(cache.a, n, f), as_matrix(ffn.w2, f, h), dy, dam, dw2, no_db2);
  model::gelu_backward(as_matrix(cache.h, n, f), dam, dhm);
  rank.compute(2 * model::ffn_flops(cache.tokens, ffn.hidden, ffn.ffn_hidden / ffn.t), where);
  column_parallel_backward(tp, x, as_matrix(ffn.w1, h, f), dhm, dx, dw1);
}

TpAttention make_tp_attention(Rank& rank, Comm& tp, std::int64_t hidden, std::int64_t heads,
                              std::uint64_t seed, bool causal) {
  const char* where = "make_tp_attention";
  args::check_count(where, "hidden", hidden);
  args::check_count(where, "heads", heads);
  const int t = tp.size();
  check_divides(where, "heads", heads, "hidden", hidden, "every head needs hidden/heads columns");
  check_divides(where, "t", t, "heads", heads, "each rank takes whole heads");
  const FullAttention full = full_attention_weights(hidden, seed);
  const auto h = static_cast<std::size_t>(hidden);
  const auto c = static_cast<std::size_t>(hidden / t);
  TpAttention attn;
  attn.hidden = hidden;
  attn.heads = heads;
  attn.t = t;
  attn.causal = causal;
  const std::pair<Buffer<float>*, const MatrixRM*> cols[] = {
      {&attn.wq, &full.wq}, {&attn.wk, &full.wk}, {&attn.wv, &full.wv}};
  for (const auto& [buf, w] : cols) {
    *buf = Buffer<float>(rank.memory(), Category::weights, h * c, "tp_attention.w");
    as_matrix(*buf, h, c) = column_shard(*w, tp.rank(), t);
  }
  attn.wo = Buffer<float>(rank.memory(), Category::weights, h * c, "tp_attention.wo");
  as_matrix(attn.wo, c, h) = row_shard(full.wo, tp.rank(), t);
  for (Buffer<float>* g : {&attn.dwq, &attn.dwk, &attn.dwv, &attn.dwo})
    *g = Buffer<float>(rank.memory(), Category::grads, h * c, "tp_attention.dw");
  return attn;
}

TpAttentionCache tp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x,
                                      std::int64_t seq, MatOut y) {
  const char* where = "tp_attention_forward";
  check_shape(where, "x", x.rows(), x.cols(), x.rows(), attn.hidden);
  check_shape(where, "y", y.rows(), y.cols(), x.rows(), attn.hidden);
  args::check_count(where, "seq", seq);
  check_divides(where, "seq", seq, "tokens", x.rows(), "x holds whole sequences");
  const auto n = static_cast<std::size_t>(x.rows());
  const auto h = static_cast<std::size_t>(attn.hidden);
  const auto c = static_cast<std::size_t>(attn.hidden / attn.t);
  const std::int64_t local_heads = attn.heads / attn.t;
  const auto p_rows = static_cast<std::size_t>(x.rows() / seq * local_heads * seq);
  const auto s = static_cast<std::size_t>(seq);
  TpAttentionCache cache;
  cache.tokens = x.rows();
  cache.seq = seq;
  for (Buffer<float>* b : {&cache.q, &cache.k, &cache.v, &cache.o})
    *b = Buffer<float>(rank.memory(), Category::activations, n * c, "tp_attention.cache");
  cache.p = Buffer<float>(rank.memory(), Category::activations, p_rows * s, "tp_attention.p");
  // This rank's heads give a partial y: the sum over W_O's row blocks is split across the group.
  model::attention_forward(x, seq, local_heads, attn.causal, as_matrix(attn.wq, h, c),
                           as_matrix(attn.wk, h, c), as_matrix(attn.wv, h, c),
                           as_matrix(attn.wo, c, h), as_matrix(cache.q, n, c),
                           as_matrix(cache.k, n, c), as_matrix(cache.v, n, c),
                           as_matrix(cache.p, p_rows, s), as_matrix(cache.o, n, c), y);
  rank.compute(model::attention_flops(x.rows(), seq, attn.hidden, attn.hidden / attn.t), where);
  tp.all_reduce(contiguous(y, where), ReduceOp::sum);
  return cache;
}

void tp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, MatIn x,
                           const TpAttentionCache& cache, MatIn dy, MatOut dx) {
  const char* where = "tp_attention_backward";
  check_shape(where, "x", x.rows(), x.cols(), cache.tokens, attn.hidden);
  check_shape(where, "dy", dy.rows(), dy.cols(), cache.tokens, attn.hidden);
  check_shape(where, "dx", dx.rows(), dx.cols(), cache.tokens, attn.hidden);
  const auto n = static_cast<std::size_t>(cache.tokens);
  const auto h = static_cast<std::size_t>(attn.hidden);
  const auto c = static_cast<std::size_t>(attn.hidden / attn.t);
  const std::int64_t local_heads = attn.heads / attn.t;
  const auto s = static_cast<std::size_t>(cache.seq);
  const std::size_t p_rows = cache.p.size() / s;
  model::attention_backward(
      x, cache.seq, local_heads, as_matrix(attn.wq, h, c), as_matrix(attn.wk, h, c),
      as_matrix(attn.wv, h, c), as_matrix(attn.wo, c, h), as_matrix(cache.q, n, c),
      as_matrix(cache.k, n, c), as_matrix(cache.v, n, c), as_matrix(cache.p, p_rows, s),
      as_matrix(cache.o, n, c), dy, dx, as_matrix(attn.dwq, h, c), as_matrix(attn.dwk, h, c),
      as_matrix(attn.dwv, h, c), as_matrix(attn.dwo, c, h));
  rank.compute(
      2 * model::attention_flops(cache.tokens, cache.seq, attn.hidden, attn.hidden / attn.t),
      where);
  // dx sums over every head; this rank saw only its own.
  tp.all_reduce(contiguous(dx, where), ReduceOp::sum);
}

namespace {

// Copies this rank's rows into their slot of the (n, h) buffer `all` and all-gathers the other
// ranks' rows around them, in place: the collectives place rank i's block at rows token_rows(i).
void gather_tokens(Comm& tp, MatIn rows, Buffer<float>& all, Eigen::Index n) {
  const TokenRows mine = token_rows(n, tp.rank(), tp.size());
  const auto h = static_cast<std::size_t>(rows.cols());
  as_matrix(all, static_cast<std::size_t>(n), h).middleRows(mine.first, mine.count) = rows;
  const std::span<const float> slot(all.data() + static_cast<std::size_t>(mine.first) * h,
                                    static_cast<std::size_t>(mine.count) * h);
  tp.all_gather(slot, all);
}

}  // namespace

SpFfnCache sp_ffn_forward(Rank& rank, Comm& tp, const TpFfn& ffn, MatIn x_shard, MatOut y_shard) {
  const char* where = "sp_ffn_forward";
  check_shape(where, "x_shard", x_shard.rows(), x_shard.cols(), x_shard.rows(), ffn.hidden);
  check_shape(where, "y_shard", y_shard.rows(), y_shard.cols(), x_shard.rows(), ffn.hidden);
  const auto m = static_cast<std::size_t>(x_shard.rows());
  const auto n = m * static_cast<std::size_t>(ffn.t);
  const auto h = static_cast<std::size_t>(ffn.hidden);
  const auto f = static_cast<std::size_t>(ffn.ffn_hidden / ffn.t);
  const TokenRows mine = token_rows(static_cast<Eigen::Index>(n), tp.rank(), ffn.t);
  SpFfnCache cache;
  cache.tokens = static_cast<std::int64_t>(n);
  cache.x_shard = Buffer<float>(rank.memory(), Category::activations, m * h, "sp_ffn.x_shard");
  cache.h = Buffer<float>(rank.memory(), Category::activations, n * f, "sp_ffn.h");
  cache.a = Buffer<float>(rank.memory(), Category::activations, n * f, "sp_ffn.a");
  {
    // The column-parallel layer needs every token: gather them, use them, let them go. The
    // backward keeps only this rank's rows and gathers the rest again.
    Buffer<float> x(rank.memory(), Category::comm, n * h, "sp_ffn.x_gathered");
    gather_tokens(tp, x_shard, x, cache.tokens);
    const auto xm = as_matrix(x, n, h);
    column_parallel_forward(xm, as_matrix(ffn.w1, h, f), as_matrix(cache.h, n, f));
    as_matrix(cache.x_shard, m, h) = xm.middleRows(mine.first, mine.count);
  }
  model::gelu_forward(as_matrix(cache.h, n, f), as_matrix(cache.a, n, f));
  rank.compute(model::ffn_flops(cache.tokens, ffn.hidden, ffn.ffn_hidden / ffn.t), where);
  // Partial sums over this rank's f/t inner columns; the reduce-scatter adds them up and leaves
  // each rank only its own tokens, where the all-reduce would have left all of them everywhere.
  Buffer<float> y(rank.memory(), Category::comm, n * h, "sp_ffn.y_partial");
  const Eigen::RowVectorXf no_bias;
  model::linear_forward(as_matrix(cache.a, n, f), as_matrix(ffn.w2, f, h), no_bias,
                        as_matrix(y, n, h));
  tp.reduce_scatter(y, contiguous(y_shard, where), ReduceOp::sum);
  return cache;
}

void sp_ffn_backward(Rank& rank, Comm& tp, TpFfn& ffn, const SpFfnCache& cache, MatIn dy_shard,
                     MatOut dx_shard) {
  const char* where = "sp_ffn_backward";
  const auto n = static_cast<std::size_t>(cache.tokens);
  const auto m = n / static_cast<std::size_t>(ffn.t);
  const auto h = static_cast<std::size_t>(ffn.hidden);
  const auto f = static_cast<std::size_t>(ffn.ffn_hidden / ffn.t);
  check_shape(where, "dy_shard", dy_shard.rows(), dy_shard.cols(), static_cast<Eigen::Index>(m),
              ffn.hidden);
  check_shape(where, "dx_shard", dx_shard.rows(), dx_shard.cols(), static_cast<Eigen::Index>(m),
              ffn.hidden);
  // The row-parallel backward needs dy on every token: the mirror of the forward's reduce-scatter.
  Buffer<float> dy(rank.memory(), Category::comm, n * h, "sp_ffn.dy_gathered");
  gather_tokens(tp, dy_shard, dy, cache.tokens);
  // Only the shard of x was kept: gather it again for dW1 = x^T dh.
  Buffer<float> x(rank.memory(), Category::comm, n * h, "sp_ffn.x_regathered");
  gather_tokens(tp, as_matrix(cache.x_shard, m, h), x, cache.tokens);
  Buffer<float> da(rank.memory(), Category::activations, n * f, "sp_ffn.da");
  Buffer<float> dh(rank.memory(), Category::activations, n * f, "sp_ffn.dh");
  Buffer<float> dx(rank.memory(), Category::comm, n * h, "sp_ffn.dx_partial");
  Eigen::RowVectorXf no_db;
  row_parallel_backward(as_matrix(cache.a, n, f), as_matrix(ffn.w2, f, h), as_matrix(dy, n, h),
                        as_matrix(da, n, f), as_matrix(ffn.dw2, f, h), no_db);
  model::gelu_backward(as_matrix(cache.h, n, f), as_matrix(da, n, f), as_matrix(dh, n, f));
  model::linear_backward(as_matrix(x, n, h), as_matrix(ffn.w1, h, f), as_matrix(dh, n, f),
                         as_matrix(dx, n, h), as_matrix(ffn.dw1, h, f), no_db);
  rank.compute(2 * model::ffn_flops(cache.tokens, ffn.hidden, ffn.ffn_hidden / ffn.t), where);
  // dx sums over this rank's inner columns only: add the group's up and keep this rank's tokens.
  tp.reduce_scatter(dx, contiguous(dx_shard, where), ReduceOp::sum);
}

SpAttentionCache sp_attention_forward(Rank& rank, Comm& tp, const TpAttention& attn, MatIn x_shard,
                                      std::int64_t seq, MatOut y_shard) {
  const char* where = "sp_attention_forward";
  check_shape(where, "x_shard", x_shard.rows(), x_shard.cols(), x_shard.rows(), attn.hidden);
  check_shape(where, "y_shard", y_shard.rows(), y_shard.cols(), x_shard.rows(), attn.hidden);
  args::check_count(where, "seq", seq);
  const auto m = static_cast<std::size_t>(x_shard.rows());
  const auto n = m * static_cast<std::size_t>(attn.t);
  // A shard may end inside a sequence; only the gathered tokens must be whole sequences.
  check_divides(where, "seq", seq, "tokens", static_cast<std::int64_t>(n),
                "the gathered x holds whole sequences");
  const auto h = static_cast<std::size_t>(attn.hidden);
  const auto c = static_cast<std::size_t>(attn.hidden / attn.t);
  const std::int64_t local_heads = attn.heads / attn.t;
  const TokenRows mine = token_rows(static_cast<Eigen::Index>(n), tp.rank(), attn.t);
  SpAttentionCache cache;
  cache.tokens = static_cast<std::int64_t>(n);
  cache.seq = seq;
  const auto s = static_cast<std::size_t>(cache.seq);
  const std::size_t p_rows = n / s * static_cast<std::size_t>(local_heads) * s;
  cache.x_shard =
      Buffer<float>(rank.memory(), Category::activations, m * h, "sp_attention.x_shard");
  for (Buffer<float>* b : {&cache.q, &cache.k, &cache.v, &cache.o})
    *b = Buffer<float>(rank.memory(), Category::activations, n * c, "sp_attention.cache");
  cache.p = Buffer<float>(rank.memory(), Category::activations, p_rows * s, "sp_attention.p");
  Buffer<float> y_part(rank.memory(), Category::comm, n * h, "sp_attention.y_partial");
  {
    // Every head needs every position of its sequences, and the shards split sequences: gather
    // all tokens (back in their original order), use them, keep only this rank's rows.
    Buffer<float> x_all(rank.memory(), Category::comm, n * h, "sp_attention.x_gathered");
    gather_tokens(tp, x_shard, x_all, cache.tokens);
    const auto all = as_matrix(x_all, n, h);
    model::attention_forward(
        all, cache.seq, local_heads, attn.causal, as_matrix(attn.wq, h, c),
        as_matrix(attn.wk, h, c), as_matrix(attn.wv, h, c), as_matrix(attn.wo, c, h),
        as_matrix(cache.q, n, c), as_matrix(cache.k, n, c), as_matrix(cache.v, n, c),
        as_matrix(cache.p, p_rows, s), as_matrix(cache.o, n, c), as_matrix(y_part, n, h));
    as_matrix(cache.x_shard, m, h) = all.middleRows(mine.first, mine.count);
  }
  rank.compute(model::attention_flops(cache.tokens, seq, attn.hidden, attn.hidden / attn.t), where);
  // This rank's heads give a partial y; the reduce-scatter sums the heads and keeps this rank's
  // tokens, where the all-reduce of tp_attention_forward left all of them on every rank.
  tp.reduce_scatter(y_part, contiguous(y_shard, where), ReduceOp::sum);
  return cache;
}

void sp_attention_backward(Rank& rank, Comm& tp, TpAttention& attn, const SpAttentionCache& cache,
                           MatIn dy_shard, MatOut dx_shard) {
  const char* where = "sp_attention_backward";
  const auto n = static_cast<std::size_t>(cache.tokens);
  const auto m = n / static_cast<std::size_t>(attn.t);
  const auto h = static_cast<std::size_t>(attn.hidden);
  const auto c = static_cast<std::size_t>(attn.hidden / attn.t);
  const std::int64_t local_heads = attn.heads / attn.t;
  const auto s = static_cast<std::size_t>(cache.seq);
  const std::size_t p_rows = cache.p.size() / s;
  check_shape(where, "dy_shard", dy_shard.rows(), dy_shard.cols(), static_cast<Eigen::Index>(m),
              attn.hidden);
  check_shape(where, "dx_shard", dx_shard.rows(), dx_shard.cols(), static_cast<Eigen::Index>(m),
              attn.hidden);
  // The heads' backward needs dy on every token: the mirror of the forward's reduce-scatter.
  Buffer<float> dy_all(rank.memory(), Category::comm, n * h, "sp_attention.dy_gathered");
  gather_tokens(tp, dy_shard, dy_all, cache.tokens);
  // Only the shard of x was kept: gather it again for dW_Q, dW_K, dW_V = x^T (dq, dk, dv).
  Buffer<float> x_all(rank.memory(), Category::comm, n * h, "sp_attention.x_regathered");
  gather_tokens(tp, as_matrix(cache.x_shard, m, h), x_all, cache.tokens);
  Buffer<float> dx_part(rank.memory(), Category::comm, n * h, "sp_attention.dx_partial");
  model::attention_backward(
      as_matrix(x_all, n, h), cache.seq, local_heads, as_matrix(attn.wq, h, c),
      as_matrix(attn.wk, h, c), as_matrix(attn.wv, h, c), as_matrix(attn.wo, c, h),
      as_matrix(cache.q, n, c), as_matrix(cache.k, n, c), as_matrix(cache.v, n, c),
      as_matrix(cache.p, p_rows, s), as_matrix(cache.o, n, c), as_matrix(dy_all, n, h),
      as_matrix(dx_part, n, h), as_matrix(attn.dwq, h, c), as_matrix(attn.dwk, h, c),
      as_matrix(attn.dwv, h, c), as_matrix(attn.dwo, c, h));
  rank.compute(
      2 * model::attention_flops(cache.tokens, cache.seq, attn.hidden, attn.hidden / attn.t),
      where);
  // dx sums over every head, and this rank saw only its own: add the group's up and keep this
  // rank's tokens.
  tp.reduce_scatter(dx_part, contiguous(dx_shard, where), ReduceOp::sum);
}

SpLayerNormCache sp_layer_norm_forward(Rank& rank, Comm& tp, const SpLayerNorm& ln, MatIn x_shard,
                                       MatOut y_shard) {
  const char* where = "sp_layer_norm_forward";
  check_shape(where, "x_shard", x_shard.rows(), x_shard.cols(), x_shard.rows(), ln.hidden);
  check_shape(where, "y_shard", y_shard.rows(), y_shard.cols(), x_shard.rows(), ln.hidden);
  const auto m = static_cast<std::size_t>(x_shard.rows());
  const auto h = static_cast<std::size_t>(ln.hidden);
  SpLayerNormCache cache;
  cache.tokens = x_shard.rows() * tp.size();
  cache.xhat = Buffer<float>(rank.memory(), Category::activations, m * h, "sp_layer_norm.xhat");
  cache.rstd = Buffer<float>(rank.memory(), Category::activations, m, "sp_layer_norm.rstd");
  // Each token is normalised by its own statistics: this rank's rows need nobody else's.
  model::layer_norm_forward(x_shard, row_vector(ln.gamma), row_vector(ln.beta), kLayerNormEps,
                            as_matrix(cache.xhat, m, h), row_vector(cache.rstd), y_shard);
  return cache;
}

void sp_layer_norm_backward(Rank& rank, Comm& tp, SpLayerNorm& ln, const SpLayerNormCache& cache,
                            MatIn dy_shard, MatOut dx_shard) {
  const char* where = "sp_layer_norm_backward";
  const auto m = static_cast<std::size_t>(cache.tokens / tp.size());
  const auto h = static_cast<std::size_t>(ln.hidden);
  check_shape(where, "dy_shard", dy_shard.rows(), dy_shard.cols(), static_cast<Eigen::Index>(m),
              ln.hidden);
  check_shape(where, "dx_shard", dx_shard.rows(), dx_shard.cols(), static_cast<Eigen::Index>(m),
              ln.hidden);
  // The gain and bias gradients sum over tokens and this rank has only its own: partial sums,
  // kept apart from ln.dgamma and ln.dbeta so that the all-reduce adds this micro-batch only.
  Buffer<float> partial(rank.memory(), Category::comm, 2 * h, "sp_layer_norm.dgamma_dbeta");
  Eigen::Map<Eigen::RowVectorXf> dgamma(partial.data(), static_cast<Eigen::Index>(h));
  Eigen::Map<Eigen::RowVectorXf> dbeta(partial.data() + h, static_cast<Eigen::Index>(h));
  model::layer_norm_backward(as_matrix(cache.xhat, m, h), row_vector(cache.rstd),
                             row_vector(ln.gamma), dy_shard, dx_shard, dgamma, dbeta);
  tp.all_reduce(partial, ReduceOp::sum);
  row_vector(ln.dgamma) += dgamma;
  row_vector(ln.dbeta) += dbeta;
}

}  // namespace mgpu::tensor_parallel
