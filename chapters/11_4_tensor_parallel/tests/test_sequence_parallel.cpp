// 11.4 visible tests of the sequence-parallel FFN, attention and layer norm: each rank holds n/t
// tokens outside the block; outputs and gradients against the unsplit course layers on one rank
// (with sequences cut across ranks), the all-gathers and reduce-scatters counted by the traffic
// meter against the all-reduce version's bytes, and the ledger's saved activations at n/t rows.
#include <doctest/doctest.h>

#include <algorithm>
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

// Tokens per rank m (n = t m), h and f; f divisible by 1, 2 and 4.
struct Shape {
  Eigen::Index m, hidden, ffn;
};
constexpr Shape kShapes[] = {{1, 3, 4}, {2, 6, 12}, {3, 7, 20}};

// What one rank sent during one pass: its all-gathers and reduce-scatters on the "tp" group, and
// everything.
struct PassSent {
  TrafficCounts all_gather, reduce_scatter, total;
};

// What rank r sent since its traffic meter was last reset; resets it for the next pass.
PassSent take_sent(Rank& r) {
  const PassSent sent{r.traffic().of(OpKind::all_gather, "tp"),
                      r.traffic().of(OpKind::reduce_scatter, "tp"), r.traffic().total()};
  r.traffic().reset();
  return sent;
}

// Checks a sequence-parallel layer's sends, rank by rank, against the plain tensor-parallel
// layer's one all-reduce per pass at t: the forward sends exactly one all-gather and one
// reduce-scatter of (n, h), together that all-reduce's bytes; the backward gathers dy and
// reduce-scatters dx (the same again) and gathers x once more.
void check_sp_sends(const TransformerShape& shape, int t, const std::vector<PassSent>& fwd,
                    const std::vector<PassSent>& bwd, const char* layer) {
  // The block formula counts two all-reduces per pass, one per layer.
  const double per_pass = block_bytes_sent_per_rank(shape, t, 4.0, Pass::forward) /
                          static_cast<double>(all_reduces_per_block(Pass::forward));
  const double half = per_pass / 2;  // one all-gather or one reduce-scatter of (n, h)
  const auto steps = static_cast<std::uint64_t>(t - 1);  // ring steps of either
  std::printf(
      "t=%d: sp %s forward sent %llu bytes, backward %llu; all-reduce version %.0f per "
      "pass\n",
      t, layer, static_cast<unsigned long long>(fwd[0].total.bytes_sent),
      static_cast<unsigned long long>(bwd[0].total.bytes_sent), per_pass);
  for (std::size_t i = 0; i < fwd.size(); ++i) {
    CAPTURE(i);
    CHECK(static_cast<double>(fwd[i].total.bytes_sent) == doctest::Approx(per_pass));
    CHECK(static_cast<double>(fwd[i].all_gather.bytes_sent) == doctest::Approx(half));
    CHECK(static_cast<double>(fwd[i].reduce_scatter.bytes_sent) == doctest::Approx(half));
    CHECK(fwd[i].all_gather.messages_sent == steps);      // exactly one all-gather
    CHECK(fwd[i].reduce_scatter.messages_sent == steps);  // and one reduce-scatter
    CHECK(fwd[i].total.messages_sent == 2 * steps);       // and nothing else
    CHECK(static_cast<double>(bwd[i].total.bytes_sent) == doctest::Approx(per_pass + half));
    CHECK(static_cast<double>(bwd[i].all_gather.bytes_sent) == doctest::Approx(2 * half));
    CHECK(static_cast<double>(bwd[i].reduce_scatter.bytes_sent) == doctest::Approx(half));
    CHECK(bwd[i].all_gather.messages_sent == 2 * steps);
    CHECK(bwd[i].reduce_scatter.messages_sent == steps);
    CHECK(bwd[i].total.messages_sent == 3 * steps);
  }
}

// The shape of the sends tests: two sequences of 4 tokens of width 8.
TransformerShape sends_shape() {
  TransformerShape shape;
  shape.seq = 4;
  shape.micro_batch = 2;
  shape.hidden = 8;
  return shape;
}

