// Graded cases of 11.4's running tensor-parallel layers: column- and row-parallel linear, the FFN
// and attention by heads at drawn shapes and group sizes (outputs and gradients from every rank),
// the ledger's weights per rank, and the bytes each rank sends, budgeted against the reference.
#include <algorithm>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace tp = mgpu::tensor_parallel;
namespace model = mgpu::model;
using tp::MatrixRM;

namespace {

// n tokens, width h, inner width f (a multiple of t), and t, drawn from the seed.
struct Drawn {
  Eigen::Index n, h, f;
  int t;
};

Drawn draw(Ctx& ctx) {
  Drawn d{};
  d.t = ctx.pick({1, 2, 3, 4});
  d.n = ctx.uniform_int(1, 9);
  d.h = ctx.uniform_int(2, 11);
  d.f = d.t * ctx.uniform_int(1, 6);
  return d;
}

MatrixRM matrix(Ctx& ctx, Eigen::Index rows, Eigen::Index cols) {
  return ctx.normal_matrix(rows, cols).cast<float>();
}

// The t shards of `full` placed side by side (by_cols) or stacked, rank by rank.
struct Assembled {
  MatrixRM m;
  bool by_cols;
  void put(int rank, const MatrixRM& shard) {
    if (by_cols)
      m.middleCols(rank * shard.cols(), shard.cols()) = shard;
    else
      m.middleRows(rank * shard.rows(), shard.rows()) = shard;
  }
};

}  // namespace

MGPU_CASE("11_4.column_parallel_linear") {
  const Drawn d = draw(ctx);
  const MatrixRM x = matrix(ctx, d.n, d.h), w = matrix(ctx, d.h, d.f), dy = matrix(ctx, d.n, d.f);
  Assembled y{MatrixRM(d.n, d.f), true}, dw{MatrixRM(d.h, d.f), true};
  std::vector<MatrixRM> dx(static_cast<std::size_t>(d.t));
  mgpu::Cluster cluster(d.t);
  cluster.run([&](mgpu::Rank& r) {
    mgpu::Comm g = r.world().split(0, r.id(), "tp");
    const Eigen::Index c = d.f / d.t;
    MatrixRM ys(d.n, c), dxs(d.n, d.h), dws = MatrixRM::Zero(d.h, c);
    const MatrixRM ws = tp::column_shard(w, g.rank(), d.t);
    tp::column_parallel_forward(x, ws, ys);
    tp::column_parallel_backward(g, x, ws, dy.middleCols(g.rank() * c, c), dxs, dws);
    y.put(g.rank(), ys);  // each rank writes its own disjoint block
    dw.put(g.rank(), dws);
    dx[static_cast<std::size_t>(g.rank())] = dxs;
  });
  ctx.emit("t", d.t);
  ctx.emit("y", y.m, Dtype::fp32);
  ctx.emit("dw", dw.m, Dtype::fp32);
  for (std::size_t i = 0; i < dx.size(); ++i)
    ctx.emit("dx_rank" + std::to_string(i), dx[i], Dtype::fp32);
}

MGPU_CASE("11_4.row_parallel_linear") {
  const Drawn d = draw(ctx);
  const MatrixRM x = matrix(ctx, d.n, d.f), w = matrix(ctx, d.f, d.h), dy = matrix(ctx, d.n, d.h);
  Assembled dx{MatrixRM(d.n, d.f), true}, dw{MatrixRM(d.f, d.h), false};
  std::vector<MatrixRM> y(static_cast<std::size_t>(d.t));
  mgpu::Cluster cluster(d.t);
  cluster.run([&](mgpu::Rank& r) {
    mgpu::Comm g = r.world().split(0, r.id(), "tp");
    const Eigen::Index c = d.f / d.t;
    const MatrixRM xs = x.middleCols(g.rank() * c, c), ws = tp::row_shard(w, g.rank(), d.t);
    MatrixRM ys(d.n, d.h), dxs(d.n, c), dws = MatrixRM::Zero(c, d.h);
    tp::row_parallel_forward(g, xs, ws, ys);
    tp::row_parallel_backward(xs, ws, dy, dxs, dws);
    y[static_cast<std::size_t>(g.rank())] = ys;
    dx.put(g.rank(), dxs);
    dw.put(g.rank(), dws);
  });
  ctx.emit("t", d.t);
  for (std::size_t i = 0; i < y.size(); ++i)
    ctx.emit("y_rank" + std::to_string(i), y[i], Dtype::fp32);
  ctx.emit("dx", dx.m, Dtype::fp32);
  ctx.emit("dw", dw.m, Dtype::fp32);
}

