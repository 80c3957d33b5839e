// Graded cases of 11.7's context parallelism (ring attention): the positions each rank holds
// under both splits, the output and gradients against the unsplit causal attention core of the
// runtime (c = 1 to 4, both splits, drawn sizes), each rank's bytes, saved activations and
// compute on the cluster, and the formulas of those costs.
#include <cstdint>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/context_parallel.hpp"
#include "11_7_3d_and_experts/tests/ring_positions.hpp"
#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "model_inputs.hpp"
#include "rank_parts.hpp"

using namespace mgpu::grade;
using mgpu::grade::cases_11_7::stacked;
using ring_positions::positions_of;
using ring_positions::rows_of;
namespace cx = mgpu::context;
using mgpu::model::MatIn;
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
// batch; rank i takes the rows of its positions.
Seen run(Ctx& ctx, const Point& p) {
  const Eigen::Index n = p.sequences * p.shape.seq;
  const MatrixRM q = ctx.normal_matrix(n, p.width).cast<float>(),
                 k = ctx.normal_matrix(n, p.width).cast<float>(),
                 v = ctx.normal_matrix(n, p.width).cast<float>(),
                 d_out = ctx.normal_matrix(n, p.width).cast<float>();
  Seen s(p.ranks);
  mgpu::Cluster cluster(p.ranks);
  const double rate = cluster.config().flops_per_second;
  // A rank may be a process of its own: it publishes its results, and the costs of each pass
  // come from checkpoints the cluster's side records after it.
  cluster.run([&](mgpu::Rank& r) {
    const auto pos = positions_of(p.shape.seq, p.ranks, r.id(), p.shape.split);
    const MatrixRM qs = rows_of(q, p.shape.seq, pos), ks = rows_of(k, p.shape.seq, pos),
                   vs = rows_of(v, p.shape.seq, pos), dos = rows_of(d_out, p.shape.seq, pos);
    MatrixRM out(qs.rows(), qs.cols());
    cx::RingCache cache = cx::ring_attention_forward(r, r.world(), p.shape, qs, ks, vs, out);
    r.checkpoint("forward");
    MatrixRM dq(qs.rows(), qs.cols()), dk(qs.rows(), qs.cols()), dv(qs.rows(), qs.cols());
    cx::ring_attention_backward(r, r.world(), p.shape, cache, dos, dq, dk, dv);
    r.checkpoint("backward");
    publish_matrix(r, "out", out);
    publish_matrix(r, "dq", dq);
    publish_matrix(r, "dk", dk);
    publish_matrix(r, "dv", dv);
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

MGPU_CASE("11_7.cp_split") {
  for (cx::Split split : {cx::Split::contiguous, cx::Split::zigzag})
    for (int c : {1, 2, 3, 4, 8}) {
      const std::int64_t seq = c == 3 ? 12 : 16;
      std::vector<double> all;
      for (int i = 0; i < c; ++i) {
        const auto p = cx::cp_positions(seq, c, i, split);
        all.insert(all.end(), p.begin(), p.end());
      }
      ctx.emit("c" + std::to_string(c) + "_" + split_name(split), all);
    }
  const int c = ctx.pick({2, 4, 8});
  const std::int64_t seq = 2 * c * ctx.uniform_int(1, 4);
  for (cx::Split split : {cx::Split::contiguous, cx::Split::zigzag}) {
    std::vector<double> all;
    for (int i = 0; i < c; ++i) {
      const auto p = cx::cp_positions(seq, c, i, split);
      all.insert(all.end(), p.begin(), p.end());
    }
    ctx.emit("drawn_" + split_name(split), all);
  }
  ctx.emit_rejects("rejects_uneven_contiguous",
                   [] { cx::cp_positions(6, 4, 0, cx::Split::contiguous); });
  ctx.emit_rejects("rejects_uneven_zigzag", [] { cx::cp_positions(12, 4, 0, cx::Split::zigzag); });
  // The rank just outside both ends of [0, c) (every rank inside is drawn above).
  ctx.emit_rejects("rejects_rank_outside", [] { cx::cp_positions(8, 2, 2, cx::Split::zigzag); });
  ctx.emit_rejects("rejects_negative_rank", [] { cx::cp_positions(8, 2, -1, cx::Split::zigzag); });
  ctx.emit_rejects("accepts_even_contiguous",
                   [] { cx::cp_positions(12, 4, 3, cx::Split::contiguous); });
}

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

MGPU_CASE("11_7.cp_formulas") {
  struct F {
    std::string name;
    std::int64_t sequences, seq, width, heads;
    int ranks;
    cx::Split split;
  };
  std::vector<F> points{{"one_rank", 2, 64, 16, 2, 1, cx::Split::contiguous},
                        {"c4_contiguous", 1, 64, 16, 4, 4, cx::Split::contiguous},
                        {"c4_zigzag", 3, 64, 8, 2, 4, cx::Split::zigzag},
                        {"c8_zigzag", 1, 4096, 128, 8, 8, cx::Split::zigzag}};
  const int c = ctx.pick({2, 4, 8});
  points.push_back({"drawn", ctx.uniform_int(1, 8), 2 * c * ctx.uniform_int(1, 64),
                    ctx.pick<std::int64_t>({8, 64, 128}), ctx.pick<std::int64_t>({1, 2, 8}), c,
                    ctx.pick({cx::Split::contiguous, cx::Split::zigzag})});
  for (const F& f : points) {
    ctx.emit(f.name + ".forward_bytes",
             cx::cp_forward_bytes_per_rank(f.sequences, f.seq, f.width, f.ranks, f.split));
    ctx.emit(f.name + ".backward_bytes",
             cx::cp_backward_bytes_per_rank(f.sequences, f.seq, f.width, f.ranks, f.split));
    ctx.emit(f.name + ".saved_activation_bytes",
             cx::cp_saved_activation_bytes_per_rank(f.sequences, f.seq, f.width, f.heads, f.ranks,
                                                    f.split));
    std::vector<double> flops;
    for (int i = 0; i < f.ranks; ++i)
      flops.push_back(cx::cp_attention_flops(f.sequences, f.seq, f.width, f.ranks, i, f.split));
    ctx.emit_per_rank(f.name + ".attention_flops", flops);
  }
  ctx.emit_rejects("rejects_uneven_zigzag",
                   [] { cx::cp_forward_bytes_per_rank(1, 12, 8, 4, cx::Split::zigzag); });
  ctx.emit_rejects("rejects_rank_outside",
                   [] { cx::cp_attention_flops(1, 16, 8, 4, 4, cx::Split::contiguous); });
  ctx.emit_rejects("rejects_negative_rank",
                   [] { cx::cp_attention_flops(1, 16, 8, 4, -1, cx::Split::contiguous); });
  ctx.emit_rejects("rejects_zero_width", [] {
    cx::cp_saved_activation_bytes_per_rank(1, 16, 0, 1, 2, cx::Split::zigzag);
  });
}