// Runs a sequence-parallel layer on two t-rank groups for t = 1, 2, 4, on x and dy of
// sends_shape() drawn from x_seed and x_seed + 1, and checks each pass's sends (check_sp_sends).
// `make(r, tp, h)` builds a rank's layer; `passes(r, tp, layer, xs, dys, y, dx, forward_done)`
// runs its forward on the rank's rows xs into y, calls forward_done(), then runs its backward.
template <class Make, class Passes>
void check_layer_sends(const char* layer, std::uint64_t x_seed, Make make, Passes passes) {
  const TransformerShape shape = sends_shape();
  const Eigen::Index n = shape.seq * shape.micro_batch, h = shape.hidden;
  const MatrixRM x = random_matrix(n, h, x_seed), dy = random_matrix(n, h, x_seed + 1);
  for (int t : {1, 2, 4}) {
    const std::size_t ranks = static_cast<std::size_t>(2 * t);
    std::vector<PassSent> fwd(ranks), bwd(ranks);
    Cluster cluster(2 * t);
    cluster.run([&](Rank& r) {
      Comm tp = tp_group(r, t);
      auto built = make(r, tp, h);
      const TokenRows mine = token_rows(n, tp.rank(), t);
      MatrixRM y(mine.count, h), dx(mine.count, h);
      const auto id = static_cast<std::size_t>(r.id());
      r.traffic().reset();
      passes(r, tp, built, x.middleRows(mine.first, mine.count),
             dy.middleRows(mine.first, mine.count), y, dx, [&] { fwd[id] = take_sent(r); });
      bwd[id] = take_sent(r);
    });
    check_sp_sends(shape, t, fwd, bwd, layer);
  }
}

}  // namespace