MGPU_CASE("11_4.tp_ffn") {
  // Forward and backward of the FFN on every rank of a tp group; outputs from every rank, the
  // gradient shards assembled, the weights and gradients each rank keeps, and the bytes it sends.
  const Drawn d = draw(ctx);
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const MatrixRM x = matrix(ctx, d.n, d.h), dy = matrix(ctx, d.n, d.h);
  Assembled dw1{MatrixRM(d.h, d.f), true}, dw2{MatrixRM(d.f, d.h), false};
  std::vector<MatrixRM> y(static_cast<std::size_t>(d.t)), dx(y.size());
  std::vector<double> sent(y.size());
  mgpu::Cluster cluster(d.t);
  cluster.run([&](mgpu::Rank& r) {
    mgpu::Comm g = r.world().split(0, r.id(), "tp");
    tp::TpFfn ffn = tp::make_tp_ffn(r, g, d.h, d.f, seed);
    const auto i = static_cast<std::size_t>(g.rank());
    MatrixRM ys(d.n, d.h), dxs(d.n, d.h);
    const double before = static_cast<double>(r.traffic().total().bytes_sent);
    const tp::TpFfnCache cache = tp::tp_ffn_forward(r, g, ffn, x, ys);
    tp::tp_ffn_backward(r, g, ffn, x, cache, dy, dxs);
    sent[i] = static_cast<double>(r.traffic().total().bytes_sent) - before;
    const auto hs = static_cast<std::size_t>(d.h), cs = static_cast<std::size_t>(d.f / d.t);
    y[i] = ys;
    dx[i] = dxs;
    dw1.put(g.rank(), mgpu::as_matrix(ffn.dw1, hs, cs));
    dw2.put(g.rank(), mgpu::as_matrix(ffn.dw2, cs, hs));
  });
  std::vector<double> weights, grads;
  for (int r = 0; r < d.t; ++r) {
    weights.push_back(static_cast<double>(cluster.report(r).memory.peak(mgpu::Category::weights)));
    grads.push_back(static_cast<double>(cluster.report(r).memory.peak(mgpu::Category::grads)));
  }
  ctx.emit("t", d.t);
  for (std::size_t i = 0; i < y.size(); ++i) {
    ctx.emit("y_rank" + std::to_string(i), y[i], Dtype::fp32);
    ctx.emit("dx_rank" + std::to_string(i), dx[i], Dtype::fp32);
  }
  ctx.emit("dw1", dw1.m, Dtype::fp32);
  ctx.emit("dw2", dw2.m, Dtype::fp32);
  ctx.emit("weight_bytes_per_rank", weights);
  ctx.emit("grad_bytes_per_rank", grads);
  double most = 0;
  for (double s : sent) most = std::max(most, s);
  ctx.measure("bytes_sent_per_rank", most);
}

