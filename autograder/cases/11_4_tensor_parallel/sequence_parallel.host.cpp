// Graded cases of 11.4's sequence parallelism (their ranks run the bodies of
// sequence_parallel.cpp): the FFN, attention and the layer norm in front of them, each rank
// holding n/t tokens outside the block. Over a fixed grid and a drawn point: outputs and input
// gradients assembled from the token shards, the weight-gradient shards, the activations saved
// between the passes and the ledger's peaks, the collectives by kind, every rank's virtual clock
// (FFN and attention), and the bytes each rank sends, held between a floor and the budget; and the
// shapes each block must refuse. This file calls no chapter function: each rank is given only its
// own token rows of x and dy (token_rows's block [r m, (r + 1) m) of the n = t m tokens), and the
// seed every rank builds its weights from.
#include <algorithm>
#include <string>
#include <vector>

#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "sequence_parallel.inputs.hpp"
#include "shards.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::sp_cases;

namespace {

// m tokens per rank (n = t m), width h, inner width f (a multiple of t), group size t.
struct Point {
  Eigen::Index m, h, f;
  int t;
};

std::string label(const Point& d) {
  return "sp_t" + std::to_string(d.t) + "_m" + std::to_string(d.m) + "_h" + std::to_string(d.h) +
         "_f" + std::to_string(d.f) + ".";
}

// Rank r's m rows of an (n, h) activation: its token_rows, the only rows the contract gives it.
MatrixRM rows_of(const MatrixRM& full, int r, Eigen::Index m) { return full.middleRows(r * m, m); }

// The FFN's and attention's traffic as graded, over all their points: the most any rank sent at
// each point (bytes and ring steps) summed, and every rank's collectives by kind (ring steps).
struct SpTraffic {
  MostSent sent;
  double gathers = 0, scatters = 0, all_reduces = 0;

  void add(const std::vector<mgpu::RankReport>& reports) {
    sent.add(reports);
    for (const mgpu::RankReport& r : reports) {
      gathers += static_cast<double>(r.traffic.of(mgpu::OpKind::all_gather, "tp").messages_sent);
      scatters +=
          static_cast<double>(r.traffic.of(mgpu::OpKind::reduce_scatter, "tp").messages_sent);
      all_reduces +=
          static_cast<double>(r.traffic.of(mgpu::OpKind::all_reduce, "tp").messages_sent);
    }
  }

  void emit(Ctx& ctx) const {
    ctx.emit("all_gather_steps", gathers);
    ctx.emit("reduce_scatter_steps", scatters);
    ctx.emit("all_reduce_steps", all_reduces);
    sent.measure(ctx);
  }
};

// A sequence-parallel run put together after it: y and dx (n, h) from every rank's m rows, and
// the activations each rank held at its "saved" checkpoint, between its passes.
struct Rows {
  MatrixRM y, dx;
  std::vector<double> saved;

  Rows(const mgpu::Cluster& cluster, int t, Eigen::Index m, Eigen::Index h)
      : y(m * t, h), dx(m * t, h), saved(static_cast<std::size_t>(t)) {
    for (int i = 0; i < t; ++i) {  // tp rank i is rank i (the split keeps the world's order)
      const auto first_row = static_cast<Eigen::Index>(published_value(cluster, i, "first"));
      y.middleRows(first_row, m) = published_matrix(cluster, i, "y", m, h);
      dx.middleRows(first_row, m) = published_matrix(cluster, i, "dx", m, h);
      saved[static_cast<std::size_t>(i)] = static_cast<double>(
          cluster.report(i).checkpoints.at("saved").memory.current(mgpu::Category::activations));
    }
  }
};

// Emits a run at `at`: y and dx, then the weight gradients `emit_grads()` emits, then the saved
// activations, the ledger's peaks and every rank's clock; adds its traffic to `traffic`.
template <class EmitGrads>
void emit_run(Ctx& ctx, const std::string& at, const Rows& rows, const mgpu::Cluster& cluster,
              SpTraffic& traffic, EmitGrads emit_grads) {
  ctx.emit(at + "y", rows.y, DType::f32);
  ctx.emit(at + "dx", rows.dx, DType::f32);
  emit_grads();
  ctx.emit_per_rank(at + "saved_activations", rows.saved);
  emit_peaks(ctx, at, cluster.reports(), {mgpu::Category::activations, mgpu::Category::comm});
  emit_clocks(ctx, at, cluster.reports());  // each rank charged its own share
  traffic.add(cluster.reports());
}

}  // namespace