TEST_CASE("given token_rows: rank r holds rows r n/t up to (r + 1) n/t, and t must divide n") {
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
      const FfnReference ref = ffn_reference(full, x, dy);
      const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& cs) {
        TpFfn ffn = make_tp_ffn(r, tp, s.hidden, s.ffn, seed);
        const TokenRows mine = token_rows(n, tp.rank(), t);
        const Eigen::Index c = s.ffn / t, first = tp.rank() * c;
        const auto hsz = static_cast<std::size_t>(s.hidden), csz = static_cast<std::size_t>(c);
        MatrixRM y(s.m, s.hidden), dx(s.m, s.hidden);
        const SpFfnCache cache =
            sp_ffn_forward(r, tp, ffn, x.middleRows(mine.first, mine.count), y);
        sp_ffn_backward(r, tp, ffn, cache, dy.middleRows(mine.first, mine.count), dx);
        cs.compare(r.id(), shard("y", "token rows", mine.first, mine.count, n), y,
                   ref.y.middleRows(mine.first, mine.count), {kTol, 0});
        cs.compare(r.id(), shard("dx", "token rows", mine.first, mine.count, n), dx,
                   ref.dx.middleRows(mine.first, mine.count), {kTol, 0});
        cs.compare(r.id(), shard("dW1", "columns", first, c, s.ffn), as_matrix(ffn.dw1, hsz, csz),
                   ref.dw1.middleCols(first, c), {kTol, 0});
        cs.compare(r.id(), shard("dW2", "rows", first, c, s.ffn), as_matrix(ffn.dw2, csz, hsz),
                   ref.dw2.middleRows(first, c), {kTol, 0});
      });
      std::printf("sp FFN n=%td h=%td f=%td t=%d: max error of y, dx, dW1, dW2 %.3g\n", n, s.hidden,
                  s.ffn, t, checks.largest());
      INFO("n = " << n << ", h = " << s.hidden << ", f = " << s.ffn << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE(
    "sequence-parallel FFN: forward sends one all-reduce's bytes (all-gather + reduce-scatter), "
    "backward that plus the re-gather of x") {
  check_layer_sends(
      "FFN", 10, [](Rank& r, Comm& tp, Eigen::Index h) { return make_tp_ffn(r, tp, h, 4 * h, 3); },
      [](Rank& r, Comm& tp, TpFfn& ffn, MatIn xs, MatIn dys, MatrixRM& y, MatrixRM& dx,
         auto&& forward_done) {
        const SpFfnCache cache = sp_ffn_forward(r, tp, ffn, xs, y);
        forward_done();
        sp_ffn_backward(r, tp, ffn, cache, dys, dx);
      });
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

// ------------------------------------------------------------------------------ attention

namespace {

// batch sequences of seq tokens, split t ways by token rows; heads divisible by 1, 2 and 4.
struct SpAttnShape {
  Eigen::Index batch, seq, hidden, heads;
  bool causal;
};

}  // namespace

TEST_CASE(
    "sequence-parallel attention equals model::attention_forward/backward on the tokens "
    "(t = 1, 2, 4), with sequences cut across ranks") {
  constexpr std::uint64_t seed = 23;
  // One sequence of 8 (every rank holds a slice of its positions), two of 4 (at t = 4 each spans
  // two ranks), four of 3 (at t = 4 each shard of 3 rows ends inside a sequence).
  for (const SpAttnShape& s : {SpAttnShape{1, 8, 8, 4, true}, SpAttnShape{2, 4, 12, 4, false},
                               SpAttnShape{4, 3, 8, 4, true}}) {
    const Eigen::Index n = s.batch * s.seq, h = s.hidden;
    const FullAttention full = full_attention_weights(h, seed);
    const MatrixRM x = random_matrix(n, h, 40), dy = random_matrix(n, h, 41);
    const AttentionReference ref = attention_reference(full, x, dy, s.seq, s.heads, s.causal);
    for (int t : {1, 2, 4}) {
      const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& cs) {
        TpAttention attn = make_tp_attention(r, tp, h, s.heads, seed, s.causal);
        const TokenRows mine = token_rows(n, tp.rank(), t);
        MatrixRM y(mine.count, h), dx(mine.count, h);
        const SpAttentionCache cache =
            sp_attention_forward(r, tp, attn, x.middleRows(mine.first, mine.count), s.seq, y);
        sp_attention_backward(r, tp, attn, cache, dy.middleRows(mine.first, mine.count), dx);
        const int me = r.id();
        cs.compare(me, shard("y", "token rows", mine.first, mine.count, n), y,
                   ref.y.middleRows(mine.first, mine.count), {kTol, 0});
        cs.compare(me, shard("dx", "token rows", mine.first, mine.count, n), dx,
                   ref.dx.middleRows(mine.first, mine.count), {kTol, 0});
        compare_attention_weight_grads(cs, me, attn, ref, tp.rank(), t);
      });
      const double worst = checks.largest();
      std::printf(
          "sp attention batch=%td seq=%td h=%td heads=%td t=%d (%td tokens per rank): max error "
          "of y, dx, dWq, dWk, dWv, dWo %.3g\n",
          s.batch, s.seq, h, s.heads, t, n / t, worst);
      INFO("batch = " << s.batch << ", seq = " << s.seq << ", h = " << h << ", heads = " << s.heads
                      << ", t = " << t);
      checks.require();
    }
  }
}

TEST_CASE(
    "sequence-parallel attention: forward sends one all-reduce's bytes (all-gather + "
    "reduce-scatter), backward that plus the re-gather of x") {
  check_layer_sends(
      "attention", 42,
      [](Rank& r, Comm& tp, Eigen::Index h) {
        return make_tp_attention(r, tp, h, 4, 3);
      },  // 4 heads
      [](Rank& r, Comm& tp, TpAttention& attn, MatIn xs, MatIn dys, MatrixRM& y, MatrixRM& dx,
         auto&& forward_done) {
        const SpAttentionCache cache = sp_attention_forward(r, tp, attn, xs, sends_shape().seq, y);
        forward_done();
        sp_attention_backward(r, tp, attn, cache, dys, dx);
      });
}

