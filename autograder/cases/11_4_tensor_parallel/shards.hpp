// What 11.4's tensor-parallel and sequence-parallel cases share: the bytes and messages a run's
// busiest rank sent, and the FFN's weight-gradient shards handed out of each rank and placed.
#pragma once

#include <algorithm>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

namespace mgpu::grade {

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

}  // namespace mgpu::grade
