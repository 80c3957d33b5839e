// 11.4 visible tests of the running tensor-parallel layers: column- and row-parallel linear and
// the tensor-parallel FFN against the unsplit layers of the course model on one rank, the
// all-reduces counted by the traffic meter against the 11.4 formulas, and the ledger's weights per
// rank against ffn_params_per_rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "11_4_tensor_parallel/formulas.hpp"
#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "helpers.hpp"

using namespace mgpu;
using namespace mgpu::tensor_parallel;
using namespace tp_test;  // the helpers every 11.4 test program shares

namespace {

// Where each of t equal shards of `total` rows or columns starts.
std::vector<std::size_t> shard_starts(std::size_t total, int t) {
  std::vector<std::size_t> starts;
  for (int r = 0; r < t; ++r) starts.push_back(static_cast<std::size_t>(r) * total / t);
  return starts;
}

struct Shape {
  Eigen::Index n, hidden, ffn;  // tokens, h, f
};
// Awkward sizes, every f divisible by 1, 2 and 4.
constexpr Shape kShapes[] = {{5, 6, 12}, {3, 7, 20}, {1, 3, 4}, {9, 10, 8}};

}  // namespace

TEST_CASE("column_shard and row_shard: the t shards side by side (stacked) are the matrix") {
  const MatrixRM w = random_matrix(8, 12, 1);
  for (int t : {1, 2, 4}) {
    MatrixRM cols(8, 12), rows(8, 12);
    for (int r = 0; r < t; ++r) {
      cols.middleCols(r * 12 / t, 12 / t) = column_shard(w, r, t);
      rows.middleRows(r * 8 / t, 8 / t) = row_shard(w, r, t);
    }
    INFO("t = " << t << ": the shards put back together against the matrix");
    mgpu_test::check_close(
        "column_shards side by side", cols, w, {},
        {.where = mgpu_test::column_chunks(12, shard_starts(12, t), 12, "rank")});
    mgpu_test::check_close("row_shards stacked", rows, w, {},
                           {.where = mgpu_test::row_chunks(12, shard_starts(8, t), 8, "rank")});
  }
  CHECK_THROWS_AS(row_shard(w, 0, 3), std::invalid_argument);     // 3 does not divide 8 rows
  CHECK_THROWS_AS(column_shard(w, 3, 3), std::invalid_argument);  // rank 3 of 3
}

// The tests of the layers cut their shards themselves (middleCols, middleRows), so that each
// layer can pass before column_shard and row_shard are written.

