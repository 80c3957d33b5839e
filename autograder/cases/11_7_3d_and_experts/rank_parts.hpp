// What the 11.7 case files share: the per-rank pieces of a result put back together in rank
// order, so that one emitted tensor holds every rank's share.
#pragma once

#include <vector>

#include "mgpu/model/layers.hpp"

namespace mgpu::grade::cases_11_7 {

/// The parts stacked row-wise in order (rank 0's rows first); every part has the same width.
inline mgpu::model::MatrixRM stacked(const std::vector<mgpu::model::MatrixRM>& parts) {
  Eigen::Index rows = 0;
  for (const mgpu::model::MatrixRM& m : parts) rows += m.rows();
  mgpu::model::MatrixRM all(rows, parts.front().cols());
  Eigen::Index at = 0;
  for (const mgpu::model::MatrixRM& m : parts) {
    all.middleRows(at, m.rows()) = m;
    at += m.rows();
  }
  return all;
}

}  // namespace mgpu::grade::cases_11_7
