// The model's hand-written backward passes against central finite differences of their forward
// passes, for every layer and loss. Small shapes, fp32, relative tolerance; each check prints its
// error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <vector>

#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"

using namespace mgpu::model;

namespace {

MatrixRM random_matrix(Rng& rng, int rows, int cols, double stddev = 1.0) {
  MatrixRM m(rows, cols);
  rng.fill_normal(std::span<float>(m.data(), static_cast<std::size_t>(m.size())), stddev);
  return m;
}

// Relative error of an analytic gradient against central differences of loss() over the entries of
// x.
double fd_relative_error(MatrixRM& x, const MatrixRM& analytic, const std::function<double()>& loss,
                         float h = 1e-2f) {
  double num = 0.0, den = 0.0;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const float keep = x.data()[i];
    x.data()[i] = keep + h;
    const double up = loss();
    x.data()[i] = keep - h;
    const double down = loss();
    x.data()[i] = keep;
    const double fd = (up - down) / (2.0 * h);
    num = std::max(num, std::abs(fd - analytic.data()[i]));
    den = std::max(den, std::abs(fd));
  }
  return num / std::max(den, 1e-12);
}

constexpr double kTol = 2e-3;  // fp32 central differences with h = 1e-2 land near 1e-4

}  // namespace

TEST_CASE("linear backward matches finite differences") {
  Rng rng(1);
  MatrixRM x = random_matrix(rng, 5, 4), w = random_matrix(rng, 4, 3), r = random_matrix(rng, 5, 3);
  MatrixRM bm = random_matrix(rng, 1, 3);
  auto loss = [&] {
    MatrixRM y(5, 3);
    linear_forward(x, w, bm.row(0), y);
    return static_cast<double>((y.array() * r.array()).sum());
  };
  MatrixRM dx(5, 4), dw = MatrixRM::Zero(4, 3);
  Eigen::RowVectorXf db = Eigen::RowVectorXf::Zero(3);
  linear_backward(x, w, r, dx, dw, db);
  MatrixRM dbm = db;
  const double ex = fd_relative_error(x, dx, loss), ew = fd_relative_error(w, dw, loss),
               eb = fd_relative_error(bm, dbm, loss);
  std::printf("linear: rel err dx %.2e dw %.2e db %.2e\n", ex, ew, eb);
  CHECK(ex < kTol);
  CHECK(ew < kTol);
  CHECK(eb < kTol);
}

TEST_CASE("FFN backward (with GELU) matches finite differences") {
  Rng rng(2);
  const int n = 6, d = 4, f = 8;
  MatrixRM x = random_matrix(rng, n, d), w1 = random_matrix(rng, d, f, 0.5),
           w2 = random_matrix(rng, f, d, 0.5);
  MatrixRM b1 = random_matrix(rng, 1, f, 0.1), b2 = random_matrix(rng, 1, d, 0.1),
           r = random_matrix(rng, n, d);
  MatrixRM h(n, f), a(n, f), y(n, d);
  auto loss = [&] {
    ffn_forward(x, w1, b1.row(0), w2, b2.row(0), h, a, y);
    return static_cast<double>((y.array() * r.array()).sum());
  };
  loss();
  MatrixRM dx(n, d), dw1 = MatrixRM::Zero(d, f), dw2 = MatrixRM::Zero(f, d);
  Eigen::RowVectorXf db1 = Eigen::RowVectorXf::Zero(f), db2 = Eigen::RowVectorXf::Zero(d);
  ffn_backward(x, w1, w2, h, a, r, dx, dw1, db1, dw2, db2);
  MatrixRM db1m = db1, db2m = db2;
  const double e[] = {fd_relative_error(x, dx, loss), fd_relative_error(w1, dw1, loss),
                      fd_relative_error(b1, db1m, loss), fd_relative_error(w2, dw2, loss),
                      fd_relative_error(b2, db2m, loss)};
  std::printf("ffn: rel err dx %.2e dw1 %.2e db1 %.2e dw2 %.2e db2 %.2e\n", e[0], e[1], e[2], e[3],
              e[4]);
  for (double err : e) CHECK(err < kTol);
}

