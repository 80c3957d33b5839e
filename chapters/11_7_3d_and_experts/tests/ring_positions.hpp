// The positions each rank of a context-parallel group holds, and the rows of a whole batch that
// belong to them, written from context_parallel.hpp's definition of the two splits and not from
// any submission: the visible tests and the graded cases give every rank its inputs through these
// and compare its outputs with the same rows of the unsplit results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "11_7_3d_and_experts/context_parallel.hpp"

namespace ring_positions {

/// The positions rank i of c holds in a sequence of `seq` tokens, in increasing order.
inline std::vector<std::int64_t> positions_of(std::int64_t seq, int c, int i,
                                              mgpu::context::Split split) {
  std::vector<std::int64_t> chunks{i};
  if (split == mgpu::context::Split::zigzag) chunks.push_back(2 * c - 1 - i);
  const std::int64_t len = seq / (static_cast<std::int64_t>(chunks.size()) * c);
  std::vector<std::int64_t> out;
  for (std::int64_t ch : chunks)
    for (std::int64_t t = 0; t < len; ++t) out.push_back(ch * len + t);
  return out;
}

/// The rows of `full` (sequences * seq, w) at positions `pos` of each sequence, sequence after
/// sequence: (sequences * pos.size(), w).
inline mgpu::model::MatrixRM rows_of(mgpu::model::MatIn full, std::int64_t seq,
                                     const std::vector<std::int64_t>& pos) {
  const Eigen::Index sequences = full.rows() / seq, local = static_cast<Eigen::Index>(pos.size());
  mgpu::model::MatrixRM out(sequences * local, full.cols());
  for (Eigen::Index b = 0; b < sequences; ++b)
    for (Eigen::Index t = 0; t < local; ++t)
      out.row(b * local + t) = full.row(b * seq + pos[static_cast<std::size_t>(t)]);
  return out;
}

}  // namespace ring_positions
