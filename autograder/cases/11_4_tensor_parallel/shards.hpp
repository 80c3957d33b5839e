// What 11.4's tensor-parallel and sequence-parallel cases share: a grid's drawn point, the bytes
// and messages a run's busiest rank sent, and the FFN's and attention's weight-gradient shards
// handed out of each rank and placed.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

namespace mgpu::grade {

/// Appends to a grid the point `draw()` returns, drawn again while its label is taken, so a drawn
/// point never shares a fixed one's names.
template <class Point, class Draw, class Label>
void push_drawn(std::vector<Point>& points, Draw draw, Label label) {
  Point drawn;
  do drawn = draw();
  while (std::any_of(points.begin(), points.end(),
                     [&](const Point& q) { return label(q) == label(drawn); }));
  points.push_back(drawn);
}

/// The most bytes (messages) any rank of a run sent, summed over the runs added. A ring's ranks
/// send the same up to one chunk, so the most is what a rank sends. Budgeted from above (wasted
/// traffic) and floored from below (data that went around the meter).
struct MostSent {
  double bytes = 0, messages = 0;
  void add(const std::vector<mgpu::RankReport>& reports) {
    double most_bytes = 0, most_messages = 0;
    for (const mgpu::RankReport& r : reports) {
      most_bytes = std::max(most_bytes, static_cast<double>(r.traffic.total().bytes_sent));
      most_messages = std::max(most_messages, static_cast<double>(r.traffic.total().messages_sent));
    }
    bytes += most_bytes;
    messages += most_messages;
  }
  void measure(Ctx& ctx) const {
    ctx.measure("bytes_sent_per_rank", bytes);
    ctx.measure("messages_sent_per_rank", messages);
  }
};

/// Inside a rank: publishes its FFN's weight-gradient shards, dw1 (h, c) as "dw1" and dw2 (c, h)
/// as "dw2", c = f / t (a rank may be a process of its own).
inline void publish_ffn_grads(mgpu::Rank& r, mgpu::tensor_parallel::TpFfn& ffn, Eigen::Index h,
                              Eigen::Index c) {
  const auto hs = static_cast<std::size_t>(h), cs = static_cast<std::size_t>(c);
  publish_matrix(r, "dw1", mgpu::as_matrix(ffn.dw1, hs, cs));
  publish_matrix(r, "dw2", mgpu::as_matrix(ffn.dw2, cs, hs));
}

/// After the run: tp rank i's shards into columns [i c, (i+1) c) of dw1 (h, f) and the same rows
/// of dw2 (f, h).
inline void place_ffn_grads(const mgpu::Cluster& cluster, int i, Eigen::Index h, Eigen::Index c,
                            mgpu::tensor_parallel::MatrixRM& dw1,
                            mgpu::tensor_parallel::MatrixRM& dw2) {
  dw1.middleCols(i * c, c) = published_matrix(cluster, i, "dw1", h, c);
  dw2.middleRows(i * c, c) = published_matrix(cluster, i, "dw2", c, h);
}

/// Inside a rank: publishes its attention's weight-gradient shards, dwq, dwk and dwv (h, c) and
/// dwo (c, h), c = h / t, under those names.
inline void publish_attention_grads(mgpu::Rank& r, mgpu::tensor_parallel::TpAttention& attn,
                                    Eigen::Index h, Eigen::Index c) {
  const auto hs = static_cast<std::size_t>(h), cs = static_cast<std::size_t>(c);
  publish_matrix(r, "dwq", mgpu::as_matrix(attn.dwq, hs, cs));
  publish_matrix(r, "dwk", mgpu::as_matrix(attn.dwk, hs, cs));
  publish_matrix(r, "dwv", mgpu::as_matrix(attn.dwv, hs, cs));
  publish_matrix(r, "dwo", mgpu::as_matrix(attn.dwo, cs, hs));
}

/// The attention's weight gradients (h, h) put together from the tp ranks' shards: W_Q, W_K and
/// W_V by columns, W_O by rows.
struct AttentionGrads {
  mgpu::tensor_parallel::MatrixRM dwq, dwk, dwv, dwo;

  explicit AttentionGrads(Eigen::Index h) : dwq(h, h), dwk(h, h), dwv(h, h), dwo(h, h) {}

  /// After the run: tp rank i's shards (c = h / t wide) into columns or rows [i c, (i+1) c).
  void place(const mgpu::Cluster& cluster, int i, Eigen::Index c) {
    const Eigen::Index h = dwq.rows();
    dwq.middleCols(i * c, c) = published_matrix(cluster, i, "dwq", h, c);
    dwk.middleCols(i * c, c) = published_matrix(cluster, i, "dwk", h, c);
    dwv.middleCols(i * c, c) = published_matrix(cluster, i, "dwv", h, c);
    dwo.middleRows(i * c, c) = published_matrix(cluster, i, "dwo", c, h);
  }

  /// Emits the four as "<at>dwq" and so on.
  void emit(Ctx& ctx, const std::string& at) const {
    ctx.emit(at + "dwq", dwq, DType::f32);
    ctx.emit(at + "dwk", dwk, DType::f32);
    ctx.emit(at + "dwv", dwv, DType::f32);
    ctx.emit(at + "dwo", dwo, DType::f32);
  }
};

}  // namespace mgpu::grade