TEST_CASE("attention backward matches finite differences, causal and not") {
  for (bool causal : {false, true}) {
    Rng rng(causal ? 4 : 3);
    const int seq = 4, batch = 2, n = seq * batch, d = 6, heads = 2, hd = 6;
    MatrixRM x = random_matrix(rng, n, d), wq = random_matrix(rng, d, hd, 0.5),
             wk = random_matrix(rng, d, hd, 0.5), wv = random_matrix(rng, d, hd, 0.5),
             wo = random_matrix(rng, hd, d, 0.5), r = random_matrix(rng, n, d);
    MatrixRM q(n, hd), k(n, hd), v(n, hd), p(batch * heads * seq, seq), o(n, hd), y(n, d);
    auto loss = [&] {
      attention_forward(x, seq, heads, causal, wq, wk, wv, wo, q, k, v, p, o, y);
      return static_cast<double>((y.array() * r.array()).sum());
    };
    loss();
    MatrixRM dx(n, d), dwq = MatrixRM::Zero(d, hd), dwk = MatrixRM::Zero(d, hd),
                       dwv = MatrixRM::Zero(d, hd), dwo = MatrixRM::Zero(hd, d);
    attention_backward(x, seq, heads, wq, wk, wv, wo, q, k, v, p, o, r, dx, dwq, dwk, dwv, dwo);
    const double e[] = {fd_relative_error(x, dx, loss), fd_relative_error(wq, dwq, loss),
                        fd_relative_error(wk, dwk, loss), fd_relative_error(wv, dwv, loss),
                        fd_relative_error(wo, dwo, loss)};
    std::printf("attention (causal=%d): rel err dx %.2e dwq %.2e dwk %.2e dwv %.2e dwo %.2e\n",
                causal, e[0], e[1], e[2], e[3], e[4]);
    for (double err : e) CHECK(err < kTol);
  }
}

TEST_CASE("the attention core rerun from q, k, v gives the saved p and o bit for bit") {
  // What selective recomputation relies on: the core is a function of q, k, v alone.
  Rng rng(6);
  const int seq = 5, batch = 2, n = seq * batch, d = 8, heads = 2;
  MatrixRM x = random_matrix(rng, n, d), wq = random_matrix(rng, d, d),
           wk = random_matrix(rng, d, d), wv = random_matrix(rng, d, d),
           wo = random_matrix(rng, d, d);
  MatrixRM q(n, d), k(n, d), v(n, d), p(batch * heads * seq, seq), o(n, d), y(n, d);
  attention_forward(x, seq, heads, true, wq, wk, wv, wo, q, k, v, p, o, y);
  MatrixRM p2(batch * heads * seq, seq), o2(n, d);
  attention_core_forward(q, k, v, seq, heads, true, p2, o2);
  CHECK(p2 == p);
  CHECK(o2 == o);
  CHECK(attention_core_flops(n, seq, d) == 4.0 * n * seq * d);
  CHECK(attention_flops(n, seq, d, d) ==
        4.0 * linear_flops(n, d, d) + attention_core_flops(n, seq, d));
  MatrixRM bad(n + 1, d);
  CHECK_THROWS_AS(attention_core_forward(q, k, bad, seq, heads, true, p2, o2),
                  std::invalid_argument);
}

