// Graded cases of 11.7's expert-parallel MoE layer on the simulated cluster: the output and
// every gradient (n = 2 and 4 ranks, k = 1 and 2, capacity tight enough to drop copies), the
// dropped counts under random and lopsided routing, and the all_to_all_v bytes of the four
// exchanges, under even routing (the formula's case) and under random routing. Each rank runs
// moe.cpp's rank body on its own tokens, cut here.
#include <cstdint>
#include <string>
#include <vector>

#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "model_inputs.hpp"
#include "moe.inputs.hpp"
#include "rank_code.hpp"
#include "rank_parts.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::cases_11_7;
namespace ex = mgpu::experts;
using mgpu::model::MatrixRM;

namespace {

struct Point {
  int ranks;
  ex::MoeConfig config;
  std::int64_t tokens;  // per rank
};

std::string label(const Point& p) {
  return "n" + std::to_string(p.ranks) + "_k" + std::to_string(p.config.top_k) + ".";
}

MatrixRM drawn(Ctx& ctx, Eigen::Index rows, Eigen::Index cols) {
  return ctx.normal_matrix(rows, cols).cast<float>();
}

// Everything a run shows, per rank (index = rank), read back from what each rank published.
struct Seen {
  std::vector<MatrixRM> y, dx_first, dx_second, drouter, dw;
  std::vector<double> dropped, forward_bytes, backward_bytes;
  std::vector<double> compute_seconds;  // per rank, over the whole run (filled after it)
  explicit Seen(int n)
      : y(static_cast<std::size_t>(n)),
        dx_first(static_cast<std::size_t>(n)),
        dx_second(static_cast<std::size_t>(n)),
        drouter(static_cast<std::size_t>(n)),
        dw(static_cast<std::size_t>(n)),
        dropped(static_cast<std::size_t>(n)),
        forward_bytes(static_cast<std::size_t>(n)),
        backward_bytes(static_cast<std::size_t>(n)) {}
};

// One forward and two backward passes of the layer drawn from `seed` (11_7.moe); rank r is given
// rows [r*T, (r+1)*T) of x, dy1, dy2 and nothing of the other rows. A non-empty router replaces
// the drawn one, to force a routing.
Seen run(const Point& p, std::uint64_t seed, const MatrixRM& x, const MatrixRM& dy1,
         const MatrixRM& dy2, const MatrixRM& router = MatrixRM()) {
  Seen s(p.ranks);
  const auto h = static_cast<std::size_t>(p.config.hidden);
  const auto T = static_cast<Eigen::Index>(p.tokens);
  mgpu::Cluster cluster(p.ranks);
  // Each rank publishes its results, and the bytes of each pass come from checkpoints the
  // cluster's side records after it.
  run_ranks(cluster, "11_7.moe", [&](int r) {
    MoeInput in{p.config, seed, router, {}, {}, {}};
    in.x = x.middleRows(r * T, T);
    in.dy1 = dy1.middleRows(r * T, T);
    in.dy2 = dy2.middleRows(r * T, T);
    return in;
  });
  const auto hidden = static_cast<Eigen::Index>(h);
  for (int id = 0; id < p.ranks; ++id) {
    const auto i = static_cast<std::size_t>(id);
    s.y[i] = published_matrix(cluster, id, "y", T, hidden);
    s.dx_first[i] = published_matrix(cluster, id, "dx_first", T, hidden);
    s.dx_second[i] = published_matrix(cluster, id, "dx_second", T, hidden);
    s.dropped[i] = published_value(cluster, id, "dropped");
    s.drouter[i] = published_matrix(cluster, id, "drouter", hidden, p.config.experts);
    const auto local = static_cast<Eigen::Index>(published_value(cluster, id, "local_experts"));
    s.dw[i] = published_matrix(cluster, id, "dw", local * hidden, hidden);
    const auto& marks = cluster.report(id).checkpoints;
    const auto all_to_all = [](const mgpu::Checkpoint& c) {
      return static_cast<double>(c.traffic.op(mgpu::OpKind::all_to_all_v).bytes_sent);
    };
    s.forward_bytes[i] = all_to_all(marks.at("forward"));
    s.backward_bytes[i] = all_to_all(marks.at("backward")) - s.forward_bytes[i];
  }
  for (const mgpu::RankReport& rep : cluster.reports())
    s.compute_seconds.push_back(rep.clock.compute_time());
  return s;
}

Seen run_drawn(Ctx& ctx, const Point& p, const MatrixRM& router = MatrixRM()) {
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 30));
  const Eigen::Index rows = p.ranks * p.tokens;
  const MatrixRM x = drawn(ctx, rows, p.config.hidden), dy1 = drawn(ctx, rows, p.config.hidden),
                 dy2 = drawn(ctx, rows, p.config.hidden);
  return run(p, seed, x, dy1, dy2, router);
}

