// The rank code of 11.4's tensor-parallel cases (tensor_parallel.host.cpp holds the cases): each
// rank builds or is given its shard of the column- and row-parallel linear layers, the FFN or
// attention, runs the student's forward and backward and publishes its outputs and gradient
// shards; the rejects' bodies and call hand the student's layers shapes they must refuse. Also the
// plain case of the shards (column_shard and row_shard), which runs here whole.
#include <string>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "shards.hpp"
#include "tensor_parallel.inputs.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::tp_cases;
namespace tp = mgpu::tensor_parallel;

MGPU_CASE("11_4.shards") {
  // Every rank's column_shard and row_shard of a drawn matrix at every grid point: a block taken
  // from the wrong place, or of the wrong size, is wrong here before any layer uses it.
  for (const Shape& d : grid(ctx)) {
    const MatrixRM w = matrix(ctx, d.h * d.t, d.f);  // t divides both sides
    const std::string at = label(d);
    for (int r = 0; r < d.t; ++r) {
      ctx.emit(at + "column_shard_rank" + std::to_string(r), tp::column_shard(w, r, d.t),
               DType::f32);
      ctx.emit(at + "row_shard_rank" + std::to_string(r), tp::row_shard(w, r, d.t), DType::f32);
    }
  }
  const MatrixRM w = matrix(ctx, 6, 4);
  ctx.emit_rejects("column_shard_rejects_t_not_dividing", [&] { tp::column_shard(w, 0, 3); });
  ctx.emit_rejects("row_shard_rejects_t_not_dividing", [&] { tp::row_shard(w, 0, 4); });
  // The rank just outside both ends of [0, t) for each (every rank inside is emitted above).
  ctx.emit_rejects("column_shard_rejects_rank_outside", [&] { tp::column_shard(w, 2, 2); });
  ctx.emit_rejects("column_shard_rejects_negative_rank", [&] { tp::column_shard(w, -1, 2); });
  ctx.emit_rejects("row_shard_rejects_rank_outside", [&] { tp::row_shard(w, 2, 2); });
  ctx.emit_rejects("row_shard_rejects_negative_rank", [&] { tp::row_shard(w, -1, 2); });
}

MGPU_RANK_BODY("11_4.column_parallel_linear", ColumnLinearInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  const Eigen::Index n = in.x.rows(), h = in.x.cols(), c = in.w_shard.cols();
  MatrixRM ys(n, c), dxs(n, h), dws = MatrixRM::Zero(h, c);
  tp::column_parallel_forward(in.x, in.w_shard, ys);
  tp::column_parallel_backward(g, in.x, in.w_shard, in.dy_shard, dxs, dws);
  publish_matrix(rank, "y", ys);  // a rank may be a process of its own: it publishes its results
  publish_matrix(rank, "dw", dws);
  publish_matrix(rank, "dx", dxs);
}

MGPU_RANK_BODY("11_4.row_parallel_linear", RowLinearInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  const Eigen::Index n = in.x_shard.rows(), c = in.x_shard.cols(), h = in.dy.cols();
  MatrixRM ys(n, h), dxs(n, c), dws = MatrixRM::Zero(c, h);
  Eigen::RowVectorXf dbs = Eigen::RowVectorXf::Zero(h);
  tp::row_parallel_forward(g, in.x_shard, in.w_shard, in.bias, ys);
  tp::row_parallel_backward(in.x_shard, in.w_shard, in.dy, dxs, dws, dbs);
  publish_matrix(rank, "y", ys);
  publish_matrix(rank, "db", dbs);
  publish_matrix(rank, "dx", dxs);
  publish_matrix(rank, "dw", dws);
}

MGPU_RANK_BODY("11_4.tp_ffn", FfnInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  tp::TpFfn ffn = tp::make_tp_ffn(rank, g, in.hidden, in.ffn_hidden, in.seed);
  MatrixRM ys(in.x.rows(), in.hidden), dxs(in.x.rows(), in.hidden);
  const tp::TpFfnCache cache = tp::tp_ffn_forward(rank, g, ffn, in.x, ys);
  tp::tp_ffn_backward(rank, g, ffn, in.x, cache, in.dy, dxs);
  publish_matrix(rank, "y", ys);
  publish_matrix(rank, "dx", dxs);
  publish_ffn_grads(rank, ffn, in.hidden, in.ffn_hidden / g.size());
}

MGPU_RANK_BODY("11_4.tp_attention", AttentionInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  tp::TpAttention attn = tp::make_tp_attention(rank, g, in.hidden, in.heads, in.seed, in.causal);
  MatrixRM ys(in.x.rows(), in.hidden), dxs(in.x.rows(), in.hidden);
  const tp::TpAttentionCache cache = tp::tp_attention_forward(rank, g, attn, in.x, in.seq, ys);
  tp::tp_attention_backward(rank, g, attn, in.x, cache, in.dy, dxs);
  publish_matrix(rank, "y", ys);
  publish_matrix(rank, "dx", dxs);
  publish_attention_grads(rank, attn, in.hidden, in.hidden / g.size());
}

// The rejects: each body hands the student's code one shape it must refuse.

MGPU_RANK_BODY("11_4.tp_rejects.make_tp_ffn", FfnSizes) {
  tp::make_tp_ffn(rank, rank.world(), in.hidden, in.ffn_hidden, 1);
}

MGPU_RANK_BODY("11_4.tp_rejects.ffn_x_shape", FfnSizes) {  // x one column too wide
  tp::TpFfn ffn = tp::make_tp_ffn(rank, rank.world(), in.hidden, in.ffn_hidden, 1);
  MatrixRM x(2, in.hidden + 1), y(2, in.hidden);
  tp::tp_ffn_forward(rank, rank.world(), ffn, x, y);
}

// Outside Cluster::run: w has one row more than x has columns.
MGPU_STUDENT_CALL("11_4.tp_rejects.column_shape", std::int64_t) {
  const std::int64_t h = in;
  MatrixRM x(2, h), w(h + 1, 2), y(2, 2);
  tp::column_parallel_forward(x, w, y);
  return y;
}

MGPU_RANK_BODY("11_4.tp_rejects.make_tp_attention", HeadSizes) {
  tp::make_tp_attention(rank, rank.world(), in.hidden, in.heads, 1);
}

MGPU_RANK_BODY("11_4.tp_rejects.bias_size", std::int64_t) {  // a bias one longer than out
  const std::int64_t h = in;
  mgpu::Comm g = rank.world();
  const MatrixRM xs = MatrixRM::Zero(2, 1), ws = MatrixRM::Zero(1, h);
  const Eigen::RowVectorXf bias = Eigen::RowVectorXf::Zero(h + 1);
  MatrixRM y(2, h);
  tp::row_parallel_forward(g, xs, ws, bias, y);
}
