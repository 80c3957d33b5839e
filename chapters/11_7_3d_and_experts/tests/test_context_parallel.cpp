// 11.7 visible tests of context parallelism (ring attention): the split of the positions, the
// output and the three gradients against the runtime's unsplit causal attention core on one rank
// (c = 1, 2, 4, both splits, several sequences and heads), the rejection of sequences that do not
// split, the bytes on the traffic meter, the saved activations on the ledger (1/c of the unsplit
// layer's), and each rank's compute on the clock against pairs counted here with a plain loop
// (contiguous: the last rank about 2c - 1 times the first; zig-zag: all equal). Each TODO is its
// own rung: the forward's tests run ring_attention_forward alone, so they pass before
// ring_attention_backward is written, and the formulas are checked against the same counts
// without running the ring at all.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/context_parallel.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu_test/compare.hpp"

#include "helpers.hpp"
#include "ring_positions.hpp"

using namespace mgpu;
using namespace mgpu::context;

namespace {

using layout_test::random_matrix;
using ring_positions::positions_of;
using ring_positions::rows_of;

constexpr double kTol = 2e-5;  // fp32 softmax sums over at most 64 keys, in another order

struct Whole {
  MatrixRM out, dq, dk, dv;
};

// The unsplit causal attention core on whole sequences (the runtime's, one rank, no ring).
Whole unsplit(MatIn q, MatIn k, MatIn v, MatIn d_out, std::int64_t seq, std::int64_t heads) {
  const Eigen::Index n = q.rows(), w = q.cols();
  MatrixRM p(n * heads, seq);
  Whole r{MatrixRM(n, w), MatrixRM(n, w), MatrixRM(n, w), MatrixRM(n, w)};
  model::attention_core_forward(q, k, v, seq, heads, true, p, r.out);
  model::attention_core_backward(q, k, v, p, d_out, seq, heads, r.dq, r.dk, r.dv);
  return r;
}

// What one rank saw in one forward pass and, when it ran, one backward pass.
struct Seen {
  MatrixRM out, dq, dk, dv;
  double forward_bytes = 0, backward_bytes = 0;
  double saved_activations = 0, comm_after_forward = 0;
  double forward_flops = 0, backward_flops = 0;
};

// Which passes run_ring runs: the forward alone (its rung), or the forward and the backward.
enum class Passes { forward, both };

// Ring attention over c ranks on the whole batch (q, k, v, d_out hold every token, rank i takes
// its rows); returns what every rank saw, index = rank. Passes::forward never calls
// ring_attention_backward.
std::vector<Seen> run_ring(int c, const CpShape& shape, MatIn q, MatIn k, MatIn v, MatIn d_out,
                           Passes passes) {
  std::vector<Seen> seen(static_cast<std::size_t>(c));
  Cluster cluster(c);
  const double rate = cluster.config().flops_per_second;
  cluster.run([&](Rank& r) {
    Seen& s = seen[static_cast<std::size_t>(r.id())];
    Comm& cp = r.world();
    const auto pos = positions_of(shape.seq, c, r.id(), shape.split);
    const MatrixRM qs = rows_of(q, shape.seq, pos), ks = rows_of(k, shape.seq, pos),
                   vs = rows_of(v, shape.seq, pos), dos = rows_of(d_out, shape.seq, pos);
    s.out = MatrixRM(qs.rows(), qs.cols());
    RingCache cache = ring_attention_forward(r, cp, shape, qs, ks, vs, s.out);
    s.forward_bytes = static_cast<double>(r.traffic().op(OpKind::send).bytes_sent);
    s.forward_flops = r.clock().compute_time() * rate;
    s.saved_activations = static_cast<double>(r.memory().current(Category::activations));
    s.comm_after_forward = static_cast<double>(r.memory().current(Category::comm));
    if (passes == Passes::forward) return;
    s.dq = MatrixRM(qs.rows(), qs.cols());
    s.dk = MatrixRM(qs.rows(), qs.cols());
    s.dv = MatrixRM(qs.rows(), qs.cols());
    ring_attention_backward(r, cp, shape, cache, dos, s.dq, s.dk, s.dv);
    s.backward_bytes =
        static_cast<double>(r.traffic().op(OpKind::send).bytes_sent) - s.forward_bytes;
    s.backward_flops = r.clock().compute_time() * rate - s.forward_flops;
  });
  return seen;
}

// (query, key) pairs the causal mask lets through for the positions a rank holds, per sequence.
double causal_pairs(const std::vector<std::int64_t>& pos) {
  double pairs = 0;
  for (std::int64_t p : pos)
    for (std::int64_t key = 0; key <= p; ++key) pairs += 1;
  return pairs;
}

const char* split_name(Split split) { return split == Split::zigzag ? "zig-zag" : "contiguous"; }

// A Context::where for rank i's rows of `width` columns (sequence after sequence, its positions
// in each): "sequence 1, position 13 (chunk 6 of 8)", the chunk being the split's piece of the
// sequence.
std::function<std::string(std::size_t)> token_of(std::int64_t seq, int c, int i, Split split,
                                                 std::int64_t width) {
  const std::vector<std::int64_t> pos = positions_of(seq, c, i, split);
  const std::int64_t pieces = split == Split::zigzag ? 2 * c : c, len = seq / pieces;
  const auto cols = static_cast<std::size_t>(width);
  return [pos, pieces, len, cols](std::size_t index) {
    const std::size_t row = index / cols, local = pos.size();
    const std::int64_t p = pos[row % local];
    return "sequence " + std::to_string(row / local) + ", position " + std::to_string(p) +
           " (chunk " + std::to_string(p / len) + " of " + std::to_string(pieces) + ")";
  };
}

// The shape of the correctness tests: two sequences of 16 tokens, 2 heads of width 4.
constexpr std::int64_t kSeq = 16, kHeads = 2, kWidth = 8, kSequences = 2;

// Runs ring attention at c = 1, 2, 4 with both splits (the forward alone, or both passes) on the
// correctness shape and compares each rank's `tensors` (names of Seen's matrices and Whole's)
// with the same rows of the unsplit core's: one message per run, naming the rank, the tensor,
// and the row's sequence, position and chunk; the first failing run ends the test.
void check_against_unsplit(Passes passes, const std::vector<std::string>& tensors) {
  const Eigen::Index n = kSequences * kSeq;
  const MatrixRM q = random_matrix(n, kWidth, 1), k = random_matrix(n, kWidth, 2),
                 v = random_matrix(n, kWidth, 3), d_out = random_matrix(n, kWidth, 4);
  const Whole want = unsplit(q, k, v, d_out, kSeq, kHeads);
  auto seen_of = [](const Seen& s, const std::string& t) -> const MatrixRM& {
    return t == "out" ? s.out : t == "dq" ? s.dq : t == "dk" ? s.dk : s.dv;
  };
  auto want_of = [&](const std::string& t) -> const MatrixRM& {
    return t == "out" ? want.out : t == "dq" ? want.dq : t == "dk" ? want.dk : want.dv;
  };
  for (Split split : {Split::contiguous, Split::zigzag})
    for (int c : {1, 2, 4}) {
      const std::vector<Seen> seen = run_ring(c, {kSeq, kHeads, split}, q, k, v, d_out, passes);
      mgpu_test::RankChecks checks(c);
      for (int i = 0; i < c; ++i) {
        const Seen& s = seen[static_cast<std::size_t>(i)];
        const auto pos = positions_of(kSeq, c, i, split);
        for (const std::string& t : tensors)
          checks.compare(i, t, seen_of(s, t), rows_of(want_of(t), kSeq, pos),
                         mgpu_test::below(kTol), {.where = token_of(kSeq, c, i, split, kWidth)});
      }
      MESSAGE("c=" << c << " " << std::string(split_name(split)) << ": max |diff| over the ranks "
                   << checks.largest());
      INFO("c = " << c << ", " << std::string(split_name(split))
                  << " split: each rank's rows against the same rows of the unsplit core");
      checks.require();
    }
}

// The shape of the cost tests: one sequence of 64 tokens, 2 heads of width 2.
constexpr std::int64_t kCostSeq = 64, kCostHeads = 2, kCostWidth = 4, kCostSequences = 1;

// Runs the cost shape at c = 1, 2, 4 with both splits and hands each run to `check(split, c,
// seen)`.
template <class Check>
void for_each_cost_run(Passes passes, Check check) {
  const MatrixRM q = random_matrix(kCostSeq, kCostWidth, 6),
                 k = random_matrix(kCostSeq, kCostWidth, 7),
                 v = random_matrix(kCostSeq, kCostWidth, 8),
                 d_out = random_matrix(kCostSeq, kCostWidth, 9);
  for (Split split : {Split::contiguous, Split::zigzag})
    for (int c : {1, 2, 4}) {
      CAPTURE(c);
      CAPTURE(std::string(split_name(split)));
      check(split, c, run_ring(c, {kCostSeq, kCostHeads, split}, q, k, v, d_out, passes));
    }
}

// Bytes of one rank's block of keys or values: s/c tokens of `width` floats per sequence.
double block_bytes(std::int64_t sequences, std::int64_t seq, std::int64_t width, int c) {
  return static_cast<double>(sequences * (seq / c) * width * 4);
}

}  // namespace

