// The rank code of 11.4's sequence-parallel cases (sequence_parallel.host.cpp holds the cases):
// each rank, given only its own token rows of x and dy, builds its shard of the FFN or attention
// (or its layer norm) from the shared seed, runs the student's forward and backward with a
// checkpoint between the passes, and publishes where its rows go, its rows of y and dx and its
// gradients; the rejects' bodies and call hand the student's code shapes it must refuse.
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "sequence_parallel.inputs.hpp"
#include "shards.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::sp_cases;
namespace tp = mgpu::tensor_parallel;

namespace {

// The rows of the n = t m tokens a rank given an m-row shard holds, as the contract places them.
tp::TokenRows my_rows(const mgpu::Comm& g, const MatrixRM& x_shard) {
  return tp::token_rows(x_shard.rows() * g.size(), g.rank(), g.size());
}

// Inside a rank, after its passes: where its n/t token rows go and its rows of y and dx (a rank
// may be a process of its own, so its results leave it through publish).
void publish_rows(mgpu::Rank& r, const tp::TokenRows& mine, const MatrixRM& ys,
                  const MatrixRM& dxs) {
  publish_value(r, "first", static_cast<double>(mine.first));
  publish_matrix(r, "y", ys);
  publish_matrix(r, "dx", dxs);
}

}  // namespace

MGPU_RANK_BODY("11_4.sp_ffn", SpFfnInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  tp::TpFfn ffn = tp::make_tp_ffn(rank, g, in.hidden, in.ffn_hidden, in.seed);
  const tp::TokenRows mine = my_rows(g, in.x_shard);
  MatrixRM ys(mine.count, in.hidden), dxs(mine.count, in.hidden);
  const tp::SpFfnCache cache = tp::sp_ffn_forward(rank, g, ffn, in.x_shard, ys);
  // Between the passes only the cache is alive: this is what sequence parallelism shrinks.
  rank.checkpoint("saved");
  tp::sp_ffn_backward(rank, g, ffn, cache, in.dy_shard, dxs);
  publish_rows(rank, mine, ys, dxs);
  publish_ffn_grads(rank, ffn, in.hidden, in.ffn_hidden / g.size());
}

MGPU_RANK_BODY("11_4.sp_attention", SpAttentionInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  tp::TpAttention attn = tp::make_tp_attention(rank, g, in.hidden, in.heads, in.seed, in.causal);
  const tp::TokenRows mine = my_rows(g, in.x_shard);
  MatrixRM ys(mine.count, in.hidden), dxs(mine.count, in.hidden);
  const tp::SpAttentionCache cache =
      tp::sp_attention_forward(rank, g, attn, in.x_shard, in.seq, ys);
  // Between the passes only the cache is alive: this is what sequence parallelism shrinks.
  rank.checkpoint("saved");
  tp::sp_attention_backward(rank, g, attn, cache, in.dy_shard, dxs);
  publish_rows(rank, mine, ys, dxs);
  publish_attention_grads(rank, attn, in.hidden, in.hidden / g.size());
}

MGPU_RANK_BODY("11_4.sp_layer_norm", SpLayerNormInput) {
  mgpu::Comm g = rank.world().split(0, rank.id(), "tp");
  tp::SpLayerNorm ln = tp::make_sp_layer_norm(rank, in.hidden, in.seed);
  const tp::TokenRows mine = my_rows(g, in.x_shards.at(0));
  publish_value(rank, "first", static_cast<double>(mine.first));  // where its tokens go
  for (std::size_t mb = 0; mb < in.x_shards.size(); ++mb) {
    MatrixRM ys(mine.count, in.hidden), dxs(mine.count, in.hidden);
    const tp::SpLayerNormCache cache = tp::sp_layer_norm_forward(rank, g, ln, in.x_shards[mb], ys);
    rank.checkpoint("saved");  // the last micro-batch's is the one kept
    tp::sp_layer_norm_backward(rank, g, ln, cache, in.dy_shards.at(mb), dxs);
    publish_matrix(rank, "y" + std::to_string(mb), ys);
    publish_matrix(rank, "dx" + std::to_string(mb), dxs);
  }
  publish_matrix(rank, "dgamma", tp::row_vector(ln.dgamma));
  publish_matrix(rank, "dbeta", tp::row_vector(ln.dbeta));
}