MGPU_CASE_ISOLATED("11_4.sp_ffn") {
  // t = 1 (no communication), then t = 2, 3, 4 with one to three tokens per rank, then a drawn
  // point (drawn again while its name is taken).
  std::vector<Point> points = {{3, 5, 4, 1}, {2, 3, 6, 2}, {1, 7, 9, 3}, {2, 6, 8, 4}};
  push_drawn(
      points,
      [&] {
        const int t = ctx.pick({1, 2, 3, 4});
        return Point{ctx.uniform_int(1, 3), ctx.uniform_int(2, 9), t * ctx.uniform_int(1, 5), t};
      },
      [](const Point& p) { return label(p); });
  SpTraffic traffic;
  for (const Point& d : points) {
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const Eigen::Index n = d.m * d.t;
    const MatrixRM x = ctx.normal_matrix(n, d.h).cast<float>();
    const MatrixRM dy = ctx.normal_matrix(n, d.h).cast<float>();
    MatrixRM dw1(d.h, d.f), dw2(d.f, d.h);
    mgpu::Cluster cluster(d.t);
    // tp rank r is rank r (the split keeps the world's order): its own rows of x and dy only.
    run_ranks(cluster, "11_4.sp_ffn", [&](int r) {
      return SpFfnInput{d.h, d.f, seed, rows_of(x, r, d.m), rows_of(dy, r, d.m)};
    });
    for (int i = 0; i < d.t; ++i) place_ffn_grads(cluster, i, d.h, d.f / d.t, dw1, dw2);
    const std::string at = label(d);
    emit_run(ctx, at, Rows(cluster, d.t, d.m, d.h), cluster, traffic, [&] {
      ctx.emit(at + "dw1", dw1, DType::f32);
      ctx.emit(at + "dw2", dw2, DType::f32);
    });
  }
  traffic.emit(ctx);
}

MGPU_CASE_ISOLATED("11_4.sp_rejects") {
  const int t = ctx.pick({2, 3, 4});
  const auto h = static_cast<std::int64_t>(ctx.uniform_int(2, 8));
  ctx.emit_rejects("rejects_t_not_dividing_tokens", [&] {
    call_student<std::vector<std::int64_t>>("11_4.sp_rejects.token_rows",
                                            TokenRowsArgs{t * 2 + 1, 0, t});
  });
  mgpu::Cluster cluster(t);
  ctx.emit_rejects("rejects_wrong_x_shard_width", [&] {
    run_ranks(cluster, "11_4.sp_rejects.ffn_x_width", [&](int) { return FfnSizes{h, 2 * t}; });
  });
  ctx.emit_rejects("rejects_wrong_dy_shard_rows", [&] {
    run_ranks(cluster, "11_4.sp_rejects.ffn_dy_rows", [&](int) { return FfnSizes{h, 2 * t}; });
  });
}

namespace {

// Group size t, heads and width h of the block, seq tokens per sequence, m tokens per rank
// (n = t m, a multiple of seq; m need not be one, so a shard may end inside a sequence).
struct AttnPoint {
  int t;
  std::int64_t heads, h, seq;
  Eigen::Index m;
  bool causal;
};

std::string label(const AttnPoint& d) {
  return "sp_attn_t" + std::to_string(d.t) + "_heads" + std::to_string(d.heads) + "_h" +
         std::to_string(d.h) + "_seq" + std::to_string(d.seq) + "_m" + std::to_string(d.m) +
         (d.causal ? "_causal." : ".");
}

}  // namespace