TEST_CASE("each backward split into its input and weight halves gives the fused bits") {
  // A tiny shape (coefficient-wise products) and a wider one (blocked products); the weight
  // gradients start away from zero, so accumulation (+=) is what is compared.
  for (const bool wide : {false, true}) {
    Rng rng(wide ? 21 : 20);
    const int seq = wide ? 8 : 3, batch = 2, n = batch * seq, d = wide ? 32 : 8, f = wide ? 96 : 12,
              heads = wide ? 4 : 2;
    const MatrixRM x = random_matrix(rng, n, d), dy = random_matrix(rng, n, d);
    const auto start = [&](int rows, int cols) { return random_matrix(rng, rows, cols, 0.1); };
    CAPTURE(wide);

    // linear
    const MatrixRM w = random_matrix(rng, d, f), dyl = random_matrix(rng, n, f);
    const MatrixRM dw0 = start(d, f), db0 = start(1, f);
    MatrixRM dx(n, d), dw = dw0, dx2(n, d), dw2 = dw0;
    Eigen::RowVectorXf db = db0.row(0), db2 = db0.row(0);
    linear_backward(x, w, dyl, dx, dw, db);
    linear_backward_input(w, dyl, dx2);
    linear_backward_weight(x, dyl, dw2, db2);
    CHECK(dx2 == dx);
    CHECK(dw2 == dw);
    CHECK(db2 == db);

    // FFN
    const MatrixRM w1 = random_matrix(rng, d, f), w2 = random_matrix(rng, f, d);
    const MatrixRM b1 = random_matrix(rng, 1, f), b2 = random_matrix(rng, 1, d);
    MatrixRM h(n, f), a(n, f), y(n, d);
    ffn_forward(x, w1, b1.row(0), w2, b2.row(0), h, a, y);
    const MatrixRM dw1_0 = start(d, f), dw2_0 = start(f, d), db1_0 = start(1, f),
                   db2_0 = start(1, d);
    MatrixRM fdx(n, d), fdw1 = dw1_0, fdw2 = dw2_0, sdx(n, d), sdh(n, f), sdw1 = dw1_0,
                        sdw2 = dw2_0;
    Eigen::RowVectorXf fdb1 = db1_0.row(0), fdb2 = db2_0.row(0), sdb1 = fdb1, sdb2 = fdb2;
    ffn_backward(x, w1, w2, h, a, dy, fdx, fdw1, fdb1, fdw2, fdb2);
    ffn_backward_input(w1, w2, h, dy, sdh, sdx);
    ffn_backward_weight(x, a, dy, sdh, sdw1, sdb1, sdw2, sdb2);
    CHECK(sdx == fdx);
    CHECK(sdw1 == fdw1);
    CHECK(sdb1 == fdb1);
    CHECK(sdw2 == fdw2);
    CHECK(sdb2 == fdb2);

    // attention
    const MatrixRM wq = random_matrix(rng, d, d), wk = random_matrix(rng, d, d),
                   wv = random_matrix(rng, d, d), wo = random_matrix(rng, d, d);
    MatrixRM q(n, d), k(n, d), v(n, d), p(batch * heads * seq, seq), o(n, d), ya(n, d);
    attention_forward(x, seq, heads, !wide, wq, wk, wv, wo, q, k, v, p, o, ya);
    const MatrixRM g0 = start(d, d);
    MatrixRM adx(n, d), adwq = g0, adwk = g0, adwv = g0, adwo = g0;
    attention_backward(x, seq, heads, wq, wk, wv, wo, q, k, v, p, o, dy, adx, adwq, adwk, adwv,
                       adwo);
    MatrixRM bdx(n, d), dq(n, d), dk(n, d), dv(n, d), bdwq = g0, bdwk = g0, bdwv = g0, bdwo = g0;
    attention_backward_input(seq, heads, wq, wk, wv, wo, q, k, v, p, dy, dq, dk, dv, bdx);
    attention_backward_weight(x, o, dy, dq, dk, dv, bdwq, bdwk, bdwv, bdwo);
    CHECK(bdx == adx);
    CHECK(bdwq == adwq);
    CHECK(bdwk == adwk);
    CHECK(bdwv == adwv);
    CHECK(bdwo == adwo);
    MatrixRM wrong(n + 1, d);
    CHECK_THROWS_AS(
        attention_backward_input(seq, heads, wq, wk, wv, wo, q, k, v, p, wrong, dq, dk, dv, bdx),
        std::invalid_argument);
    CHECK_THROWS_AS(attention_backward_weight(x, o, wrong, dq, dk, dv, bdwq, bdwk, bdwv, bdwo),
                    std::invalid_argument);
    MatrixRM bad_dw(f, d);
    CHECK_THROWS_AS(linear_backward_weight(x, dyl, bad_dw, db2), std::invalid_argument);
  }
}

TEST_CASE("causal attention: a token's output does not depend on later tokens") {
  Rng rng(5);
  const int seq = 5, n = seq, d = 4, heads = 2;
  MatrixRM x = random_matrix(rng, n, d), wq = random_matrix(rng, d, d),
           wk = random_matrix(rng, d, d), wv = random_matrix(rng, d, d),
           wo = random_matrix(rng, d, d);
  MatrixRM q(n, d), k(n, d), v(n, d), p(heads * seq, seq), o(n, d), y1(n, d), y2(n, d);
  attention_forward(x, seq, heads, true, wq, wk, wv, wo, q, k, v, p, o, y1);
  x.row(seq - 1).setConstant(7.0f);  // change only the last token
  attention_forward(x, seq, heads, true, wq, wk, wv, wo, q, k, v, p, o, y2);
  CHECK((y1.topRows(seq - 1) - y2.topRows(seq - 1)).cwiseAbs().maxCoeff() == 0.0f);
  CHECK((y1.row(seq - 1) - y2.row(seq - 1)).cwiseAbs().maxCoeff() > 0.0f);
}