TEST_CASE("cp_positions: each rank's share of a sequence, both splits, every position once") {
  using V = std::vector<std::int64_t>;
  mgpu_test::check_close("cp_positions(8, 2, 0, zig-zag)", cp_positions(8, 2, 0, Split::zigzag),
                         V{0, 1, 6, 7}, {}, {.rank = 0});
  mgpu_test::check_close("cp_positions(8, 2, 1, zig-zag)", cp_positions(8, 2, 1, Split::zigzag),
                         V{2, 3, 4, 5}, {}, {.rank = 1});
  mgpu_test::check_close("cp_positions(8, 2, 1, contiguous)",
                         cp_positions(8, 2, 1, Split::contiguous), V{4, 5, 6, 7}, {}, {.rank = 1});
  for (Split split : {Split::contiguous, Split::zigzag})
    for (int c : {1, 2, 4}) {
      CAPTURE(c);
      CAPTURE(std::string(split_name(split)));
      std::vector<std::int64_t> all;
      for (int i = 0; i < c; ++i) {
        const auto p = cp_positions(16, c, i, split);
        mgpu_test::require_close("positions of a sequence of 16", p, positions_of(16, c, i, split),
                                 {}, {.rank = i});
        all.insert(all.end(), p.begin(), p.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<std::int64_t> want(16);
      std::iota(want.begin(), want.end(), 0);
      mgpu_test::require_close("every rank's positions, sorted", all, want);
    }
  CHECK_THROWS_AS(cp_positions(6, 4, 0, Split::contiguous), std::invalid_argument);
  CHECK_THROWS_AS(cp_positions(12, 4, 0, Split::zigzag), std::invalid_argument);  // 8 chunks
  CHECK_THROWS_AS(cp_positions(8, 2, 2, Split::contiguous), std::invalid_argument);
}

TEST_CASE(
    "ring_attention_forward equals the unsplit causal attention's output at c = 1, 2, 4, both "
    "splits") {
  check_against_unsplit(Passes::forward, {"out"});
}

TEST_CASE(
    "ring_attention_backward equals the unsplit causal attention's dq, dk, dv at c = 1, 2, 4, "
    "both splits") {
  check_against_unsplit(Passes::both, {"dq", "dk", "dv"});
}

TEST_CASE("ring_attention_forward rejects sequences that do not split and mismatched shapes") {
  const MatrixRM x = random_matrix(6, 4, 5);
  MatrixRM out(6, 4);
  // q holds `rows` tokens, k `key_rows`; every call must throw on every rank.
  auto attempt = [&](int c, CpShape shape, Eigen::Index rows, Eigen::Index key_rows) {
    CHECK_THROWS_AS(Cluster(c).run([&](Rank& r) {
      ring_attention_forward(r, r.world(), shape, x.topRows(rows), x.topRows(key_rows),
                             x.topRows(rows), out.topRows(rows));
    }),
                    std::invalid_argument);
  };
  attempt(4, {6, 1, Split::contiguous}, 6, 6);  // 4 does not divide s = 6
  attempt(2, {6, 1, Split::zigzag}, 3, 3);      // 2c = 4 chunks do not divide s = 6
  attempt(1, {6, 3, Split::contiguous}, 6, 6);  // 3 heads do not divide a width of 4
  attempt(2, {6, 1, Split::contiguous}, 3, 2);  // k has other rows than q
  attempt(2, {6, 1, Split::contiguous}, 2, 2);  // 2 rows are not a multiple of s/c = 3
}

TEST_CASE(
    "ring attention forward: bytes, saved activations and compute per rank (c - 1 hops of the "
    "keys and values, 1/c of the unsplit cache, 4 hd FLOPs per pair the mask lets through)") {
  double unsplit_saved = 0;
  for_each_cost_run(Passes::forward, [&](Split split, int c, const std::vector<Seen>& seen) {
    if (c == 1) unsplit_saved = seen[0].saved_activations;
    std::vector<double> flops;
    for (int i = 0; i < c; ++i) {
      CAPTURE(i);
      const Seen& s = seen[static_cast<std::size_t>(i)];
      // Bytes: c - 1 hops of this rank's keys and values.
      const double block = block_bytes(kCostSequences, kCostSeq, kCostWidth, c);
      CHECK(s.forward_bytes == doctest::Approx(2 * (c - 1) * block));
      // Memory: the cache alone (RingCache: q, k, v, out of (rows, hd) and the log-sum-exp of
      // (rows, heads)), 1/c of the unsplit layer's, and no comm buffer left.
      const double rows = static_cast<double>(kCostSequences * (kCostSeq / c));
      CHECK(s.saved_activations == doctest::Approx(rows * (4 * kCostWidth + kCostHeads) * 4));
      CHECK(s.saved_activations * c == doctest::Approx(unsplit_saved));
      CHECK(s.comm_after_forward == 0);
      // Compute: 4 width FLOPs per pair the mask lets through.
      const double pairs = causal_pairs(positions_of(kCostSeq, c, i, split));
      CHECK(s.forward_flops == doctest::Approx(4 * kCostWidth * pairs));
      flops.push_back(s.forward_flops);
    }
    const double ratio = flops.back() / flops.front();
    MESSAGE(std::string(split_name(split))
            << " c=" << c << ": last rank / first rank compute " << ratio);
    if (split == Split::contiguous)
      CHECK(ratio > 0.9 * (2 * c - 1));  // 1 + 2(c-1) m/(m+1) for chunks of m tokens
    else
      CHECK(ratio == doctest::Approx(1.0));
  });
}

TEST_CASE(
    "ring attention backward: bytes and compute per rank (the keys and values round again plus "
    "their gradients, 2.5 times the forward's FLOPs)") {
  for_each_cost_run(Passes::both, [&](Split split, int c, const std::vector<Seen>& seen) {
    for (int i = 0; i < c; ++i) {
      CAPTURE(i);
      const Seen& s = seen[static_cast<std::size_t>(i)];
      // Bytes: the keys and values go round again and their gradients with them.
      const double block = block_bytes(kCostSequences, kCostSeq, kCostWidth, c);
      CHECK(s.backward_bytes == doctest::Approx(4 * (c - 1) * block));
      // Compute: the scores rebuilt, then dV, dP, dQ and dK: 10 width FLOPs per pair, 2.5 times
      // the forward's 4.
      const double pairs = causal_pairs(positions_of(kCostSeq, c, i, split));
      CHECK(s.backward_flops == doctest::Approx(10 * kCostWidth * pairs));
    }
  });
}

TEST_CASE(
    "the cost formulas equal what the ring measures per rank: cp_forward_bytes_per_rank, "
    "cp_backward_bytes_per_rank, cp_saved_activation_bytes_per_rank, cp_attention_flops") {
  // The same counts the forward and backward tests hold the running ring to, so a formula that
  // passes here predicts what the ring measures; no ring runs, so this passes on its own.
  for (std::int64_t sequences : {1, 3})
    for (Split split : {Split::contiguous, Split::zigzag})
      for (int c : {1, 2, 4}) {
        CAPTURE(sequences);
        CAPTURE(c);
        CAPTURE(std::string(split_name(split)));
        const double block = block_bytes(sequences, kCostSeq, kCostWidth, c);
        REQUIRE(cp_forward_bytes_per_rank(sequences, kCostSeq, kCostWidth, c, split) ==
                doctest::Approx(2 * (c - 1) * block));
        REQUIRE(cp_backward_bytes_per_rank(sequences, kCostSeq, kCostWidth, c, split) ==
                doctest::Approx(4 * (c - 1) * block));
        const double rows = static_cast<double>(sequences * (kCostSeq / c));
        REQUIRE(cp_saved_activation_bytes_per_rank(sequences, kCostSeq, kCostWidth, kCostHeads, c,
                                                   split) ==
                doctest::Approx(rows * (4 * kCostWidth + kCostHeads) * 4));
        for (int i = 0; i < c; ++i) {
          CAPTURE(i);
          const double pairs = causal_pairs(positions_of(kCostSeq, c, i, split));
          REQUIRE(cp_attention_flops(sequences, kCostSeq, kCostWidth, c, i, split) ==
                  doctest::Approx(4 * kCostWidth * pairs * static_cast<double>(sequences)));
        }
      }
}
