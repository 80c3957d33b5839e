// 11.4 visible tests of the sequence-parallel FFN: each rank holds n/t tokens outside the block;
// outputs and gradients against the unsplit course FFN on one rank, the all-gathers and
// reduce-scatters counted by the traffic meter against the all-reduce version's bytes, and the
// ledger's saved block input at n/t rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "11_4_tensor_parallel/formulas.hpp"
#include "11_4_tensor_parallel/tensor_parallel.hpp"
#include "helpers.hpp"

using namespace mgpu;
using namespace mgpu::tensor_parallel;

namespace {

using tp_test::kTol;
using tp_test::max_abs_diff;
using tp_test::random_matrix;
using tp_test::tp_group;

// Tokens per rank m (n = t m), h and f; f divisible by 1, 2 and 4.
struct Shape {
  Eigen::Index m, hidden, ffn;
};
constexpr Shape kShapes[] = {{1, 3, 4}, {2, 6, 12}, {3, 7, 20}};

}  // namespace

TEST_CASE("given token_rows: rank r holds rows [r n/t, (r + 1) n/t), and t must divide n") {
  CHECK(token_rows(12, 0, 4).first == 0);
  CHECK(token_rows(12, 3, 4).first == 9);
  CHECK(token_rows(12, 3, 4).count == 3);
  CHECK_THROWS_AS(token_rows(10, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(token_rows(8, 4, 4), std::invalid_argument);
}

TEST_CASE(
    "sequence-parallel FFN equals model::ffn_forward/ffn_backward on the tokens (t = 1, 2, 4)") {
  constexpr std::uint64_t seed = 7;
  for (const Shape& s : kShapes) {
    for (int t : {1, 2, 4}) {
      const Eigen::Index n = s.m * t;
      const FullFfn full = full_ffn_weights(s.hidden, s.ffn, seed);
      const MatrixRM x = random_matrix(n, s.hidden, 20), dy = random_matrix(n, s.hidden, 21);
      const Eigen::RowVectorXf no_bias;
      Eigen::RowVectorXf no_db1, no_db2;
      MatrixRM h(n, s.ffn), a(n, s.ffn), y_ref(n, s.hidden), dx_ref(n, s.hidden);
      MatrixRM dw1_ref = MatrixRM::Zero(s.hidden, s.ffn), dw2_ref = MatrixRM::Zero(s.ffn, s.hidden);
      model::ffn_forward(x, full.w1, no_bias, full.w2, no_bias, h, a, y_ref);
      model::ffn_backward(x, full.w1, full.w2, h, a, dy, dx_ref, dw1_ref, no_db1, dw2_ref, no_db2);
      std::vector<double> err(static_cast<std::size_t>(2 * t), 0.0);
      Cluster cluster(2 * t);
      cluster.run([&](Rank& r) {
        Comm tp = tp_group(r, t);
        TpFfn ffn = make_tp_ffn(r, tp, s.hidden, s.ffn, seed);
        const TokenRows mine = token_rows(n, tp.rank(), t);
        const Eigen::Index c = s.ffn / t, first = tp.rank() * c;
        const auto hs = static_cast<std::size_t>(s.hidden), cs = static_cast<std::size_t>(c);
        MatrixRM y(s.m, s.hidden), dx(s.m, s.hidden);
        const SpFfnCache cache =
            sp_ffn_forward(r, tp, ffn, x.middleRows(mine.first, mine.count), y);
        sp_ffn_backward(r, tp, ffn, cache, dy.middleRows(mine.first, mine.count), dx);
        err[static_cast<std::size_t>(r.id())] =
            std::max({max_abs_diff(y, y_ref.middleRows(mine.first, mine.count)),
                      max_abs_diff(dx, dx_ref.middleRows(mine.first, mine.count)),
                      max_abs_diff(as_matrix(ffn.dw1, hs, cs), dw1_ref.middleCols(first, c)),
                      max_abs_diff(as_matrix(ffn.dw2, cs, hs), dw2_ref.middleRows(first, c))});
      });
      const double worst = *std::max_element(err.begin(), err.end());
      std::printf("sp FFN n=%td h=%td f=%td t=%d: max error of y, dx, dW1, dW2 %.3g\n", n, s.hidden,
                  s.ffn, t, worst);
      CHECK(worst <= kTol);
    }
  }
}

TEST_CASE(
    "sequence-parallel FFN: forward sends one all-reduce's bytes (all-gather + reduce-scatter), "
    "backward that plus the re-gather of x") {
  TransformerShape shape;
  shape.seq = 4;
  shape.micro_batch = 2;
  shape.hidden = 8;
  const Eigen::Index n = shape.seq * shape.micro_batch, h = shape.hidden, f = 4 * h;
  const MatrixRM x = random_matrix(n, h, 10), dy = random_matrix(n, h, 11);
  for (int t : {1, 2, 4}) {
    const std::size_t ranks = static_cast<std::size_t>(2 * t);
    std::vector<TrafficCounts> fwd_ag(ranks), fwd_rs(ranks), fwd_all(ranks);
    std::vector<TrafficCounts> bwd_ag(ranks), bwd_rs(ranks), bwd_all(ranks);
    Cluster cluster(2 * t);
    cluster.run([&](Rank& r) {
      Comm tp = tp_group(r, t);
      TpFfn ffn = make_tp_ffn(r, tp, h, f, 3);
      const TokenRows mine = token_rows(n, tp.rank(), t);
      MatrixRM y(mine.count, h), dx(mine.count, h);
      const auto id = static_cast<std::size_t>(r.id());
      r.traffic().reset();
      const SpFfnCache cache = sp_ffn_forward(r, tp, ffn, x.middleRows(mine.first, mine.count), y);
      fwd_ag[id] = r.traffic().of(OpKind::all_gather, "tp");
      fwd_rs[id] = r.traffic().of(OpKind::reduce_scatter, "tp");
      fwd_all[id] = r.traffic().total();
      r.traffic().reset();
      sp_ffn_backward(r, tp, ffn, cache, dy.middleRows(mine.first, mine.count), dx);
      bwd_ag[id] = r.traffic().of(OpKind::all_gather, "tp");
      bwd_rs[id] = r.traffic().of(OpKind::reduce_scatter, "tp");
      bwd_all[id] = r.traffic().total();
    });
    // The plain tensor-parallel FFN's one all-reduce per pass (the block formula counts two).
    const double per_pass = block_bytes_sent_per_rank(shape, t, 4.0, Pass::forward) /
                            static_cast<double>(all_reduces_per_block(Pass::forward));
    const double half = per_pass / 2;  // one all-gather or one reduce-scatter of (n, h)
    const auto steps = static_cast<std::uint64_t>(t - 1);  // ring steps of either
    std::printf(
        "t=%d: sp forward sent %llu bytes, backward %llu; all-reduce version %.0f per pass\n", t,
        static_cast<unsigned long long>(fwd_all[0].bytes_sent),
        static_cast<unsigned long long>(bwd_all[0].bytes_sent), per_pass);
    for (std::size_t i = 0; i < ranks; ++i) {
      CHECK(static_cast<double>(fwd_all[i].bytes_sent) == doctest::Approx(per_pass));
      CHECK(static_cast<double>(fwd_ag[i].bytes_sent) == doctest::Approx(half));
      CHECK(static_cast<double>(fwd_rs[i].bytes_sent) == doctest::Approx(half));
      CHECK(fwd_ag[i].messages_sent == steps);       // exactly one all-gather
      CHECK(fwd_rs[i].messages_sent == steps);       // and one reduce-scatter
      CHECK(fwd_all[i].messages_sent == 2 * steps);  // and nothing else
      // Backward: dy gathered and dx reduce-scattered (one all-reduce's bytes), x gathered again.
      CHECK(static_cast<double>(bwd_all[i].bytes_sent) == doctest::Approx(per_pass + half));
      CHECK(static_cast<double>(bwd_ag[i].bytes_sent) == doctest::Approx(2 * half));
      CHECK(static_cast<double>(bwd_rs[i].bytes_sent) == doctest::Approx(half));
      CHECK(bwd_ag[i].messages_sent == 2 * steps);
      CHECK(bwd_rs[i].messages_sent == steps);
      CHECK(bwd_all[i].messages_sent == 3 * steps);
    }
  }
}

TEST_CASE("sequence-parallel FFN saves the block input as n/t rows per rank, not n") {
  const Eigen::Index n = 8, h = 6, f = 12;
  const MatrixRM x = random_matrix(n, h, 30), dy = random_matrix(n, h, 31);
  for (int t : {1, 2, 4}) {
    const auto fs = static_cast<std::size_t>(f / t);
    std::vector<std::size_t> saved(static_cast<std::size_t>(t)), cache_x(saved.size());
    Cluster cluster(t);
    cluster.run([&](Rank& r) {
      Comm tp = r.world().split(0, r.id(), "tp");
      TpFfn ffn = make_tp_ffn(r, tp, h, f, 5);
      const TokenRows mine = token_rows(n, tp.rank(), t);
      MatrixRM y(mine.count, h), dx(mine.count, h);
      const SpFfnCache cache = sp_ffn_forward(r, tp, ffn, x.middleRows(mine.first, mine.count), y);
      // What stays between the passes: the cache, nothing gathered.
      saved[static_cast<std::size_t>(r.id())] = r.memory().current(Category::activations);
      cache_x[static_cast<std::size_t>(r.id())] = cache.x_shard.size();
      CHECK(r.memory().current(Category::comm) == 0);  // the gathered x is gone
      sp_ffn_backward(r, tp, ffn, cache, dy.middleRows(mine.first, mine.count), dx);
    });
    const std::size_t x_shard = static_cast<std::size_t>(n / t * h);
    const std::size_t want = 4 * (x_shard + 2 * static_cast<std::size_t>(n) * fs);
    std::printf("t=%d: saved activations %zu bytes per rank (x shard %zu bytes, h and a %zu)\n", t,
                saved[0], 4 * x_shard, 4 * 2 * static_cast<std::size_t>(n) * fs);
    for (std::size_t i = 0; i < saved.size(); ++i) {
      CHECK(cache_x[i] == x_shard);
      CHECK(saved[i] == want);
    }
  }
}

TEST_CASE("sequence-parallel FFN rejects t not dividing the tokens and shards of the wrong shape") {
  Cluster cluster(2);
  // Every rank holds n/t tokens, so a shard cannot be cut from n = 5 at t = 2.
  CHECK_THROWS_AS(token_rows(5, 0, 2), std::invalid_argument);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
    TpFfn ffn = make_tp_ffn(r, r.world(), 4, 8, 1);
    MatrixRM xs = random_matrix(2, 5, 1), ys(2, 4);  // 5 columns, hidden is 4
    sp_ffn_forward(r, r.world(), ffn, xs, ys);
  }),
                  std::invalid_argument);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
    TpFfn ffn = make_tp_ffn(r, r.world(), 4, 8, 1);
    MatrixRM xs = random_matrix(2, 4, 1), ys(2, 4), dys(3, 4), dxs(2, 4);  // dy: 3 rows, not 2
    const SpFfnCache cache = sp_ffn_forward(r, r.world(), ffn, xs, ys);
    sp_ffn_backward(r, r.world(), ffn, cache, dys, dxs);
  }),
                  std::invalid_argument);
}
