// Graded cases of 11.4's running tensor-parallel layers: column- and row-parallel linear, the FFN
// and attention by heads over a fixed grid (t = 1, t dividing the all-reduced length and t not
// dividing it) plus a drawn point; outputs and gradients of every rank, the ledger's weights and
// gradients per rank, every rank's virtual clock where the layer charges compute (the FFN and
// attention: each rank is charged its own 1/t share), and the bytes each rank sends, held between
// a floor and the budget.
#include <algorithm>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"
#include "model_inputs.hpp"
#include "shards.hpp"
#include "untrusted.hpp"

using namespace mgpu::grade;
namespace tp = mgpu::tensor_parallel;
namespace model = mgpu::model;
using tp::MatrixRM;

namespace {

// n tokens, width h, inner width f (a multiple of t), and the group size t.
struct Shape {
  Eigen::Index n, h, f;
  int t;
};

// The grid every linear and FFN case runs: t = 1 (no communication at all), then t = 2, 3, 4
// where the all-reduced (n, h) holds 12, 35 and 12 values, so that a t which does not divide
// the length is always there; then one point drawn from the seed.
std::vector<Shape> grid(Ctx& ctx) {
  std::vector<Shape> g = {{3, 5, 4, 1}, {4, 3, 6, 2}, {5, 7, 9, 3}, {2, 6, 8, 4}};
  // Drawn again when it repeats a fixed point: values are named by their point (label).
  Shape d;
  do {
    const int t = ctx.pick({1, 2, 3, 4});
    const Eigen::Index n = ctx.uniform_int(1, 9), h = ctx.uniform_int(2, 11);
    d = {n, h, t * ctx.uniform_int(1, 6), t};
  } while (std::any_of(g.begin(), g.end(), [&](const Shape& s) {
    return s.n == d.n && s.h == d.h && s.f == d.f && s.t == d.t;
  }));
  g.push_back(d);
  return g;
}

// Prefix naming a grid point in every value it emits, so feedback says where a value went wrong.
std::string label(const Shape& s) {
  return "t" + std::to_string(s.t) + "_n" + std::to_string(s.n) + "_h" + std::to_string(s.h) +
         "_f" + std::to_string(s.f) + ".";
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

// One matrix per rank (a result every rank holds whole), emitted as "<prefix><name>_rank<i>".
void emit_per_rank_matrices(Ctx& ctx, const std::string& name,
                            const std::vector<MatrixRM>& per_rank) {
  for (std::size_t i = 0; i < per_rank.size(); ++i)
    ctx.emit(name + "_rank" + std::to_string(i), per_rank[i], DType::f32);
}

}  // namespace

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

MGPU_CASE_ISOLATED("11_4.column_parallel_linear") {
  MostSent traffic;
  for (const Shape& d : grid(ctx)) {
    const MatrixRM x = matrix(ctx, d.n, d.h), w = matrix(ctx, d.h, d.f), dy = matrix(ctx, d.n, d.f);
    Assembled y{MatrixRM(d.n, d.f), true}, dw{MatrixRM(d.h, d.f), true};
    std::vector<MatrixRM> dx(static_cast<std::size_t>(d.t));
    mgpu::Cluster cluster(d.t);
    cluster.run([&](mgpu::Rank& r) {
      mgpu::Comm g = r.world().split(0, r.id(), "tp");
      const Eigen::Index c = d.f / d.t;
      MatrixRM ys(d.n, c), dxs(d.n, d.h), dws = MatrixRM::Zero(d.h, c);
      const MatrixRM ws =
          w.middleCols(g.rank() * c, c);  // cut here: graded apart from column_shard
      tp::column_parallel_forward(x, ws, ys);
      tp::column_parallel_backward(g, x, ws, dy.middleCols(g.rank() * c, c), dxs, dws);
      publish_matrix(r, "y", ys);  // a rank may be a process of its own: it publishes its results
      publish_matrix(r, "dw", dws);
      publish_matrix(r, "dx", dxs);
    });
    for (int i = 0; i < d.t; ++i) {  // tp rank i is rank i (the split keeps the world's order)
      const Eigen::Index c = d.f / d.t;
      y.put(i, published_matrix(cluster, i, "y", d.n, c));
      dw.put(i, published_matrix(cluster, i, "dw", d.h, c));
      dx[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "dx", d.n, d.h);
    }
    const std::string at = label(d);
    ctx.emit(at + "y", y.m, DType::f32);
    ctx.emit(at + "dw", dw.m, DType::f32);
    emit_per_rank_matrices(ctx, at + "dx", dx);  // whole on every rank: the backward all-reduce
    traffic.add(cluster.reports());
  }
  traffic.measure(ctx);
}

MGPU_CASE_ISOLATED("11_4.row_parallel_linear") {
  MostSent traffic;
  for (const Shape& d : grid(ctx)) {
    const MatrixRM x = matrix(ctx, d.n, d.f), w = matrix(ctx, d.f, d.h), dy = matrix(ctx, d.n, d.h);
    const Eigen::RowVectorXf bias = matrix(ctx, 1, d.h);
    Assembled dx{MatrixRM(d.n, d.f), true}, dw{MatrixRM(d.f, d.h), false};
    std::vector<MatrixRM> y(static_cast<std::size_t>(d.t)), db(y.size());
    mgpu::Cluster cluster(d.t);
    cluster.run([&](mgpu::Rank& r) {
      mgpu::Comm g = r.world().split(0, r.id(), "tp");
      const Eigen::Index c = d.f / d.t;
      const MatrixRM xs = x.middleCols(g.rank() * c, c), ws = w.middleRows(g.rank() * c, c);
      MatrixRM ys(d.n, d.h), dxs(d.n, c), dws = MatrixRM::Zero(c, d.h);
      Eigen::RowVectorXf dbs = Eigen::RowVectorXf::Zero(d.h);
      tp::row_parallel_forward(g, xs, ws, bias, ys);
      tp::row_parallel_backward(xs, ws, dy, dxs, dws, dbs);
      publish_matrix(r, "y", ys);
      publish_matrix(r, "db", dbs);
      publish_matrix(r, "dx", dxs);
      publish_matrix(r, "dw", dws);
    });
    for (int i = 0; i < d.t; ++i) {
      const Eigen::Index c = d.f / d.t;
      y[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "y", d.n, d.h);
      db[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "db", 1, d.h);
      dx.put(i, published_matrix(cluster, i, "dx", d.n, c));
      dw.put(i, published_matrix(cluster, i, "dw", c, d.h));
    }
    const std::string at = label(d);
    emit_per_rank_matrices(ctx, at + "y", y);  // whole on every rank, the bias counted once
    emit_per_rank_matrices(ctx, at + "db", db);
    ctx.emit(at + "dx", dx.m, DType::f32);
    ctx.emit(at + "dw", dw.m, DType::f32);
    traffic.add(cluster.reports());
  }
  traffic.measure(ctx);
}

MGPU_CASE_ISOLATED("11_4.tp_ffn") {
  // Forward and backward of the FFN on every rank of a tp group at every grid point: outputs and
  // input gradients from every rank, the weight-gradient shards assembled, the ledger's weights
  // and gradients per rank, and the bytes each rank sends.
  MostSent traffic;
  for (const Shape& d : grid(ctx)) {
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const MatrixRM x = matrix(ctx, d.n, d.h), dy = matrix(ctx, d.n, d.h);
    MatrixRM dw1(d.h, d.f), dw2(d.f, d.h);
    std::vector<MatrixRM> y(static_cast<std::size_t>(d.t)), dx(y.size());
    mgpu::Cluster cluster(d.t);
    cluster.run([&](mgpu::Rank& r) {
      mgpu::Comm g = r.world().split(0, r.id(), "tp");
      tp::TpFfn ffn = tp::make_tp_ffn(r, g, d.h, d.f, seed);
      MatrixRM ys(d.n, d.h), dxs(d.n, d.h);
      const tp::TpFfnCache cache = tp::tp_ffn_forward(r, g, ffn, x, ys);
      tp::tp_ffn_backward(r, g, ffn, x, cache, dy, dxs);
      publish_matrix(r, "y", ys);
      publish_matrix(r, "dx", dxs);
      publish_ffn_grads(r, ffn, d.h, d.f / d.t);
    });
    for (int i = 0; i < d.t; ++i) {
      y[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "y", d.n, d.h);
      dx[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "dx", d.n, d.h);
      place_ffn_grads(cluster, i, d.h, d.f / d.t, dw1, dw2);
    }
    const std::string at = label(d);
    emit_per_rank_matrices(ctx, at + "y", y);
    emit_per_rank_matrices(ctx, at + "dx", dx);
    ctx.emit(at + "dw1", dw1, DType::f32);
    ctx.emit(at + "dw2", dw2, DType::f32);
    emit_peaks(ctx, at, cluster.reports(), {mgpu::Category::weights, mgpu::Category::grads});
    emit_clocks(ctx, at, cluster.reports());  // each rank charged its own share
    traffic.add(cluster.reports());
  }
  traffic.measure(ctx);
}

MGPU_CASE_ISOLATED("11_4.tp_attention") {
  // Attention split by heads at t = 1, 2, 4 (causal and not) and a drawn point: outputs and input
  // gradients of every rank, the weight-gradient shards assembled (W_O by rows), the ledger's
  // weights and gradients per rank, and the bytes each rank sends.
  struct Point {
    int t;
    std::int64_t heads, h, seq;
    Eigen::Index n;
    bool causal;
  };
  std::vector<Point> points = {
      {1, 2, 4, 3, 6, true}, {2, 2, 6, 2, 4, false}, {4, 4, 8, 3, 3, true}, {2, 4, 8, 5, 5, true}};
  // The name of a point's values; the drawn point is drawn again while its name is taken.
  auto label = [](const Point& d) {
    return "t" + std::to_string(d.t) + "_heads" + std::to_string(d.heads) + "_h" +
           std::to_string(d.h) + "_n" + std::to_string(d.n) + (d.causal ? "_causal." : ".");
  };
  push_drawn(
      points,
      [&] {
        const int t = ctx.pick({1, 2, 4});
        const std::int64_t heads = t * ctx.uniform_int(1, 3), h = heads * ctx.uniform_int(1, 3);
        const std::int64_t seq = ctx.uniform_int(1, 5);
        return Point{t, heads, h, seq, seq * ctx.uniform_int(1, 3), ctx.uniform_int(0, 1) == 1};
      },
      label);
  MostSent traffic;
  for (const Point& d : points) {
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const MatrixRM x = matrix(ctx, d.n, d.h), dy = matrix(ctx, d.n, d.h);
    AttentionGrads grads(d.h);
    std::vector<MatrixRM> y(static_cast<std::size_t>(d.t)), dx(y.size());
    mgpu::Cluster cluster(d.t);
    cluster.run([&](mgpu::Rank& r) {
      mgpu::Comm g = r.world().split(0, r.id(), "tp");
      tp::TpAttention attn = tp::make_tp_attention(r, g, d.h, d.heads, seed, d.causal);
      MatrixRM ys(d.n, d.h), dxs(d.n, d.h);
      const tp::TpAttentionCache cache = tp::tp_attention_forward(r, g, attn, x, d.seq, ys);
      tp::tp_attention_backward(r, g, attn, x, cache, dy, dxs);
      publish_matrix(r, "y", ys);
      publish_matrix(r, "dx", dxs);
      publish_attention_grads(r, attn, d.h, d.h / d.t);
    });
    for (int i = 0; i < d.t; ++i) {
      y[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "y", d.n, d.h);
      dx[static_cast<std::size_t>(i)] = published_matrix(cluster, i, "dx", d.n, d.h);
      grads.place(cluster, i, d.h / d.t);
    }
    const std::string at = label(d);
    emit_per_rank_matrices(ctx, at + "y", y);
    emit_per_rank_matrices(ctx, at + "dx", dx);
    grads.emit(ctx, at);
    emit_peaks(ctx, at, cluster.reports(), {mgpu::Category::weights, mgpu::Category::grads});
    emit_clocks(ctx, at, cluster.reports());  // each rank charged its own share
    traffic.add(cluster.reports());
  }
  traffic.measure(ctx);
}

MGPU_CASE_ISOLATED("11_4.tp_rejects") {
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
    untrusted([&] { tp::column_parallel_forward(x, w, y); });  // outside Cluster::run
  });
  // t + 1 heads of width t: t divides hidden = t (t + 1), so column_shard accepts the cut and
  // only the check that t divides heads rejects it.
  ctx.emit_rejects("rejects_heads_not_divisible", [&] {
    cluster.run([&](mgpu::Rank& r) { tp::make_tp_attention(r, r.world(), t * (t + 1), t + 1, 1); });
  });
  ctx.emit_rejects("rejects_bias_of_wrong_size", [&] {
    cluster.run([&](mgpu::Rank& r) {
      mgpu::Comm g = r.world();
      const MatrixRM xs = MatrixRM::Zero(2, 1), ws = MatrixRM::Zero(1, h);
      const Eigen::RowVectorXf bias = Eigen::RowVectorXf::Zero(h + 1);
      MatrixRM y(2, h);
      tp::row_parallel_forward(g, xs, ws, bias, y);
    });
  });
}