TEST_CASE("sequence-parallel attention saves the block input as n/t rows per rank, not n") {
  // Two sequences of 4 tokens, h = 8, 4 heads: every saved tensor is 1/t per rank.
  const Eigen::Index batch = 2, seq = 4, n = batch * seq, h = 8, heads = 4;
  const MatrixRM x = random_matrix(n, h, 44), dy = random_matrix(n, h, 45);
  for (int t : {1, 2, 4}) {
    std::vector<std::size_t> saved(static_cast<std::size_t>(t)), cache_x(saved.size());
    Cluster cluster(t);
    cluster.run([&](Rank& r) {
      Comm tp = r.world().split(0, r.id(), "tp");
      TpAttention attn = make_tp_attention(r, tp, h, heads, 5);
      const TokenRows mine = token_rows(n, tp.rank(), t);
      MatrixRM y(mine.count, h), dx(mine.count, h);
      const SpAttentionCache cache =
          sp_attention_forward(r, tp, attn, x.middleRows(mine.first, mine.count), seq, y);
      // What stays between the passes: the cache, nothing gathered.
      saved[static_cast<std::size_t>(r.id())] = r.memory().current(Category::activations);
      cache_x[static_cast<std::size_t>(r.id())] = cache.x_shard.size();
      CHECK(r.memory().current(Category::comm) == 0);  // the gathered x and partial y are gone
      sp_attention_backward(r, tp, attn, cache, dy.middleRows(mine.first, mine.count), dx);
    });
    const auto x_shard = static_cast<std::size_t>(n / t * h);
    // q, k, v, o: (n, h/t) each; p: one row of seq scores per query and local head.
    const auto qkvo = static_cast<std::size_t>(4 * n * (h / t));
    const auto probs = static_cast<std::size_t>(n * (heads / t) * seq);
    const std::size_t want = 4 * (x_shard + qkvo + probs);
    std::printf("t=%d: sp attention saves %zu bytes per rank (x shard %zu, q k v o %zu, p %zu)\n",
                t, saved[0], 4 * x_shard, 4 * qkvo, 4 * probs);
    for (std::size_t i = 0; i < saved.size(); ++i) {
      CHECK(cache_x[i] == x_shard);
      CHECK(saved[i] == want);
    }
  }
}

TEST_CASE(
    "sequence-parallel attention rejects seq not dividing the gathered tokens and shards of the "
    "wrong shape") {
  Cluster cluster(2);
  auto run = [&](Eigen::Index rows, Eigen::Index cols, std::int64_t seq) {
    cluster.run([&](Rank& r) {
      TpAttention attn = make_tp_attention(r, r.world(), 4, 2, 1);
      MatrixRM xs = random_matrix(rows, cols, 1), ys(rows, 4);
      sp_attention_forward(r, r.world(), attn, xs, seq, ys);
    });
  };
  // Shards of 3 rows at t = 2, 6 tokens in all: one sequence of 6 cut between the ranks and
  // sequences of 2 (the shards end inside one) are fine; seq = 4 does not divide the 6 tokens.
  CHECK_NOTHROW(run(3, 4, 6));
  CHECK_NOTHROW(run(3, 4, 2));
  CHECK_THROWS_AS(run(3, 4, 4), std::invalid_argument);
  CHECK_THROWS_AS(run(3, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(run(3, 5, 3), std::invalid_argument);  // 5 columns, hidden is 4
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
    TpAttention attn = make_tp_attention(r, r.world(), 4, 2, 1);
    MatrixRM xs = random_matrix(2, 4, 1), ys(2, 4), dys(3, 4), dxs(2, 4);  // dy: 3 rows, not 2
    const SpAttentionCache cache = sp_attention_forward(r, r.world(), attn, xs, 2, ys);
    sp_attention_backward(r, r.world(), attn, cache, dys, dxs);
  }),
                  std::invalid_argument);
}

// ------------------------------------------------------------------------------ layer norm