// The rejects: each body (and the call) hands the student's code one shape it must refuse.

MGPU_STUDENT_CALL("11_4.sp_rejects.token_rows", TokenRowsArgs) {
  const tp::TokenRows rows = tp::token_rows(in.n, in.rank, in.t);
  return std::vector<std::int64_t>{rows.first, rows.count};
}

MGPU_RANK_BODY("11_4.sp_rejects.ffn_x_width", FfnSizes) {  // x shard one column too wide
  tp::TpFfn ffn = tp::make_tp_ffn(rank, rank.world(), in.hidden, in.ffn_hidden, 1);
  MatrixRM xs(2, in.hidden + 1), ys(2, in.hidden);
  tp::sp_ffn_forward(rank, rank.world(), ffn, xs, ys);
}

MGPU_RANK_BODY("11_4.sp_rejects.ffn_dy_rows", FfnSizes) {  // dy shard one row too many
  const std::int64_t h = in.hidden;
  tp::TpFfn ffn = tp::make_tp_ffn(rank, rank.world(), h, in.ffn_hidden, 1);
  MatrixRM xs = MatrixRM::Zero(2, h), ys(2, h), dys = MatrixRM::Zero(3, h), dxs(2, h);
  const tp::SpFfnCache cache = tp::sp_ffn_forward(rank, rank.world(), ffn, xs, ys);
  tp::sp_ffn_backward(rank, rank.world(), ffn, cache, dys, dxs);
}

// Shards of 2 tokens, `cols` wide, `seq` tokens per sequence.
MGPU_RANK_BODY("11_4.sp_attention_rejects.forward", AttentionSizes) {
  tp::TpAttention attn = tp::make_tp_attention(rank, rank.world(), in.hidden, in.heads, 1);
  MatrixRM xs = MatrixRM::Zero(2, in.cols), ys(2, in.hidden);
  tp::sp_attention_forward(rank, rank.world(), attn, xs, in.seq, ys);
}

MGPU_RANK_BODY("11_4.sp_attention_rejects.dy_rows", AttentionSizes) {  // dy one row too many
  const std::int64_t h = in.hidden;
  tp::TpAttention attn = tp::make_tp_attention(rank, rank.world(), h, in.heads, 1);
  MatrixRM xs = MatrixRM::Zero(2, h), ys(2, h), dys = MatrixRM::Zero(3, h), dxs(2, h);
  const tp::SpAttentionCache cache =
      tp::sp_attention_forward(rank, rank.world(), attn, xs, in.seq, ys);
  tp::sp_attention_backward(rank, rank.world(), attn, cache, dys, dxs);
}

MGPU_RANK_BODY("11_4.sp_layer_norm.rejects_x_width", std::int64_t) {  // x one column too wide
  const std::int64_t h = in;
  tp::SpLayerNorm ln = tp::make_sp_layer_norm(rank, h, 1);
  MatrixRM xs = MatrixRM::Zero(2, h + 1), ys(2, h);
  tp::sp_layer_norm_forward(rank, rank.world(), ln, xs, ys);
}

MGPU_RANK_BODY("11_4.sp_layer_norm.rejects_dy_rows", std::int64_t) {  // dy one row too many
  const std::int64_t h = in;
  tp::SpLayerNorm ln = tp::make_sp_layer_norm(rank, h, 1);
  MatrixRM xs = MatrixRM::Zero(2, h), ys(2, h), dys = MatrixRM::Zero(3, h), dxs(2, h);
  const tp::SpLayerNormCache cache = tp::sp_layer_norm_forward(rank, rank.world(), ln, xs, ys);
  tp::sp_layer_norm_backward(rank, rank.world(), ln, cache, dys, dxs);
}