// n = 2 and 4, k = 1 and 2, 8 experts (2 or 4 per rank, so sending to rank e % n instead of
// e / (E/n) shows), a drawn capacity factor of 1.0 or 1.25: random routing drops copies.
std::vector<Point> value_points(Ctx& ctx) {
  std::vector<Point> points;
  for (int n : {2, 4})
    for (std::int64_t k : {1, 2})
      points.push_back({n,
                        {ctx.pick<std::int64_t>({4, 6}), 8, k, ctx.pick({1.0, 1.25})},
                        ctx.uniform_int(6, 12)});
  return points;
}

}  // namespace

MGPU_CASE_ISOLATED("11_7.moe_values") {
  for (const Point& p : value_points(ctx)) {
    const Seen s = run_drawn(ctx, p);
    const std::string at = label(p);
    ctx.emit(at + "y", stacked(s.y), DType::f32);
    ctx.emit(at + "dx", stacked(s.dx_first), DType::f32);
    ctx.emit(at + "dx_second", stacked(s.dx_second), DType::f32);
    // Each rank's router gradient from its own tokens (after two passes), and every expert's.
    ctx.emit(at + "drouter", stacked(s.drouter), DType::f32);
    ctx.emit(at + "dw", stacked(s.dw), DType::f32);
    // The experts' compute is charged where the rows arrived: a rank charged for the copies it
    // sent is off wherever routing is uneven.
    ctx.emit_per_rank(at + "compute_seconds", s.compute_seconds);
  }
}

MGPU_CASE_ISOLATED("11_7.moe_dropped") {
  // Random routing at the value points: dropped copies per rank.
  for (const Point& p : value_points(ctx))
    ctx.emit(label(p) + "dropped", run_drawn(ctx, p).dropped);
  // Lopsided: an identity router and every token leaning on experts 0 and 1, so each rank
  // fills their capacity and drops the rest, at a drawn token count and factor.
  for (std::int64_t k : {1, 2}) {
    const Point p{2, {8, 8, k, ctx.pick({1.0, 1.5, 2.0})}, ctx.uniform_int(4, 16)};
    MatrixRM x = drawn(ctx, 2 * p.tokens, 8) * 0.1f;
    x.col(0).array() += 3.0f;
    x.col(1).array() += 2.0f;
    const MatrixRM dy = drawn(ctx, 2 * p.tokens, 8);
    const Seen s = run(p, 1, x, dy, dy, MatrixRM::Identity(8, 8));
    ctx.emit("lopsided_k" + std::to_string(k) + ".dropped", s.dropped);
    ctx.emit("lopsided_k" + std::to_string(k) + ".y", stacked(s.y), DType::f32);
  }
}

MGPU_CASE_ISOLATED("11_7.moe_all_to_all_bytes") {
  // Even routing, the formula's case: identity router, token t leaning on expert t mod E and
  // then t+1 mod E, T a multiple of E, so no copy is dropped and (n-1)/n of them leave.
  for (int n : {2, 4})
    for (std::int64_t k : {1, 2}) {
      const Point p{n, {8, 8, k, 1.0}, 8 * ctx.uniform_int(1, 3)};
      MatrixRM x = MatrixRM::Zero(n * p.tokens, 8);
      for (Eigen::Index t = 0; t < x.rows(); ++t) {
        x(t, t % 8) = 4.0f;
        x(t, (t + 1) % 8) = 2.0f;
      }
      const MatrixRM dy = drawn(ctx, x.rows(), 8);
      const Seen s = run(p, 1, x, dy, dy, MatrixRM::Identity(8, 8));
      ctx.emit("even_" + label(p) + "forward_bytes", s.forward_bytes);
      ctx.emit("even_" + label(p) + "backward_bytes", s.backward_bytes);
    }
  // Random routing with drops: only kept copies travel.
  for (const Point& p : value_points(ctx)) {
    const Seen s = run_drawn(ctx, p);
    ctx.emit("random_" + label(p) + "forward_bytes", s.forward_bytes);
    ctx.emit("random_" + label(p) + "backward_bytes", s.backward_bytes);
  }
}
