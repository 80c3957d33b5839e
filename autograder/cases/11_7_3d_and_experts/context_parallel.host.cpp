// Graded cases of 11.7's ring attention on the cluster: the output and gradients against the
// unsplit causal attention core of the runtime (c = 1 to 4, both splits, drawn sizes), and each
// rank's bytes, saved activations and compute. Each rank runs context_parallel.cpp's rank body
// on the rows of the positions it holds, cut here.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "11_7_3d_and_experts/tests/ring_positions.hpp"
#include "case.hpp"
#include "context_parallel.inputs.hpp"
#include "mgpu/cluster.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "rank_parts.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::cases_11_7;
using ring_positions::positions_of;
using ring_positions::rows_of;
namespace cx = mgpu::context;
using mgpu::model::MatrixRM;

namespace {

std::string split_name(cx::Split split) {
  return split == cx::Split::zigzag ? "zigzag" : "contiguous";
}

struct Point {
  std::string name;  // "fixed" or "drawn", so a drawn point never shares a fixed one's names
  int ranks;
  cx::CpShape shape;
  std::int64_t sequences;
  std::int64_t width;
};

std::string label(const Point& p) {
  return p.name + "_c" + std::to_string(p.ranks) + "_" + split_name(p.shape.split) + ".";
}

// Everything a run shows, per rank (index = rank).
struct Seen {
  std::vector<MatrixRM> out, dq, dk, dv;
  std::vector<double> forward_bytes, backward_bytes, saved, comm_left, forward_flops,
      backward_flops;
  explicit Seen(int n)
      : out(static_cast<std::size_t>(n)),
        dq(static_cast<std::size_t>(n)),
        dk(static_cast<std::size_t>(n)),
        dv(static_cast<std::size_t>(n)),
        forward_bytes(static_cast<std::size_t>(n)),
        backward_bytes(static_cast<std::size_t>(n)),
        saved(static_cast<std::size_t>(n)),
        comm_left(static_cast<std::size_t>(n)),
        forward_flops(static_cast<std::size_t>(n)),
        backward_flops(static_cast<std::size_t>(n)) {}
};

// One forward and one backward pass of ring attention on drawn q, k, v, d_out of the whole
// batch; rank i is given the rows of its positions (ring_positions, written from the header's
// definition of the splits, not from the submission) and nothing else.
Seen run(Ctx& ctx, const Point& p) {
  const Eigen::Index n = p.sequences * p.shape.seq;
  const MatrixRM q = ctx.normal_matrix(n, p.width).cast<float>(),
                 k = ctx.normal_matrix(n, p.width).cast<float>(),
                 v = ctx.normal_matrix(n, p.width).cast<float>(),
                 d_out = ctx.normal_matrix(n, p.width).cast<float>();
  Seen s(p.ranks);
  mgpu::Cluster cluster(p.ranks);
  const double rate = cluster.config().flops_per_second;
  // Each rank publishes its results, and the costs of each pass come from checkpoints the
  // cluster's side records after it.
  run_ranks(cluster, "11_7.ring_attention", [&](int r) {
    const auto pos = positions_of(p.shape.seq, p.ranks, r, p.shape.split);
    return RingInput{p.shape, rows_of(q, p.shape.seq, pos), rows_of(k, p.shape.seq, pos),
                     rows_of(v, p.shape.seq, pos), rows_of(d_out, p.shape.seq, pos)};
  });
  for (int id = 0; id < p.ranks; ++id) {
    const auto i = static_cast<std::size_t>(id);
    const Eigen::Index rows =
        p.sequences *
        static_cast<Eigen::Index>(positions_of(p.shape.seq, p.ranks, id, p.shape.split).size());
    s.out[i] = published_matrix(cluster, id, "out", rows, p.width);
    s.dq[i] = published_matrix(cluster, id, "dq", rows, p.width);
    s.dk[i] = published_matrix(cluster, id, "dk", rows, p.width);
    s.dv[i] = published_matrix(cluster, id, "dv", rows, p.width);
    const auto& marks = cluster.report(id).checkpoints;
    const mgpu::Checkpoint &fwd = marks.at("forward"), &bwd = marks.at("backward");
    s.forward_bytes[i] = static_cast<double>(fwd.traffic.total().bytes_sent);
    s.forward_flops[i] = fwd.compute * rate;
    s.saved[i] = static_cast<double>(fwd.memory.current(mgpu::Category::activations));
    s.comm_left[i] = static_cast<double>(fwd.memory.current(mgpu::Category::comm));
    s.backward_bytes[i] = static_cast<double>(bwd.traffic.total().bytes_sent) - s.forward_bytes[i];
    s.backward_flops[i] = bwd.compute * rate - s.forward_flops[i];
  }
  return s;
}

// c = 1, 2, 4 with both splits, c = 3 zig-zag, and a drawn point; drawn sizes (two sequences
// somewhere, two heads somewhere, chunks of 1 to 3 tokens).
std::vector<Point> grid(Ctx& ctx) {
  std::vector<Point> points;
  const std::pair<int, cx::Split> fixed[] = {{1, cx::Split::contiguous}, {2, cx::Split::contiguous},
                                             {2, cx::Split::zigzag},     {4, cx::Split::contiguous},
                                             {4, cx::Split::zigzag},     {3, cx::Split::zigzag}};
  for (const auto& [c, split] : fixed) {
    const std::int64_t heads = ctx.uniform_int(1, 2);
    points.push_back({"fixed",
                      c,
                      {2 * c * ctx.uniform_int(1, 3), heads, split},
                      ctx.uniform_int(1, 2),
                      heads * ctx.pick<std::int64_t>({2, 4})});
  }
  const int c = ctx.pick({2, 3, 4});
  const cx::Split split = ctx.pick({cx::Split::contiguous, cx::Split::zigzag});
  points.push_back({"drawn", c, {2 * c * ctx.uniform_int(1, 4), 2, split}, 2, 6});
  return points;
}

}  // namespace

MGPU_CASE_ISOLATED("11_7.cp_values") {
  for (const Point& p : grid(ctx)) {
    const Seen s = run(ctx, p);
    const std::string at = label(p);
    ctx.emit(at + "out", stacked(s.out), DType::f32);
    ctx.emit(at + "dq", stacked(s.dq), DType::f32);
    ctx.emit(at + "dk", stacked(s.dk), DType::f32);
    ctx.emit(at + "dv", stacked(s.dv), DType::f32);
  }
}

MGPU_CASE_ISOLATED("11_7.cp_costs") {
  for (const Point& p : grid(ctx)) {
    const Seen s = run(ctx, p);
    const std::string at = label(p);
    ctx.emit_per_rank(at + "forward_bytes", s.forward_bytes);
    ctx.emit_per_rank(at + "backward_bytes", s.backward_bytes);
    ctx.emit_per_rank(at + "saved_activations", s.saved);
    ctx.emit_per_rank(at + "comm_left_after_forward", s.comm_left);
    ctx.emit_per_rank(at + "forward_flops", s.forward_flops);
    ctx.emit_per_rank(at + "backward_flops", s.backward_flops);
  }
}
