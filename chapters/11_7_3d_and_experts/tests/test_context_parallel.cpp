// 11.7 visible tests of context parallelism (ring attention): the split of the positions, the
// output and the three gradients against the runtime's unsplit causal attention core on one rank
// (c = 1, 2, 4, both splits, several sequences and heads), the rejection of sequences that do not
// split, the bytes on the traffic meter, the saved activations on the ledger (1/c of the unsplit
// layer's), and each rank's compute on the clock against pairs counted here with a plain loop
// (contiguous: the last rank about 2c - 1 times the first; zig-zag: all equal).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/context_parallel.hpp"
#include "mgpu/model/rng.hpp"

#include "helpers.hpp"
#include "ring_positions.hpp"

using namespace mgpu;
using namespace mgpu::context;

namespace {

using layout_test::max_abs_diff;
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

// What one rank saw in one forward and one backward pass.
struct Seen {
  MatrixRM out, dq, dk, dv;
  double forward_bytes = 0, backward_bytes = 0;
  double saved_activations = 0, comm_after_forward = 0;
  double forward_flops = 0, backward_flops = 0;
};

// Ring attention over c ranks on the whole batch (q, k, v, d_out hold every token, rank i takes
// its rows); returns what every rank saw, index = rank.
std::vector<Seen> run_ring(int c, const CpShape& shape, MatIn q, MatIn k, MatIn v, MatIn d_out) {
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

}  // namespace

TEST_CASE("cp_positions: each rank's share of a sequence, both splits, every position once") {
  CHECK(cp_positions(8, 2, 0, Split::zigzag) == std::vector<std::int64_t>{0, 1, 6, 7});
  CHECK(cp_positions(8, 2, 1, Split::zigzag) == std::vector<std::int64_t>{2, 3, 4, 5});
  CHECK(cp_positions(8, 2, 1, Split::contiguous) == std::vector<std::int64_t>{4, 5, 6, 7});
  for (Split split : {Split::contiguous, Split::zigzag})
    for (int c : {1, 2, 4}) {
      CAPTURE(c);
      std::vector<std::int64_t> all;
      for (int i = 0; i < c; ++i) {
        const auto p = cp_positions(16, c, i, split);
        CHECK(p == positions_of(16, c, i, split));
        all.insert(all.end(), p.begin(), p.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<std::int64_t> want(16);
      std::iota(want.begin(), want.end(), 0);
      CHECK(all == want);
    }
  CHECK_THROWS_AS(cp_positions(6, 4, 0, Split::contiguous), std::invalid_argument);
  CHECK_THROWS_AS(cp_positions(12, 4, 0, Split::zigzag), std::invalid_argument);  // 8 chunks
  CHECK_THROWS_AS(cp_positions(8, 2, 2, Split::contiguous), std::invalid_argument);
}

TEST_CASE(
    "ring_attention_forward and ring_attention_backward equal the unsplit causal attention: "
    "output, dq, dk, dv at c = 1, 2, 4, both splits") {
  const std::int64_t seq = 16, heads = 2, width = 8, sequences = 2;
  const Eigen::Index n = sequences * seq;
  const MatrixRM q = random_matrix(n, width, 1), k = random_matrix(n, width, 2),
                 v = random_matrix(n, width, 3), d_out = random_matrix(n, width, 4);
  const Whole want = unsplit(q, k, v, d_out, seq, heads);
  for (Split split : {Split::contiguous, Split::zigzag})
    for (int c : {1, 2, 4}) {
      CAPTURE(c);
      CAPTURE(split == Split::zigzag);
      const std::vector<Seen> seen = run_ring(c, {seq, heads, split}, q, k, v, d_out);
      for (int i = 0; i < c; ++i) {
        CAPTURE(i);
        const Seen& s = seen[static_cast<std::size_t>(i)];
        const auto pos = positions_of(seq, c, i, split);
        const double e_out = max_abs_diff(s.out, rows_of(want.out, seq, pos));
        const double e_dq = max_abs_diff(s.dq, rows_of(want.dq, seq, pos));
        const double e_dk = max_abs_diff(s.dk, rows_of(want.dk, seq, pos));
        const double e_dv = max_abs_diff(s.dv, rows_of(want.dv, seq, pos));
        MESSAGE("c=" << c << " rank " << i << " max |diff| out " << e_out << " dq " << e_dq
                     << " dk " << e_dk << " dv " << e_dv);
        CHECK(e_out < kTol);
        CHECK(e_dq < kTol);
        CHECK(e_dk < kTol);
        CHECK(e_dv < kTol);
      }
    }
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
    "ring attention's bytes, saved activations and compute per rank equal the formulas "
    "(cp_forward_bytes_per_rank, cp_backward_bytes_per_rank, cp_saved_activation_bytes_per_rank, "
    "cp_attention_flops)") {
  const std::int64_t seq = 64, heads = 2, width = 4, sequences = 1;
  const MatrixRM q = random_matrix(seq, width, 6), k = random_matrix(seq, width, 7),
                 v = random_matrix(seq, width, 8), d_out = random_matrix(seq, width, 9);
  double unsplit_saved = 0;
  for (Split split : {Split::contiguous, Split::zigzag})
    for (int c : {1, 2, 4}) {
      CAPTURE(c);
      CAPTURE(split == Split::zigzag);
      const std::vector<Seen> seen = run_ring(c, {seq, heads, split}, q, k, v, d_out);
      if (c == 1) unsplit_saved = seen[0].saved_activations;
      std::vector<double> flops;
      for (int i = 0; i < c; ++i) {
        CAPTURE(i);
        const Seen& s = seen[static_cast<std::size_t>(i)];
        // Bytes: c - 1 hops of this rank's keys and values (s/c tokens of width floats each),
        // and backward the same again plus their gradients.
        const double block = static_cast<double>(seq / c * width * 4);
        CHECK(s.forward_bytes == doctest::Approx(2 * (c - 1) * block));
        CHECK(s.backward_bytes == doctest::Approx(4 * (c - 1) * block));
        CHECK(s.forward_bytes ==
              doctest::Approx(cp_forward_bytes_per_rank(sequences, seq, width, c, split)));
        CHECK(s.backward_bytes ==
              doctest::Approx(cp_backward_bytes_per_rank(sequences, seq, width, c, split)));
        // Memory: the cache alone, 1/c of the unsplit layer's, and no comm buffer left.
        CHECK(s.saved_activations * c == doctest::Approx(unsplit_saved));
        CHECK(s.saved_activations == doctest::Approx(cp_saved_activation_bytes_per_rank(
                                         sequences, seq, width, heads, c, split)));
        CHECK(s.comm_after_forward == 0);
        // Compute: 4 width FLOPs per pair the mask lets through, backward 10 (2.5 times).
        const double pairs = causal_pairs(positions_of(seq, c, i, split));
        CHECK(s.forward_flops == doctest::Approx(4 * width * pairs));
        CHECK(s.backward_flops == doctest::Approx(10 * width * pairs));
        CHECK(s.forward_flops ==
              doctest::Approx(cp_attention_flops(sequences, seq, width, c, i, split)));
        flops.push_back(s.forward_flops);
      }
      const double ratio = flops.back() / flops.front();
      MESSAGE(std::string(split == Split::zigzag ? "zig-zag" : "contiguous")
              << " c=" << c << ": last rank / first rank compute " << ratio);
      if (split == Split::contiguous)
        CHECK(ratio > 0.9 * (2 * c - 1));  // 1 + 2(c-1) m/(m+1) for chunks of m tokens
      else
        CHECK(ratio == doctest::Approx(1.0));
    }
}
