// What the 11.7 test programs share: the small attention model of the 3D tests, random inputs,
// and the comparison of a rank's share (or part of it) with the one-rank values cut the same way,
// tensor by tensor, so a failure names the unit, the tensor and the worst element ("step 1, unit
// 2 (block1) w1 grad, rank tp 1 pp 0 dp 1") instead of one relative error for the whole buffer.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "11_7_3d_and_experts/share.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu_test/compare.hpp"

namespace layout_test {

/// The model of the 3D tests: 4 attention blocks of width 16, 4 heads, sequences of 4 tokens,
/// small enough for 16 ranks and divisible by tp = 4 and pp = 4.
inline mgpu::model::ModelConfig config() {
  return mgpu::model::ModelConfig{
      .d_in = 8, .d_model = 16, .d_ff = 32, .n_layers = 4, .n_heads = 4, .seq_len = 4, .d_out = 4};
}

/// A (rows, cols) matrix of N(0, 1) draws from model::Rng(seed).
inline mgpu::model::MatrixRM random_matrix(Eigen::Index rows, Eigen::Index cols,
                                           std::uint64_t seed) {
  mgpu::model::MatrixRM m(rows, cols);
  mgpu::model::Rng rng(seed);
  rng.fill_normal(std::span<float>(m.data(), static_cast<std::size_t>(m.size())), 1.0);
  return m;
}

}  // namespace layout_test

namespace share_compare {

/// "tp 1 pp 0 dp 1": where a rank sits, for labels.
inline std::string where(const mgpu::layout::RankCoords& c) {
  return "tp " + std::to_string(c.tp) + " pp " + std::to_string(c.pp) + " dp " +
         std::to_string(c.dp);
}

/// "unit 2 (block1) w1": a share tensor's unit and its short name.
inline std::string tensor_name(const mgpu::model::Model& model,
                               const mgpu::layout::ShareTensor& t) {
  const mgpu::model::TensorInfo& info = model.tensors()[static_cast<std::size_t>(t.tensor)];
  const auto dot = info.name.find('.');
  const std::string shortname = dot == std::string::npos ? info.name : info.name.substr(dot + 1);
  return "unit " + std::to_string(info.unit) + " (" + model.unit(info.unit).name + ") " + shortname;
}

/// Checks got against want (both share-long flat buffers) over [first, first + count), tensor by
/// tensor of the share that overlaps the range, each labelled "<prefix>: unit U (name) T <what>,
/// <suffix>", in one doctest check: its message is the first failing tensor's report (rank,
/// element, first and worst) and the names of the other failing tensors, so a wrong share reads
/// in a screenful. The tolerance is `rel` times the largest |want| in the range, the same for
/// every tensor (a tensor of tiny values is not held to a tighter standard than its neighbours).
/// `stop` makes a failure end the test case (REQUIRE), for loops over many ranks and steps.
/// Returns whether every tensor passed.
inline bool check_share(const mgpu::model::Model& model, const mgpu::layout::Share& share,
                        std::span<const float> got, std::span<const float> want, std::size_t first,
                        std::size_t count, double rel, const std::string& prefix,
                        const std::string& what, const std::string& suffix, bool stop = false) {
  const double atol = rel * std::max(1e-12, mgpu_test::max_abs(want.subspan(first, count)));
  std::string report, others;
  std::size_t failed = 0;
  for (const mgpu::layout::ShareTensor& t : share.tensors) {
    const std::size_t lo = std::max(first, t.offset);
    const std::size_t hi = std::min(first + count, t.offset + t.size());
    if (lo >= hi) continue;
    std::string label = prefix + ": " + tensor_name(model, t) + " " + what;
    if (lo != t.offset || hi != t.offset + t.size()) {
      label += " (elements " + std::to_string(lo - t.offset) + ".." +
               std::to_string(hi - t.offset) + " of " + std::to_string(t.size()) + ")";
    }
    label += ", " + suffix;
    const mgpu_test::Mismatch m =
        mgpu_test::compare(label, got.subspan(lo, hi - lo), want.subspan(lo, hi - lo), {atol, 0});
    if (m.count == 0) continue;
    if (failed++ == 0)
      report = m.report;
    else
      others += "\n    " + tensor_name(model, t) + " " + what;
  }
  if (failed > 1)
    report += "\n  and " + std::to_string(failed - 1) + " more tensors of this share:" + others;
  if (stop)
    REQUIRE_MESSAGE(failed == 0, report);
  else
    CHECK_MESSAGE(failed == 0, report);
  return failed == 0;
}

}  // namespace share_compare