MGPU_CASE_ISOLATED("11_4.sp_attention") {
  // t = 1 with two sequences in the one shard; one sequence cut between two ranks; two sequences
  // each spanning two of four ranks; shards of 3 tokens ending inside sequences of 2; t = 3 with a
  // token per rank; then a drawn point (drawn again while its name is taken). Attention within a
  // shard instead of a sequence is wrong at every one of them.
  std::vector<AttnPoint> points = {{1, 2, 4, 3, 6, true},
                                   {2, 2, 6, 6, 3, false},
                                   {4, 4, 8, 4, 2, true},
                                   {2, 4, 8, 2, 3, true},
                                   {3, 3, 6, 3, 1, false}};
  push_drawn(
      points,
      [&] {
        const int t = ctx.pick({1, 2, 3, 4});
        const std::int64_t heads = t * ctx.uniform_int(1, 2), h = heads * ctx.uniform_int(1, 3);
        const Eigen::Index m = ctx.uniform_int(1, 4);
        std::vector<std::int64_t> divisors;  // of the n = t m gathered tokens
        for (std::int64_t s = 1; s <= t * m; ++s)
          if ((t * m) % s == 0) divisors.push_back(s);
        const std::int64_t seq = divisors[static_cast<std::size_t>(
            ctx.uniform_int(0, static_cast<std::int64_t>(divisors.size()) - 1))];
        return AttnPoint{t, heads, h, seq, m, ctx.uniform_int(0, 1) == 1};
      },
      [](const AttnPoint& p) { return label(p); });
  SpTraffic traffic;
  for (const AttnPoint& d : points) {
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const Eigen::Index n = d.m * d.t;
    const MatrixRM x = ctx.normal_matrix(n, d.h).cast<float>();
    const MatrixRM dy = ctx.normal_matrix(n, d.h).cast<float>();
    AttentionGrads grads(d.h);
    mgpu::Cluster cluster(d.t);
    // Its own rows of x and dy only: a sequence may run on into another rank's rows, which the
    // student's code must gather, not find in its input.
    run_ranks(cluster, "11_4.sp_attention", [&](int r) {
      return SpAttentionInput{
          d.h, d.heads, d.seq, seed, d.causal, rows_of(x, r, d.m), rows_of(dy, r, d.m)};
    });
    for (int i = 0; i < d.t; ++i) grads.place(cluster, i, d.h / d.t);
    const std::string at = label(d);
    emit_run(ctx, at, Rows(cluster, d.t, d.m, d.h), cluster, traffic, [&] { grads.emit(ctx, at); });
  }
  traffic.emit(ctx);
}

MGPU_CASE_ISOLATED("11_4.sp_attention_rejects") {
  const int t = ctx.pick({2, 3, 4});
  const std::int64_t h = 2 * t;  // t heads of width 2
  mgpu::Cluster cluster(t);
  // Shards of 2 tokens: 2t tokens once gathered, which a sequence of 2t + 1 cannot fill.
  auto forward = [&](Eigen::Index cols, std::int64_t seq) {
    run_ranks(cluster, "11_4.sp_attention_rejects.forward", [&](int) {
      return AttentionSizes{h, t, cols, seq};
    });
  };
  ctx.emit_rejects("rejects_seq_not_dividing_tokens", [&] { forward(h, 2 * t + 1); });
  ctx.emit_rejects("rejects_seq_of_zero", [&] { forward(h, 0); });
  // A sequence of all 2t tokens spans every shard: that is the point of the layout, not an error.
  ctx.emit_rejects("rejects_sequence_across_shards", [&] { forward(h, 2 * t); });
  ctx.emit_rejects("rejects_wrong_x_shard_width", [&] { forward(h + 1, 2); });
  ctx.emit_rejects("rejects_wrong_dy_shard_rows", [&] {
    run_ranks(cluster, "11_4.sp_attention_rejects.dy_rows", [&](int) {
      return AttentionSizes{h, t, h, 2};
    });
  });
}

namespace {

// The layer norm's shards of the wrong shape are named, forward and backward.
void emit_layer_norm_rejects(Ctx& ctx) {
  mgpu::Cluster two(2);
  const std::int64_t h = 4;  // shards of 2 tokens of width 4
  ctx.emit_rejects("rejects_wrong_x_shard_width", [&] {
    run_ranks(two, "11_4.sp_layer_norm.rejects_x_width", [&](int) { return h; });
  });
  ctx.emit_rejects("rejects_wrong_dy_shard_rows", [&] {
    run_ranks(two, "11_4.sp_layer_norm.rejects_dy_rows", [&](int) { return h; });
  });
}

// A layer-norm run put together after it: y and dx (n, h) of each of the two micro-batches from
// every rank's m rows, each rank's gain and bias gradients (row r: rank r's, equal on every rank)
// and the activations each rank held at its "saved" checkpoint, after the last forward.
struct LayerNormRows {
  std::vector<MatrixRM> y, dx;
  MatrixRM dgamma, dbeta;
  std::vector<double> saved;

