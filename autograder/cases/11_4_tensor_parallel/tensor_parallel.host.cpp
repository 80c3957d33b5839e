// Graded cases of 11.4's running tensor-parallel layers (their ranks run the bodies of
// tensor_parallel.cpp): column- and row-parallel linear, the FFN and attention by heads over a
// fixed grid (t = 1, t dividing the all-reduced length and t not dividing it) plus a drawn point;
// outputs and gradients of every rank, the ledger's weights and gradients per rank, every rank's
// virtual clock where the layer charges compute (the FFN and attention: each rank is charged its
// own 1/t share), and the bytes each rank sends, held between a floor and the budget; and the
// shapes every layer must refuse. This file calls no chapter function: each rank is given only
// its own shards and what its contract makes whole on every rank.
#include <string>
#include <vector>

#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "shards.hpp"
#include "tensor_parallel.inputs.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::tp_cases;

namespace {

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

MGPU_CASE_ISOLATED("11_4.column_parallel_linear") {
  MostSent traffic;
  for (const Shape& d : grid(ctx)) {
    const MatrixRM x = matrix(ctx, d.n, d.h), w = matrix(ctx, d.h, d.f), dy = matrix(ctx, d.n, d.f);
    Assembled y{MatrixRM(d.n, d.f), true}, dw{MatrixRM(d.h, d.f), true};
    std::vector<MatrixRM> dx(static_cast<std::size_t>(d.t));
    const Eigen::Index c = d.f / d.t;
    mgpu::Cluster cluster(d.t);
    // tp rank r is rank r (the split keeps the world's order): its columns of W, cut here (graded
    // apart from column_shard), and of dy; x is whole on every rank.
    run_ranks(cluster, "11_4.column_parallel_linear", [&](int r) {
      return ColumnLinearInput{x, w.middleCols(r * c, c), dy.middleCols(r * c, c)};
    });
    for (int i = 0; i < d.t; ++i) {
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
    const Eigen::Index c = d.f / d.t;
    mgpu::Cluster cluster(d.t);
    // Rank r's columns of x and rows of W; the bias and dy are whole on every rank.
    run_ranks(cluster, "11_4.row_parallel_linear", [&](int r) {
      return RowLinearInput{x.middleCols(r * c, c), w.middleRows(r * c, c), dy, bias};
    });
    for (int i = 0; i < d.t; ++i) {
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
    // Every rank makes its own shard of the weights from the shared seed; x and dy are whole.
    const FfnInput input{d.h, d.f, seed, x, dy};
    run_ranks(cluster, "11_4.tp_ffn", [&](int) { return input; });
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
    // Every rank makes its own heads from the shared seed; x and dy are whole.
    const AttentionInput input{d.h, d.heads, d.seq, seed, d.causal, x, dy};
    run_ranks(cluster, "11_4.tp_attention", [&](int) { return input; });
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
    run_ranks(cluster, "11_4.tp_rejects.make_tp_ffn", [&](int) { return FfnSizes{h, t * 3 + 1}; });
  });
  ctx.emit_rejects("rejects_wrong_x_shape", [&] {
    run_ranks(cluster, "11_4.tp_rejects.ffn_x_shape", [&](int) { return FfnSizes{h, 2 * t}; });
  });
  ctx.emit_rejects("rejects_column_shape", [&] {
    call_student<MatrixRM>("11_4.tp_rejects.column_shape", h);  // outside Cluster::run
  });
  // t + 1 heads of width t: t divides hidden = t (t + 1), so column_shard accepts the cut and
  // only the check that t divides heads rejects it.
  ctx.emit_rejects("rejects_heads_not_divisible", [&] {
    run_ranks(cluster, "11_4.tp_rejects.make_tp_attention", [&](int) {
      return HeadSizes{t * (t + 1), t + 1};
    });
  });
  ctx.emit_rejects("rejects_bias_of_wrong_size", [&] {
    run_ranks(cluster, "11_4.tp_rejects.bias_size", [&](int) { return h; });
  });
}
