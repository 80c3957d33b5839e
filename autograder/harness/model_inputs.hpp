// Inputs and outputs shared by the graded cases that train the course model (11.2 to 11.6): the
// named model shapes (tiny, uneven, overlap, drawn from the seed: mgpu_test/model_configs.hpp,
// shared with the chapter tests), a slow cluster, and bounded samples of long vectors to emit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu_test/model_configs.hpp"

namespace mgpu::grade {

namespace configs = mgpu_test::configs;

/// A slow "GPU" and link (3e10 FLOP/s, 5e8 B/s), so that a gradient all-reduce or a unit's
/// gather takes about as long as the compute it can hide behind, as on real clusters.
inline ClusterConfig slow_cluster(int ranks) {
  ClusterConfig cc;
  cc.world_size = ranks;
  cc.flops_per_second = 3e10;
  cc.intra_node_bytes_per_second = 5e8;
  return cc;
}

/// 1 when every rank's vector is bitwise the same as rank 0's, else 0.
inline double bitwise_identical(const std::vector<std::vector<float>>& per_rank) {
  for (const auto& v : per_rank)
    if (v.size() != per_rank[0].size() ||
        std::memcmp(v.data(), per_rank[0].data(), v.size() * sizeof(float)) != 0)
      return 0;
  return 1;
}

/// Every k-th element of `values`, k chosen so that at most about `most` are kept: enough to
/// catch a wrong update anywhere in a parameter vector, few enough to keep results small.
inline std::vector<float> every_kth(const std::vector<float>& values, std::size_t most = 1500) {
  const std::size_t k = std::max<std::size_t>(1, (values.size() + most - 1) / most);
  std::vector<float> out;
  for (std::size_t i = 0; i < values.size(); i += k) out.push_back(values[i]);
  return out;
}

/// Emits the ledger's peak bytes of each category on every rank as "<prefix>peak_<category>"
/// (e.g. "t2.peak_weights" for one grid point of a case), one value per rank, compared exactly: a
/// run that holds more (or less) than the reference in a category is wrong, and the feedback names
/// the category, the rank and the difference.
inline void emit_peaks(Ctx& ctx, const std::string& prefix, const std::vector<RankReport>& reports,
                       std::initializer_list<Category> categories) {
  for (Category c : categories) {
    std::vector<double> per_rank;
    for (const RankReport& r : reports) per_rank.push_back(static_cast<double>(r.memory.peak(c)));
    ctx.emit_per_rank(prefix + "peak_" + std::string(to_string(c)), per_rank);
  }
}

/// emit_peaks for a case with a single run: values named "peak_<category>".
inline void emit_peaks(Ctx& ctx, const std::vector<RankReport>& reports,
                       std::initializer_list<Category> categories) {
  emit_peaks(ctx, "", reports, categories);
}

/// Emits every rank's virtual clock as "<prefix>compute_seconds" (seconds of compute charged to the
/// rank) and "<prefix>end_seconds" (when the rank's last compute or communication ended), one value
/// per rank. Virtual time depends only on what the code charged and sent, so a correct submission
/// matches the reference to rounding; work not split over the group (a rank charged t times its
/// share), charged to the wrong rank, or communication the compute no longer hides shows here.
/// The rubric judges them with a relative tolerance of their own ("values": {"compute_seconds":
/// ..., "end_seconds": ...}): the seconds are far below any absolute tolerance of the case.
inline void emit_clocks(Ctx& ctx, const std::string& prefix,
                        const std::vector<RankReport>& reports) {
  std::vector<double> compute, end;
  for (const RankReport& r : reports) {
    compute.push_back(r.clock.compute_time());
    end.push_back(r.clock.end_time());
  }
  ctx.emit_per_rank(prefix + "compute_seconds", compute);
  ctx.emit_per_rank(prefix + "end_seconds", end);
}

/// A float matrix, row-major: the layout the runtime's views and the chapters' MatrixRM use.
using PublishedMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Publishes a matrix row by row under `name`: how a rank hands a result to the case when ranks
/// may be processes of their own (Rank::publish), instead of writing into the case's variables.
template <class Derived>
void publish_matrix(Rank& rank, const std::string& name, const Eigen::DenseBase<Derived>& m) {
  std::vector<float> flat;
  flat.reserve(static_cast<std::size_t>(m.size()));
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) flat.push_back(static_cast<float>(m(r, c)));
  rank.publish(name, flat);
}

/// What `rank` published under `name` with publish_matrix, as a rows x cols matrix. Throws
/// std::runtime_error when it holds another number of elements (a result of the wrong shape).
inline PublishedMatrix published_matrix(const Cluster& cluster, int rank, const std::string& name,
                                        Eigen::Index rows, Eigen::Index cols) {
  const std::vector<float> flat = cluster.published<float>(rank, name);
  if (static_cast<Eigen::Index>(flat.size()) != rows * cols)
    throw std::runtime_error("rank " + std::to_string(rank) + " published " + name + " with " +
                             std::to_string(flat.size()) + " elements, not " +
                             std::to_string(rows) + " x " + std::to_string(cols));
  return Eigen::Map<const PublishedMatrix>(flat.data(), rows, cols);
}

/// Publishes one number under `name` (read back with published_value).
inline void publish_value(Rank& rank, const std::string& name, double value) {
  rank.publish(name, std::vector<double>{value});
}

/// What `rank` published under `name` with publish_value.
inline double published_value(const Cluster& cluster, int rank, const std::string& name) {
  return cluster.published<double>(rank, name).at(0);
}

}  // namespace mgpu::grade
