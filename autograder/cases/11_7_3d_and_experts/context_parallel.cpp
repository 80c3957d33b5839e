// Graded cases of 11.7's context parallelism that run whole in the student's program (the
// positions each rank holds under both splits, and the formulas of the costs), and the rank body
// of the ring-attention cases in context_parallel.host.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/context_parallel.hpp"
#include "case.hpp"
#include "context_parallel.inputs.hpp"
#include "mgpu/cluster.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::cases_11_7;
namespace cx = mgpu::context;
using mgpu::model::MatrixRM;

namespace {

std::string split_name(cx::Split split) {
  return split == cx::Split::zigzag ? "zigzag" : "contiguous";
}

}  // namespace

// One forward and one backward pass of ring attention on this rank's rows of q, k, v and d_out.
// A rank may be a process of its own: it publishes its results, and the costs of each pass come
// from checkpoints the cluster's side records after it.
MGPU_RANK_BODY("11_7.ring_attention", RingInput) {
  MatrixRM out(in.q.rows(), in.q.cols());
  cx::RingCache cache =
      cx::ring_attention_forward(rank, rank.world(), in.shape, in.q, in.k, in.v, out);
  rank.checkpoint("forward");
  MatrixRM dq(in.q.rows(), in.q.cols()), dk(in.q.rows(), in.q.cols()), dv(in.q.rows(), in.q.cols());
  cx::ring_attention_backward(rank, rank.world(), in.shape, cache, in.d_out, dq, dk, dv);
  rank.checkpoint("backward");
  publish_matrix(rank, "out", out);
  publish_matrix(rank, "dq", dq);
  publish_matrix(rank, "dk", dk);
  publish_matrix(rank, "dv", dv);
}

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