TEST_CASE("column-parallel forward equals the unsplit linear layer's columns (t = 1, 2, 4)") {
  for (const Shape& s : kShapes) {
    const MatrixRM x = random_matrix(s.n, s.hidden, 2), w = random_matrix(s.hidden, s.ffn, 3);
    const Eigen::RowVectorXf no_bias;
    MatrixRM y_ref(s.n, s.ffn);
    model::linear_forward(x, w, no_bias, y_ref);
    for (int t : {1, 2, 4}) {
      const Eigen::Index c = s.ffn / t;
      mgpu_test::RankChecks checks(t);
      for (int rank = 0; rank < t; ++rank) {
        MatrixRM y(s.n, c);
        column_parallel_forward(x, w.middleCols(rank * c, c), y);
        checks.compare(rank, shard("y", "columns", rank * c, c, s.ffn), y,
                       y_ref.middleCols(rank * c, c), {kTol, 0});
      }
      std::printf("column-parallel forward n=%td in=%td out=%td t=%d: max error %.3g\n", s.n,
                  s.hidden, s.ffn, t, checks.largest());
      INFO("n = " << s.n << ", in = " << s.hidden << ", out = " << s.ffn << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE(
    "column-parallel backward equals the unsplit linear layer: whole dx, dW shards (t = 1, 2, "
    "4)") {
  for (const Shape& s : kShapes) {
    const MatrixRM x = random_matrix(s.n, s.hidden, 2), w = random_matrix(s.hidden, s.ffn, 3);
    const MatrixRM dy = random_matrix(s.n, s.ffn, 4);
    Eigen::RowVectorXf no_db;
    MatrixRM dx_ref(s.n, s.hidden), dw_ref = MatrixRM::Zero(s.hidden, s.ffn);
    model::linear_backward(x, w, dy, dx_ref, dw_ref, no_db);
    for (int t : {1, 2, 4}) {
      const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& c) {
        const Eigen::Index cols = s.ffn / t, first = tp.rank() * cols;
        MatrixRM dx(s.n, s.hidden), dw = MatrixRM::Zero(s.hidden, cols);
        column_parallel_backward(tp, x, w.middleCols(first, cols), dy.middleCols(first, cols), dx,
                                 dw);
        c.compare(r.id(), "dx", dx, dx_ref, {kTol, 0});
        c.compare(r.id(), shard("dW", "columns", first, cols, s.ffn), dw,
                  dw_ref.middleCols(first, cols), {kTol, 0});
      });
      std::printf("column-parallel backward n=%td in=%td out=%td t=%d: max error %.3g\n", s.n,
                  s.hidden, s.ffn, t, checks.largest());
      INFO("n = " << s.n << ", in = " << s.hidden << ", out = " << s.ffn << ", t = " << t);
      checks.require();
    }
  }
}

namespace {

// The row-parallel layer's data: x (n, f), W (f, h), dy (n, h) and a replicated bias.
struct RowData {
  MatrixRM x, w, dy;
  Eigen::RowVectorXf bias;
};
RowData row_data(const Shape& s) {
  return {random_matrix(s.n, s.ffn, 5), random_matrix(s.ffn, s.hidden, 6),
          random_matrix(s.n, s.hidden, 7), random_matrix(1, s.hidden, 10)};
}

}  // namespace

TEST_CASE("row-parallel forward equals the unsplit x W + b on every rank (t = 1, 2, 4)") {
  for (const Shape& s : kShapes) {
    const RowData d = row_data(s);
    // A replicated bias: it must be counted once, whatever t.
    MatrixRM y_ref(s.n, s.hidden);
    model::linear_forward(d.x, d.w, d.bias, y_ref);
    for (int t : {1, 2, 4}) {
      const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& c) {
        const Eigen::Index cols = s.ffn / t, first = tp.rank() * cols;
        MatrixRM y(s.n, s.hidden);
        row_parallel_forward(tp, d.x.middleCols(first, cols), d.w.middleRows(first, cols), d.bias,
                             y);
        c.compare(r.id(), "y", y, y_ref, {kTol, 0});
      });
      std::printf("row-parallel forward n=%td in=%td out=%td t=%d: max error %.3g\n", s.n, s.ffn,
                  s.hidden, t, checks.largest());
      INFO("n = " << s.n << ", in = " << s.ffn << ", out = " << s.hidden << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE(
    "row-parallel backward equals the unsplit linear layer: dx, dW shards, whole db (t = 1, 2, "
    "4)") {
  for (const Shape& s : kShapes) {
    const RowData d = row_data(s);
    Eigen::RowVectorXf db_ref = Eigen::RowVectorXf::Zero(s.hidden);
    MatrixRM dx_ref(s.n, s.ffn), dw_ref = MatrixRM::Zero(s.ffn, s.hidden);
    model::linear_backward(d.x, d.w, d.dy, dx_ref, dw_ref, db_ref);
    for (int t : {1, 2, 4}) {
      mgpu_test::RankChecks checks(t);
      for (int rank = 0; rank < t; ++rank) {
        const Eigen::Index c = s.ffn / t, first = rank * c;
        MatrixRM dx(s.n, c), dw = MatrixRM::Zero(c, s.hidden);
        Eigen::RowVectorXf db = Eigen::RowVectorXf::Zero(s.hidden);
        // No group at all: a rank's whole backward is computed from what it holds.
        row_parallel_backward(d.x.middleCols(first, c), d.w.middleRows(first, c), d.dy, dx, dw, db);
        checks.compare(rank, shard("dx", "columns", first, c, s.ffn), dx,
                       dx_ref.middleCols(first, c), {kTol, 0});
        checks.compare(rank, shard("dW", "rows", first, c, s.ffn), dw, dw_ref.middleRows(first, c),
                       {kTol, 0});
        checks.compare(rank, "db", db, db_ref, {kTol, 0});
      }
      std::printf("row-parallel backward n=%td in=%td out=%td t=%d: max error %.3g\n", s.n, s.ffn,
                  s.hidden, t, checks.largest());
      INFO("n = " << s.n << ", in = " << s.ffn << ", out = " << s.hidden << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE("tensor-parallel FFN forward equals model::ffn_forward on one rank (t = 1, 2, 4)") {
  constexpr std::uint64_t seed = 42;
  for (const Shape& s : kShapes) {
    const FullFfn full = full_ffn_weights(s.hidden, s.ffn, seed);
    const MatrixRM x = random_matrix(s.n, s.hidden, 8);
    const Eigen::RowVectorXf no_bias;
    MatrixRM h(s.n, s.ffn), a(s.n, s.ffn), y_ref(s.n, s.hidden);
    model::ffn_forward(x, full.w1, no_bias, full.w2, no_bias, h, a, y_ref);
    for (int t : {1, 2, 4}) {
      const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& c) {
        TpFfn ffn = make_tp_ffn(r, tp, s.hidden, s.ffn, seed);
        MatrixRM y(s.n, s.hidden);
        tp_ffn_forward(r, tp, ffn, x, y);
        c.compare(r.id(), "y", y, y_ref, {kTol, 0});
      });
      std::printf("tp FFN forward n=%td h=%td f=%td t=%d: max error of y %.3g\n", s.n, s.hidden,
                  s.ffn, t, checks.largest());
      INFO("n = " << s.n << ", h = " << s.hidden << ", f = " << s.ffn << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE("tensor-parallel FFN equals model::ffn_forward/ffn_backward on one rank (t = 1, 2, 4)") {
  constexpr std::uint64_t seed = 42;
  for (const Shape& s : kShapes) {
    const FullFfn full = full_ffn_weights(s.hidden, s.ffn, seed);
    const MatrixRM x = random_matrix(s.n, s.hidden, 8), dy = random_matrix(s.n, s.hidden, 9);
    const FfnReference ref = ffn_reference(full, x, dy);
    for (int t : {1, 2, 4}) {
      const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& cs) {
        TpFfn ffn = make_tp_ffn(r, tp, s.hidden, s.ffn, seed);
        const Eigen::Index c = s.ffn / t, first = tp.rank() * c;
        const auto hsz = static_cast<std::size_t>(s.hidden), csz = static_cast<std::size_t>(c);
        MatrixRM y(s.n, s.hidden), dx(s.n, s.hidden);
        const TpFfnCache cache = tp_ffn_forward(r, tp, ffn, x, y);
        tp_ffn_backward(r, tp, ffn, x, cache, dy, dx);
        cs.compare(r.id(), "y", y, ref.y, {kTol, 0});
        cs.compare(r.id(), "dx", dx, ref.dx, {kTol, 0});
        cs.compare(r.id(), shard("dW1", "columns", first, c, s.ffn), as_matrix(ffn.dw1, hsz, csz),
                   ref.dw1.middleCols(first, c), {kTol, 0});
        cs.compare(r.id(), shard("dW2", "rows", first, c, s.ffn), as_matrix(ffn.dw2, csz, hsz),
                   ref.dw2.middleRows(first, c), {kTol, 0});
      });
      std::printf("tp FFN n=%td h=%td f=%td t=%d: max error of y, dx, dW1, dW2 %.3g\n", s.n,
                  s.hidden, s.ffn, t, checks.largest());
      INFO("n = " << s.n << ", h = " << s.hidden << ", f = " << s.ffn << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE("tensor-parallel FFN: one all-reduce of n*h floats forward, one backward, nothing else") {
  // n = s * b tokens of width h: each pass all-reduces the block's activation once.
  TransformerShape shape;
  shape.seq = 4;
  shape.micro_batch = 2;
  shape.hidden = 8;
  const Eigen::Index n = shape.seq * shape.micro_batch, h = shape.hidden, f = 4 * h;
  const MatrixRM x = random_matrix(n, h, 10), dy = random_matrix(n, h, 11);
  for (int t : {1, 2, 4}) {
    std::vector<TrafficCounts> fwd(static_cast<std::size_t>(2 * t)), bwd(fwd.size());
    std::vector<TrafficCounts> fwd_all(fwd.size()), bwd_all(fwd.size());
    Cluster cluster(2 * t);
    cluster.run([&](Rank& r) {
      Comm tp = tp_group(r, t);
      TpFfn ffn = make_tp_ffn(r, tp, h, f, 3);
      MatrixRM y(n, h), dx(n, h);
      const auto id = static_cast<std::size_t>(r.id());
      r.traffic().reset();
      const TpFfnCache cache = tp_ffn_forward(r, tp, ffn, x, y);
      fwd[id] = r.traffic().of(OpKind::all_reduce, "tp");
      fwd_all[id] = r.traffic().total();
      r.traffic().reset();
      tp_ffn_backward(r, tp, ffn, x, cache, dy, dx);
      bwd[id] = r.traffic().of(OpKind::all_reduce, "tp");
      bwd_all[id] = r.traffic().total();
    });
    // The formulas count two blocks per layer (attention and FFN); the FFN is one of them.
    const double per_pass = block_bytes_sent_per_rank(shape, t, 4.0, Pass::forward) /
                            static_cast<double>(all_reduces_per_block(Pass::forward));
    const double payload = all_reduce_payload_bytes(shape, 4.0);
    // A ring all-reduce over t ranks takes 2 (t - 1) steps, one message each.
    const auto ring_steps = static_cast<std::uint64_t>(2 * (t - 1));
    std::printf(
        "t=%d: forward sent %llu bytes in %llu messages, backward %llu in %llu; formula %.0f per "
        "pass "
        "(payload %.0f)\n",
        t, static_cast<unsigned long long>(fwd[0].bytes_sent),
        static_cast<unsigned long long>(fwd[0].messages_sent),
        static_cast<unsigned long long>(bwd[0].bytes_sent),
        static_cast<unsigned long long>(bwd[0].messages_sent), per_pass, payload);
    CHECK(payload == doctest::Approx(4.0 * static_cast<double>(n * h)));
    for (std::size_t i = 0; i < fwd.size(); ++i) {
      for (const TrafficCounts* c : {&fwd[i], &bwd[i]}) {
        CHECK(static_cast<double>(c->bytes_sent) == doctest::Approx(per_pass));
        CHECK(c->messages_sent == ring_steps);  // exactly one all-reduce
      }
      CHECK(fwd_all[i] == fwd[i]);  // no other communication
      CHECK(bwd_all[i] == bwd[i]);
    }
  }
}

TEST_CASE("the ledger holds 1/t of the FFN's weights and gradients per rank: ffn_params_per_rank") {
  const std::int64_t h = 12, f = 48;
  std::size_t previous = 0;
  for (int t : {1, 2, 4}) {
    Cluster cluster(t);
    cluster.run([&](Rank& r) {
      Comm tp = r.world().split(0, r.id(), "tp");
      TpFfn ffn = make_tp_ffn(r, tp, h, f, 5);
      MatrixRM x = random_matrix(3, h, 12), y(3, h), dx(3, h);
      const TpFfnCache cache = tp_ffn_forward(r, tp, ffn, x, y);
      tp_ffn_backward(r, tp, ffn, x, cache, y, dx);
    });
    const double want = 4.0 * ffn_params_per_rank(h, f, t);
    for (int r = 0; r < t; ++r) {
      const MemoryLedger& m = cluster.report(r).memory;
      if (r == 0)
        std::printf("t=%d: weights %zu bytes, grads %zu bytes per rank; formula %.0f\n", t,
                    m.peak(Category::weights), m.peak(Category::grads), want);
      CHECK(static_cast<double>(m.peak(Category::weights)) == want);
      CHECK(static_cast<double>(m.peak(Category::grads)) == want);
      CHECK(m.peak(Category::activations) > 0);  // the cache is counted too
    }
    if (previous != 0) CHECK(cluster.report(0).memory.peak(Category::weights) * 2 == previous);
    previous = cluster.report(0).memory.peak(Category::weights);
  }
}

TEST_CASE("attention split by heads: the forward equals model::attention_forward on one rank") {
  constexpr std::uint64_t seed = 17;
  const Eigen::Index batch = 2, seq = 3, h = 8, heads = 4, n = batch * seq;
  const FullAttention full = full_attention_weights(h, seed);
  const MatrixRM x = random_matrix(n, h, 13);
  MatrixRM q(n, h), k(n, h), v(n, h), o(n, h), p(batch * heads * seq, seq), y_ref(n, h);
  model::attention_forward(x, seq, heads, true, full.wq, full.wk, full.wv, full.wo, q, k, v, p, o,
                           y_ref);
  for (int t : {1, 2, 4}) {
    const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& c) {
      TpAttention attn = make_tp_attention(r, tp, h, heads, seed, true);
      MatrixRM y(n, h);
      tp_attention_forward(r, tp, attn, x, seq, y);
      c.compare(r.id(), "y", y, y_ref, {kTol, 0});
    });
    std::printf("tp attention forward n=%td seq=%td h=%td heads=%td t=%d: max error of y %.3g\n", n,
                seq, h, heads, t, checks.largest());
    INFO("t = " << t);
    checks.require();
  }
}

TEST_CASE(
    "attention split by heads equals model::attention_forward/backward, one all-reduce per pass") {
  struct AttnShape {
    Eigen::Index batch, seq, hidden, heads;
    bool causal;
  };
  constexpr std::uint64_t seed = 17;
  for (const AttnShape& s :
       {AttnShape{2, 3, 8, 4, true}, AttnShape{1, 5, 12, 4, false}, AttnShape{3, 1, 4, 4, true}}) {
    const Eigen::Index n = s.batch * s.seq, h = s.hidden, dh = h / s.heads;
    const FullAttention full = full_attention_weights(h, seed);
    const MatrixRM x = random_matrix(n, h, 13), dy = random_matrix(n, h, 14);
    const AttentionReference ref = attention_reference(full, x, dy, s.seq, s.heads, s.causal);
    for (int t : {1, 2, 4}) {
      mgpu_test::RankChecks checks(2 * t);
      std::vector<TrafficCounts> sent(static_cast<std::size_t>(2 * t));
      Cluster cluster(2 * t);
      cluster.run([&](Rank& r) {
        Comm tp = tp_group(r, t);
        TpAttention attn = make_tp_attention(r, tp, h, s.heads, seed, s.causal);
        MatrixRM y(n, h), dx(n, h);
        r.traffic().reset();
        const TpAttentionCache cache = tp_attention_forward(r, tp, attn, x, s.seq, y);
        tp_attention_backward(r, tp, attn, x, cache, dy, dx);
        const auto id = static_cast<std::size_t>(r.id());
        sent[id] = r.traffic().total();
        const int me = r.id();
        checks.compare(me, "y", y, ref.y, {kTol, 0});
        checks.compare(me, "dx", dx, ref.dx, {kTol, 0});
        compare_attention_weight_grads(checks, me, attn, ref, tp.rank(), t);
      });
      const double worst = checks.largest();
      std::printf(
          "tp attention n=%td seq=%td h=%td heads=%td (dh=%td) t=%d: max error %.3g, sent %llu "
          "bytes\n",
          n, s.seq, h, s.heads, dh, t, worst, static_cast<unsigned long long>(sent[0].bytes_sent));
      INFO("batch = " << s.batch << ", seq = " << s.seq << ", h = " << h << ", heads = " << s.heads
                      << ", t = " << t);
      checks.require();
      // Forward and backward: two all-reduces of n*h floats, and nothing else.
      const double ring = 2.0 * (t - 1) / t;
      for (const TrafficCounts& c : sent) {
        CHECK(static_cast<double>(c.bytes_sent) ==
              doctest::Approx(2 * ring * 4.0 * static_cast<double>(n * h)));
        CHECK(c.messages_sent == static_cast<std::uint64_t>(2 * 2 * (t - 1)));
        CHECK(c == sent[0]);
      }
    }
  }
}

TEST_CASE(
    "the ledger holds 1/t of the attention block's weights per rank: attention_params_per_rank") {
  const std::int64_t h = 16, heads = 4;
  for (int t : {1, 2, 4}) {
    Cluster cluster(t);
    cluster.run([&](Rank& r) {
      Comm tp = r.world().split(0, r.id(), "tp");
      TpAttention attn = make_tp_attention(r, tp, h, heads, 5);
    });
    const double want = 4.0 * attention_params_per_rank(h, heads, t);
    std::printf("t=%d: attention weights %zu bytes per rank; formula %.0f\n", t,
                cluster.report(0).memory.peak(Category::weights), want);
    for (int r = 0; r < t; ++r) {
      CHECK(static_cast<double>(cluster.report(r).memory.peak(Category::weights)) == want);
      CHECK(static_cast<double>(cluster.report(r).memory.peak(Category::grads)) == want);
    }
  }
  Cluster three(3);  // 3 does not divide 4 heads
  CHECK_THROWS_AS(three.run([&](Rank& r) { make_tp_attention(r, r.world(), h, heads, 1); }),
                  std::invalid_argument);
}

TEST_CASE("invalid arguments throw and name the problem") {
  Cluster cluster(4);
  CHECK_THROWS_AS(
      cluster.run([&](Rank& r) { make_tp_ffn(r, r.world(), 6, 10, 1); }),  // 4 does not divide 10
      std::invalid_argument);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) { make_tp_ffn(r, r.world(), 0, 8, 1); }),
                  std::invalid_argument);
  const MatrixRM x = random_matrix(3, 4, 1), w = random_matrix(5, 2, 2);
  MatrixRM y(3, 2);
  CHECK_THROWS_AS(column_parallel_forward(x, w, y),
                  std::invalid_argument);  // x has 4 columns, w 5 rows
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
    Comm tp = r.world();
    TpFfn ffn = make_tp_ffn(r, tp, 4, 8, 1);
    MatrixRM wrong(3, 5);
    tp_ffn_forward(r, tp, ffn, x, wrong);
  }),
                  std::invalid_argument);
}