TEST_CASE(
    "sequence-parallel layer norm equals model::layer_norm_forward/backward on the tokens, saves "
    "n/t rows, and sums the gain and bias gradients over the group (t = 1, 2, 4)") {
  const Eigen::Index n = 8, h = 6;
  constexpr std::uint64_t seed = 31;
  // Two micro-batches: the gradients must accumulate, each one summed over the group once.
  const MatrixRM x[] = {random_matrix(n, h, 50), random_matrix(n, h, 51)};
  const MatrixRM dy[] = {random_matrix(n, h, 52), random_matrix(n, h, 53)};
  for (int t : {1, 2, 4}) {
    const std::size_t ranks = static_cast<std::size_t>(2 * t);
    mgpu_test::RankChecks checks(2 * t);
    std::vector<std::size_t> saved(ranks);
    std::vector<TrafficCounts> fwd(ranks), bwd(ranks);
    Cluster cluster(2 * t);
    cluster.run([&](Rank& r) {
      Comm tp = tp_group(r, t);
      SpLayerNorm ln = make_sp_layer_norm(r, h, seed);
      // The unsplit reference on one rank, from the same gain and bias.
      const Eigen::RowVectorXf gamma = row_vector(ln.gamma), beta = row_vector(ln.beta);
      Eigen::RowVectorXf dgamma_ref = Eigen::RowVectorXf::Zero(h), dbeta_ref = dgamma_ref;
      const TokenRows mine = token_rows(n, tp.rank(), t);
      const auto id = static_cast<std::size_t>(r.id());
      for (int mb = 0; mb < 2; ++mb) {
        MatrixRM xhat(n, h), y_ref(n, h), dx_ref(n, h);
        Eigen::RowVectorXf rstd(n);
        model::layer_norm_forward(x[mb], gamma, beta, kLayerNormEps, xhat, rstd, y_ref);
        model::layer_norm_backward(xhat, rstd, gamma, dy[mb], dx_ref, dgamma_ref, dbeta_ref);
        MatrixRM y(mine.count, h), dx(mine.count, h);
        r.traffic().reset();
        const SpLayerNormCache cache =
            sp_layer_norm_forward(r, tp, ln, x[mb].middleRows(mine.first, mine.count), y);
        fwd[id] = r.traffic().total();
        saved[id] = r.memory().current(Category::activations);
        r.traffic().reset();
        sp_layer_norm_backward(r, tp, ln, cache, dy[mb].middleRows(mine.first, mine.count), dx);
        bwd[id] = r.traffic().total();
        const std::string of_mb = " of micro-batch " + std::to_string(mb);
        checks.compare(r.id(), shard("y", "token rows", mine.first, mine.count, n) + of_mb, y,
                       y_ref.middleRows(mine.first, mine.count), {kTol, 0});
        checks.compare(r.id(), shard("dx", "token rows", mine.first, mine.count, n) + of_mb, dx,
                       dx_ref.middleRows(mine.first, mine.count), {kTol, 0});
      }
      checks.compare(r.id(), "dgamma (both micro-batches, summed over the group)",
                     row_vector(ln.dgamma), dgamma_ref, {kTol, 0});
      checks.compare(r.id(), "dbeta (both micro-batches, summed over the group)",
                     row_vector(ln.dbeta), dbeta_ref, {kTol, 0});
    });
    const double worst = checks.largest();
    // xhat (n/t, h) and rstd (n/t); plain tensor parallelism would keep all n rows on every rank.
    const auto want = static_cast<std::size_t>(4 * (n / t * h + n / t));
    const double ring = 2.0 * (t - 1) / t;
    std::printf(
        "sp layer norm t=%d: max error of y, dx, dgamma, dbeta %.3g; saves %zu bytes per rank; "
        "backward sends %llu bytes\n",
        t, worst, saved[0], static_cast<unsigned long long>(bwd[0].bytes_sent));
    INFO("t = " << t);
    checks.require();
    for (std::size_t i = 0; i < ranks; ++i) {
      CHECK(saved[i] == want);
      CHECK(fwd[i].bytes_sent == 0);  // rows never mix: nothing to send
      // One all-reduce of the 2h partial gradient sums, and nothing else.
      CHECK(static_cast<double>(bwd[i].bytes_sent) == doctest::Approx(ring * 4.0 * 2 * h));
      CHECK(bwd[i].messages_sent == static_cast<std::uint64_t>(2 * (t - 1)));
    }
  }
}