MGPU_CASE("11_4.tp_attention") {
  // Attention split by heads: outputs and input gradients of every rank, the weight-gradient
  // shards assembled, the ledger's weights per rank, and the bytes each rank sends.
  const int t = ctx.pick({1, 2, 4});
  const std::int64_t heads = t * ctx.uniform_int(1, 3);
  const std::int64_t h = heads * ctx.uniform_int(1, 3);
  const std::int64_t seq = ctx.uniform_int(1, 5);
  const Eigen::Index n = seq * ctx.uniform_int(1, 3);
  const bool causal = ctx.uniform_int(0, 1) == 1;
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const MatrixRM x = matrix(ctx, n, h), dy = matrix(ctx, n, h);
  Assembled dwq{MatrixRM(h, h), true}, dwk{MatrixRM(h, h), true}, dwv{MatrixRM(h, h), true};
  Assembled dwo{MatrixRM(h, h), false};
  std::vector<MatrixRM> y(static_cast<std::size_t>(t)), dx(y.size());
  std::vector<double> sent(y.size());
  mgpu::Cluster cluster(t);
  cluster.run([&](mgpu::Rank& r) {
    mgpu::Comm g = r.world().split(0, r.id(), "tp");
    tp::TpAttention attn = tp::make_tp_attention(r, g, h, heads, seed, causal);
    const auto i = static_cast<std::size_t>(g.rank());
    MatrixRM ys(n, h), dxs(n, h);
    const double before = static_cast<double>(r.traffic().total().bytes_sent);
    const tp::TpAttentionCache cache = tp::tp_attention_forward(r, g, attn, x, seq, ys);
    tp::tp_attention_backward(r, g, attn, x, cache, dy, dxs);
    sent[i] = static_cast<double>(r.traffic().total().bytes_sent) - before;
    const auto hs = static_cast<std::size_t>(h), cs = static_cast<std::size_t>(h / t);
    y[i] = ys;
    dx[i] = dxs;
    dwq.put(g.rank(), mgpu::as_matrix(attn.dwq, hs, cs));
    dwk.put(g.rank(), mgpu::as_matrix(attn.dwk, hs, cs));
    dwv.put(g.rank(), mgpu::as_matrix(attn.dwv, hs, cs));
    dwo.put(g.rank(), mgpu::as_matrix(attn.dwo, cs, hs));
  });
  std::vector<double> weights;
  for (int r = 0; r < t; ++r)
    weights.push_back(static_cast<double>(cluster.report(r).memory.peak(mgpu::Category::weights)));
  ctx.emit("t", t);
  for (std::size_t i = 0; i < y.size(); ++i) {
    ctx.emit("y_rank" + std::to_string(i), y[i], Dtype::fp32);
    ctx.emit("dx_rank" + std::to_string(i), dx[i], Dtype::fp32);
  }
  ctx.emit("dwq", dwq.m, Dtype::fp32);
  ctx.emit("dwk", dwk.m, Dtype::fp32);
  ctx.emit("dwv", dwv.m, Dtype::fp32);
  ctx.emit("dwo", dwo.m, Dtype::fp32);
  ctx.emit("weight_bytes_per_rank", weights);
  double most = 0;
  for (double s : sent) most = std::max(most, s);
  ctx.measure("bytes_sent_per_rank", most);
}

MGPU_CASE("11_4.tp_rejects") {
  const int t = ctx.pick({2, 3, 4});
  const auto h = static_cast<std::int64_t>(ctx.uniform_int(2, 8));
  mgpu::Cluster cluster(t);
  ctx.emit_rejects("rejects_f_not_divisible", [&] {
    cluster.run([&](mgpu::Rank& r) { tp::make_tp_ffn(r, r.world(), h, t * 3 + 1, 1); });
  });
  ctx.emit_rejects("rejects_wrong_x_shape", [&] {
    cluster.run([&](mgpu::Rank& r) {
      tp::TpFfn ffn = tp::make_tp_ffn(r, r.world(), h, 2 * t, 1);
      MatrixRM x(2, h + 1), y(2, h);
      tp::tp_ffn_forward(r, r.world(), ffn, x, y);
    });
  });
  ctx.emit_rejects("rejects_column_shape", [&] {
    MatrixRM x(2, h), w(h + 1, 2), y(2, 2);
    tp::column_parallel_forward(x, w, y);
  });
  ctx.emit_rejects("rejects_heads_not_divisible", [&] {
    cluster.run([&](mgpu::Rank& r) { tp::make_tp_attention(r, r.world(), 2 * t + 2, t + 1, 1); });
  });
}
