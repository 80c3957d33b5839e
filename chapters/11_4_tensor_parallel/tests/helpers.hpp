// What the 11.4 test programs share: random inputs, the unsplit references, the fp32 tolerance, the
// tensor-parallel group every test runs in, and the comparison of every rank's results with them
// (mgpu_test's: one message naming the first failing rank, tensor and element).
#pragma once

#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/tensor_parallel.hpp"

namespace tp_test {

using mgpu::tensor_parallel::MatIn;
using mgpu::tensor_parallel::MatrixRM;

/// A (rows, cols) matrix of N(0, 1) draws from model::Rng(seed).
inline MatrixRM random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  MatrixRM m(rows, cols);
  mgpu::model::Rng rng(seed);
  rng.fill_normal(std::span<float>(m.data(), static_cast<std::size_t>(m.size())), 1.0);
  return m;
}

/// The unsplit FFN of the course model (no biases) on one rank: its output y and the gradients
/// dx, dW1 and dW2 for the output gradient dy.
struct FfnReference {
  MatrixRM y, dx, dw1, dw2;
};
inline FfnReference ffn_reference(const mgpu::tensor_parallel::FullFfn& full, MatIn x, MatIn dy) {
  const Eigen::Index n = x.rows(), hidden = full.w1.rows(), ffn = full.w1.cols();
  const Eigen::RowVectorXf no_bias;
  Eigen::RowVectorXf no_db1, no_db2;
  MatrixRM h(n, ffn), a(n, ffn);
  FfnReference ref{MatrixRM(n, hidden), MatrixRM(n, hidden), MatrixRM::Zero(hidden, ffn),
                   MatrixRM::Zero(ffn, hidden)};
  mgpu::model::ffn_forward(x, full.w1, no_bias, full.w2, no_bias, h, a, ref.y);
  mgpu::model::ffn_backward(x, full.w1, full.w2, h, a, dy, ref.dx, ref.dw1, no_db1, ref.dw2,
                            no_db2);
  return ref;
}

/// The unsplit attention of the course model on one rank, for sequences of `seq` tokens and
/// `heads` heads: its output y and the gradients dx, dWq, dWk, dWv and dWo for the output
/// gradient dy.
struct AttentionReference {
  MatrixRM y, dx, dwq, dwk, dwv, dwo;
};
inline AttentionReference attention_reference(const mgpu::tensor_parallel::FullAttention& full,
                                              MatIn x, MatIn dy, Eigen::Index seq,
                                              Eigen::Index heads, bool causal) {
  const Eigen::Index n = x.rows(), h = x.cols();
  MatrixRM q(n, h), k(n, h), v(n, h), o(n, h), p(n / seq * heads * seq, seq);
  AttentionReference ref{MatrixRM(n, h),       MatrixRM(n, h),       MatrixRM::Zero(h, h),
                         MatrixRM::Zero(h, h), MatrixRM::Zero(h, h), MatrixRM::Zero(h, h)};
  mgpu::model::attention_forward(x, seq, heads, causal, full.wq, full.wk, full.wv, full.wo, q, k, v,
                                 p, o, ref.y);
  mgpu::model::attention_backward(x, seq, heads, full.wq, full.wk, full.wv, full.wo, q, k, v, p, o,
                                  dy, ref.dx, ref.dwq, ref.dwk, ref.dwv, ref.dwo);
  return ref;
}

/// fp32 tolerance for sums of a few dozen products of O(1) numbers.
inline constexpr double kTol = 1e-5;

/// A tensor-parallel group of t ranks; the cluster holds two such groups side by side (ranks
/// [0, t) and [t, 2t)), so every test also checks that a group talks only to itself.
inline mgpu::Comm tp_group(mgpu::Rank& r, int t) {
  return r.world().split(r.id() / t, r.id() % t, "tp");
}

/// Runs `compare(rank, tp, checks)` on every rank of two t-rank groups (tp_group), each rank
/// comparing its own results with checks.compare(rank.id(), ...) in its thread; returns the
/// checks, for the test's thread to print (largest()) and report (require(): one message naming
/// the first failing rank, tensor and element).
template <class Compare>
mgpu_test::RankChecks compare_over_groups(int t, Compare&& compare) {
  mgpu_test::RankChecks checks(2 * t);
  mgpu::Cluster cluster(2 * t);
  cluster.run([&](mgpu::Rank& r) {
    mgpu::Comm tp = tp_group(r, t);
    compare(r, tp, checks);
  });
  return checks;
}

/// "dW1 (columns 4..7 of 16)": a rank's shard of a tensor, for labels.
inline std::string shard(const std::string& name, const char* axis, Eigen::Index first,
                         Eigen::Index count, Eigen::Index total) {
  return name + " (" + axis + " " + std::to_string(first) + ".." +
         std::to_string(first + count - 1) + " of " + std::to_string(total) + ")";
}

/// Rank `rank`'s attention weight gradients against the unsplit ones, as its shard of a t-way
/// split holds them (rank `tp_rank` of the group): dWq, dWk and dWv its head columns, dWo the
/// matching rows.
inline void compare_attention_weight_grads(mgpu_test::RankChecks& checks, int rank,
                                           const mgpu::tensor_parallel::TpAttention& attn,
                                           const AttentionReference& ref, int tp_rank, int t) {
  const Eigen::Index h = ref.dwq.rows(), c = h / t, first = tp_rank * c;
  const auto hs = static_cast<std::size_t>(h), cs = static_cast<std::size_t>(c);
  using mgpu::as_matrix;
  checks.compare(rank, shard("dWq", "columns", first, c, h), as_matrix(attn.dwq, hs, cs),
                 ref.dwq.middleCols(first, c), {kTol, 0});
  checks.compare(rank, shard("dWk", "columns", first, c, h), as_matrix(attn.dwk, hs, cs),
                 ref.dwk.middleCols(first, c), {kTol, 0});
  checks.compare(rank, shard("dWv", "columns", first, c, h), as_matrix(attn.dwv, hs, cs),
                 ref.dwv.middleCols(first, c), {kTol, 0});
  checks.compare(rank, shard("dWo", "rows", first, c, h), as_matrix(attn.dwo, cs, hs),
                 ref.dwo.middleRows(first, c), {kTol, 0});
}

}  // namespace tp_test