TEST_CASE(
    "the layer norm runs on the shard before the all-gather: sp_layer_norm then sp_attention "
    "equals the unsplit norm then attention") {
  const Eigen::Index batch = 1, seq = 8, n = batch * seq, h = 8, heads = 4;
  const MatrixRM x = random_matrix(n, h, 60), dy = random_matrix(n, h, 61);
  for (int t : {2, 4}) {
    const auto checks = compare_over_groups(t, [&](Rank& r, Comm& tp, mgpu_test::RankChecks& cs) {
      SpLayerNorm ln = make_sp_layer_norm(r, h, 7);
      TpAttention attn = make_tp_attention(r, tp, h, heads, 8);
      // Unsplit: layer norm, then attention, forward and back.
      const FullAttention full = full_attention_weights(h, 8);
      const Eigen::RowVectorXf gamma = row_vector(ln.gamma), beta = row_vector(ln.beta);
      MatrixRM xhat(n, h), a(n, h), q(n, h), k(n, h), v(n, h), o(n, h), p(batch * heads * seq, seq);
      MatrixRM y_ref(n, h), da(n, h), dx_ref(n, h);
      MatrixRM dwq = MatrixRM::Zero(h, h), dwk = dwq, dwv = dwq, dwo = dwq;
      Eigen::RowVectorXf rstd(n), dgamma = Eigen::RowVectorXf::Zero(h), dbeta = dgamma;
      model::layer_norm_forward(x, gamma, beta, kLayerNormEps, xhat, rstd, a);
      model::attention_forward(a, seq, heads, true, full.wq, full.wk, full.wv, full.wo, q, k, v, p,
                               o, y_ref);
      model::attention_backward(a, seq, heads, full.wq, full.wk, full.wv, full.wo, q, k, v, p, o,
                                dy, da, dwq, dwk, dwv, dwo);
      model::layer_norm_backward(xhat, rstd, gamma, da, dx_ref, dgamma, dbeta);
      // Split: the norm on this rank's tokens, its output is the attention's input shard.
      const TokenRows mine = token_rows(n, tp.rank(), t);
      MatrixRM as(mine.count, h), y(mine.count, h), das(mine.count, h), dx(mine.count, h);
      const SpLayerNormCache ln_cache =
          sp_layer_norm_forward(r, tp, ln, x.middleRows(mine.first, mine.count), as);
      const SpAttentionCache attn_cache = sp_attention_forward(r, tp, attn, as, seq, y);
      sp_attention_backward(r, tp, attn, attn_cache, dy.middleRows(mine.first, mine.count), das);
      sp_layer_norm_backward(r, tp, ln, ln_cache, das, dx);
      cs.compare(r.id(), shard("y", "token rows", mine.first, mine.count, n), y,
                 y_ref.middleRows(mine.first, mine.count), {kTol, 0});
      cs.compare(r.id(), shard("dx", "token rows", mine.first, mine.count, n), dx,
                 dx_ref.middleRows(mine.first, mine.count), {kTol, 0});
      cs.compare(r.id(), "dgamma", row_vector(ln.dgamma), dgamma, {kTol, 0});
      cs.compare(r.id(), "dbeta", row_vector(ln.dbeta), dbeta, {kTol, 0});
    });
    std::printf("sp layer norm + attention t=%d: max error of y, dx, dgamma, dbeta %.3g\n", t,
                checks.largest());
    INFO("t = " << t);
    checks.require();
  }
}

TEST_CASE("sequence-parallel layer norm rejects shards of the wrong shape") {
  Cluster cluster(2);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
    SpLayerNorm ln = make_sp_layer_norm(r, 4, 1);
    MatrixRM xs = random_matrix(2, 5, 1), ys(2, 4);  // 5 columns, hidden is 4
    sp_layer_norm_forward(r, r.world(), ln, xs, ys);
  }),
                  std::invalid_argument);
  CHECK_THROWS_AS(cluster.run([&](Rank& r) {
    SpLayerNorm ln = make_sp_layer_norm(r, 4, 1);
    MatrixRM xs = random_matrix(2, 4, 1), ys(2, 4), dys(3, 4), dxs(2, 4);  // dy: 3 rows, not 2
    const SpLayerNormCache cache = sp_layer_norm_forward(r, r.world(), ln, xs, ys);
    sp_layer_norm_backward(r, r.world(), ln, cache, dys, dxs);
  }),
                  std::invalid_argument);
}