  LayerNormRows(const mgpu::Cluster& cluster, const Point& d)
      : y(2, MatrixRM(d.m * d.t, d.h)),
        dx(2, MatrixRM(d.m * d.t, d.h)),
        dgamma(d.t, d.h),
        dbeta(d.t, d.h),
        saved(static_cast<std::size_t>(d.t)) {
    for (int i = 0; i < d.t; ++i) {  // tp rank i is rank i (the split keeps the world's order)
      const auto first_row = static_cast<Eigen::Index>(published_value(cluster, i, "first"));
      for (std::size_t mb = 0; mb < 2; ++mb) {
        const std::string k = std::to_string(mb);
        y[mb].middleRows(first_row, d.m) = published_matrix(cluster, i, "y" + k, d.m, d.h);
        dx[mb].middleRows(first_row, d.m) = published_matrix(cluster, i, "dx" + k, d.m, d.h);
      }
      dgamma.row(i) = published_matrix(cluster, i, "dgamma", 1, d.h);
      dbeta.row(i) = published_matrix(cluster, i, "dbeta", 1, d.h);
      saved[static_cast<std::size_t>(i)] = static_cast<double>(
          cluster.report(i).checkpoints.at("saved").memory.current(mgpu::Category::activations));
    }
  }

  void emit(Ctx& ctx, const std::string& at) const {
    for (std::size_t mb = 0; mb < 2; ++mb) {
      ctx.emit(at + "y" + std::to_string(mb), y[mb], DType::f32);
      ctx.emit(at + "dx" + std::to_string(mb), dx[mb], DType::f32);
    }
    ctx.emit(at + "dgamma", dgamma, DType::f32);
    ctx.emit(at + "dbeta", dbeta, DType::f32);
    ctx.emit_per_rank(at + "saved_activations", saved);
  }
};

}  // namespace

MGPU_CASE_ISOLATED("11_4.sp_layer_norm") {
  // t = 1, 2, 3, 4 with one to three tokens per rank, then a drawn point; two micro-batches each,
  // so the gain and bias gradients accumulate, each micro-batch summed over the group once.
  std::vector<Point> points = {{3, 5, 1, 1}, {2, 3, 1, 2}, {1, 7, 1, 3}, {2, 6, 1, 4}};
  push_drawn(
      points,
      [&] {
        return Point{ctx.uniform_int(1, 3), ctx.uniform_int(2, 9), 1,
                     static_cast<int>(ctx.pick({1, 2, 3, 4}))};
      },
      [](const Point& p) { return label(p); });
  MostSent sent;
  double all_reduces = 0, other = 0;
  for (const Point& d : points) {
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const Eigen::Index n = d.m * d.t;
    std::vector<MatrixRM> x, dy;
    for (int mb = 0; mb < 2; ++mb) {
      x.push_back(ctx.normal_matrix(n, d.h).cast<float>());
      dy.push_back(ctx.normal_matrix(n, d.h).cast<float>());
    }
    mgpu::Cluster cluster(d.t);
    // Its own rows of each micro-batch's x and dy only; the gain and bias come from the seed.
    run_ranks(cluster, "11_4.sp_layer_norm", [&](int r) {
      SpLayerNormInput in{d.h, seed, {}, {}};
      for (std::size_t mb = 0; mb < 2; ++mb) {
        in.x_shards.push_back(rows_of(x[mb], r, d.m));
        in.dy_shards.push_back(rows_of(dy[mb], r, d.m));
      }
      return in;
    });
    const std::string at = "ln_t" + std::to_string(d.t) + "_m" + std::to_string(d.m) + "_h" +
                           std::to_string(d.h) + ".";
    LayerNormRows(cluster, d).emit(ctx, at);
    emit_peaks(ctx, at, cluster.reports(), {mgpu::Category::activations});
    sent.add(cluster.reports());
    for (const mgpu::RankReport& r : cluster.reports()) {
      const double ar =
          static_cast<double>(r.traffic.of(mgpu::OpKind::all_reduce, "tp").messages_sent);
      all_reduces += ar;
      other += static_cast<double>(r.traffic.total().messages_sent) - ar;
    }
  }
  ctx.emit("all_reduce_steps", all_reduces);
  ctx.emit("other_steps", other);
  emit_layer_norm_rejects(ctx);
  sent.measure(ctx);
}
