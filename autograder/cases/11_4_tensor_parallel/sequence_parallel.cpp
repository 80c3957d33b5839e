// Graded case of 11.4's sequence-parallel FFN: each rank holds n/t tokens outside the block. Over
// a fixed grid and a drawn point: outputs and input gradients assembled from the token shards, the
// weight-gradient shards, the activations saved between the passes and the ledger's peaks, the
// collectives by kind, and the bytes each rank sends, held between a floor and the budget.
#include <algorithm>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

using namespace mgpu::grade;
namespace tp = mgpu::tensor_parallel;
using tp::MatrixRM;

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

}  // namespace

MGPU_CASE("11_4.sp_ffn") {
  // t = 1 (no communication), then t = 2, 3, 4 with one to three tokens per rank, then a drawn
  // point (drawn again while its name is taken).
  std::vector<Point> points = {{3, 5, 4, 1}, {2, 3, 6, 2}, {1, 7, 9, 3}, {2, 6, 8, 4}};
  Point drawn;
  do {
    const int t = ctx.pick({1, 2, 3, 4});
    drawn = {ctx.uniform_int(1, 3), ctx.uniform_int(2, 9), t * ctx.uniform_int(1, 5), t};
  } while (std::any_of(points.begin(), points.end(),
                       [&](const Point& q) { return label(q) == label(drawn); }));
  points.push_back(drawn);
  double bytes = 0, messages = 0, gathers = 0, scatters = 0, all_reduces = 0;
  for (const Point& d : points) {
    const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
    const Eigen::Index n = d.m * d.t;
    const MatrixRM x = ctx.normal_matrix(n, d.h).cast<float>();
    const MatrixRM dy = ctx.normal_matrix(n, d.h).cast<float>();
    MatrixRM y(n, d.h), dx(n, d.h), dw1(d.h, d.f), dw2(d.f, d.h);
    std::vector<double> saved(static_cast<std::size_t>(d.t));
    mgpu::Cluster cluster(d.t);
    cluster.run([&](mgpu::Rank& r) {
      mgpu::Comm g = r.world().split(0, r.id(), "tp");
      tp::TpFfn ffn = tp::make_tp_ffn(r, g, d.h, d.f, seed);
      const tp::TokenRows mine = tp::token_rows(n, g.rank(), d.t);
      MatrixRM ys(d.m, d.h), dxs(d.m, d.h);
      const tp::SpFfnCache cache =
          tp::sp_ffn_forward(r, g, ffn, x.middleRows(mine.first, mine.count), ys);
      // Between the passes only the cache is alive: this is what sequence parallelism shrinks.
      saved[static_cast<std::size_t>(g.rank())] =
          static_cast<double>(r.memory().current(mgpu::Category::activations));
      tp::sp_ffn_backward(r, g, ffn, cache, dy.middleRows(mine.first, mine.count), dxs);
      const auto hs = static_cast<std::size_t>(d.h), cs = static_cast<std::size_t>(d.f / d.t);
      // Each rank writes its own disjoint block.
      y.middleRows(mine.first, mine.count) = ys;
      dx.middleRows(mine.first, mine.count) = dxs;
      dw1.middleCols(g.rank() * d.f / d.t, d.f / d.t) = mgpu::as_matrix(ffn.dw1, hs, cs);
      dw2.middleRows(g.rank() * d.f / d.t, d.f / d.t) = mgpu::as_matrix(ffn.dw2, cs, hs);
    });
    const std::string at = label(d);
    ctx.emit(at + "y", y, DType::f32);
    ctx.emit(at + "dx", dx, DType::f32);
    ctx.emit(at + "dw1", dw1, DType::f32);
    ctx.emit(at + "dw2", dw2, DType::f32);
    ctx.emit_per_rank(at + "saved_activations", saved);
    emit_peaks(ctx, at, cluster.reports(), {mgpu::Category::activations, mgpu::Category::comm});
    // The most any rank sent, and every rank's collectives by kind (ring steps).
    double most_bytes = 0, most_messages = 0;
    for (const mgpu::RankReport& r : cluster.reports()) {
      most_bytes = std::max(most_bytes, static_cast<double>(r.traffic.total().bytes_sent));
      most_messages = std::max(most_messages, static_cast<double>(r.traffic.total().messages_sent));
      gathers += static_cast<double>(r.traffic.of(mgpu::OpKind::all_gather, "tp").messages_sent);
      scatters +=
          static_cast<double>(r.traffic.of(mgpu::OpKind::reduce_scatter, "tp").messages_sent);
      all_reduces +=
          static_cast<double>(r.traffic.of(mgpu::OpKind::all_reduce, "tp").messages_sent);
    }
    bytes += most_bytes;
    messages += most_messages;
  }
  ctx.emit("all_gather_steps", gathers);
  ctx.emit("reduce_scatter_steps", scatters);
  ctx.emit("all_reduce_steps", all_reduces);
  ctx.measure("bytes_sent_per_rank", bytes);
  ctx.measure("messages_sent_per_rank", messages);
}

MGPU_CASE("11_4.sp_rejects") {
  const int t = ctx.pick({2, 3, 4});
  const auto h = static_cast<std::int64_t>(ctx.uniform_int(2, 8));
  ctx.emit_rejects("rejects_t_not_dividing_tokens", [&] { tp::token_rows(t * 2 + 1, 0, t); });
  mgpu::Cluster cluster(t);
  ctx.emit_rejects("rejects_wrong_x_shard_width", [&] {
    cluster.run([&](mgpu::Rank& r) {
      tp::TpFfn ffn = tp::make_tp_ffn(r, r.world(), h, 2 * t, 1);
      MatrixRM xs(2, h + 1), ys(2, h);
      tp::sp_ffn_forward(r, r.world(), ffn, xs, ys);
    });
  });
  ctx.emit_rejects("rejects_wrong_dy_shard_rows", [&] {
    cluster.run([&](mgpu::Rank& r) {
      tp::TpFfn ffn = tp::make_tp_ffn(r, r.world(), h, 2 * t, 1);
      MatrixRM xs = MatrixRM::Zero(2, h), ys(2, h), dys = MatrixRM::Zero(3, h), dxs(2, h);
      const tp::SpFfnCache cache = tp::sp_ffn_forward(r, r.world(), ffn, xs, ys);
      tp::sp_ffn_backward(r, r.world(), ffn, cache, dys, dxs);
    });
  });
}