TEST_CASE("layer norm backward matches finite differences, and a block of rows is those rows") {
  Rng rng(9);
  const int n = 5, d = 6;
  MatrixRM x = random_matrix(rng, n, d), r = random_matrix(rng, n, d);
  MatrixRM gm = random_matrix(rng, 1, d, 0.5), bm = random_matrix(rng, 1, d, 0.5);
  gm.array() += 1.0f;
  MatrixRM xhat(n, d), y(n, d);
  Eigen::RowVectorXf rstd(n);
  auto loss = [&] {
    layer_norm_forward(x, gm.row(0), bm.row(0), 1e-5f, xhat, rstd, y);
    return static_cast<double>((y.array() * r.array()).sum());
  };
  loss();
  MatrixRM dx(n, d);
  Eigen::RowVectorXf dg = Eigen::RowVectorXf::Zero(d), db = Eigen::RowVectorXf::Zero(d);
  layer_norm_backward(xhat, rstd, gm.row(0), r, dx, dg, db);
  MatrixRM dgm = dg, dbm = db;
  const double e[] = {fd_relative_error(x, dx, loss), fd_relative_error(gm, dgm, loss),
                      fd_relative_error(bm, dbm, loss)};
  std::printf("layer norm: rel err dx %.2e dgamma %.2e dbeta %.2e\n", e[0], e[1], e[2]);
  for (double err : e) CHECK(err < kTol);
  // Rows never mix: rows [2, 5) alone give rows [2, 5) of the whole, bit for bit.
  loss();
  MatrixRM part_hat(3, d), part_y(3, d);
  Eigen::RowVectorXf part_rstd(3);
  layer_norm_forward(x.middleRows(2, 3), gm.row(0), bm.row(0), 1e-5f, part_hat, part_rstd, part_y);
  CHECK(part_y == y.middleRows(2, 3));
  CHECK(part_rstd == rstd.segment(2, 3));
  CHECK_THROWS_AS(layer_norm_forward(x, gm.row(0), bm.row(0), 0.0f, xhat, rstd, y),
                  std::invalid_argument);
}

TEST_CASE("MSE and cross-entropy gradients match finite differences") {
  Rng rng(6);
  MatrixRM y = random_matrix(rng, 4, 3), t = random_matrix(rng, 4, 3), dy(4, 3);
  mse_backward(y, t, dy);
  const double e_mse = fd_relative_error(y, dy, [&] { return mse_forward(y, t); });
  std::vector<std::int32_t> labels = {0, 2, 1, 2};
  MatrixRM logits = random_matrix(rng, 4, 3), dl(4, 3);
  cross_entropy_backward(logits, labels, dl);
  const double e_ce =
      fd_relative_error(logits, dl, [&] { return cross_entropy_forward(logits, labels); });
  std::printf("losses: rel err mse %.2e cross-entropy %.2e\n", e_mse, e_ce);
  CHECK(e_mse < kTol);
  CHECK(e_ce < kTol);
  std::vector<std::int32_t> bad = {0, 3, 1, 2};
  CHECK_THROWS_AS(cross_entropy_forward(logits, bad), std::out_of_range);
}

TEST_CASE("the generator gives the same stream for the same seed and moments near N(0, 1)") {
  Rng a(42), b(42), c(43);
  std::vector<float> va(20000), vb(20000), vc(20000);
  a.fill_normal(va, 1.0);
  b.fill_normal(vb, 1.0);
  c.fill_normal(vc, 1.0);
  CHECK(va == vb);
  CHECK(va != vc);
  double mean = 0, sq = 0;
  for (float x : va) mean += x, sq += double(x) * x;
  mean /= va.size();
  const double var = sq / va.size() - mean * mean;
  std::printf("normal: mean %.4f variance %.4f over %zu samples\n", mean, var, va.size());
  CHECK(std::abs(mean) < 0.03);
  CHECK(std::abs(var - 1.0) < 0.05);
}
