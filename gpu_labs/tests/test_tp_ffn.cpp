// Tests of the tp_ffn lab: the float64 reference (GELU, gradients by finite differences, the
// column/row split identity) on the host, and on a GPU the GELU kernels, the row-major GEMM
// helper and the tensor-parallel FFN against the reference.
#include "common/gemm.hpp"
#include "common/lab_main.hpp"
#include "common/report.hpp"
#include "device.hpp"
#include "tp_ffn/gelu.hpp"
#include "tp_ffn/lab.hpp"
#include "tp_ffn/reference.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace mgpu::gpu;
using mgpu::Category;
using mgpu::MemoryLedger;

TEST_CASE("gelu reference: zero at zero, identity far right, zero far left, derivative matches") {
  CHECK(gelu_ref(0.0) == 0.0);
  CHECK(gelu_ref(10.0) == doctest::Approx(10.0));
  CHECK(std::abs(gelu_ref(-10.0)) < 1e-12);
  double worst = 0.0;
  for (double x = -5.0; x <= 5.0; x += 0.37) {
    const double h = 1e-5, fd = (gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h);
    worst = std::max(worst, std::abs(fd - gelu_grad_ref(x)));
  }
  MESSAGE("gelu' max error vs finite differences " << worst);
  CHECK(worst < 1e-8);
}

TEST_CASE("ffn reference gradients match finite differences of <y, dy>") {
  const FfnProblem p = make_problem({3, 4, 8}, 5);
  auto objective = [&](const MatD& x, const MatD& w1, const MatD& w2) {
    MatD h(3, 8), y(3, 4);
    ffn_forward_ref(x, w1, w2, h, y);
    return y.cwiseProduct(p.dy).sum();
  };
  double worst = 0.0;
  const double eps = 1e-6;
  auto probe = [&](MatD m, const MatD& grad, int which) {
    for (Eigen::Index i = 0; i < m.size(); ++i) {
      MatD plus = m, minus = m;
      plus.data()[i] += eps;
      minus.data()[i] -= eps;
      const double fd =
          which == 0   ? (objective(plus, p.w1, p.w2) - objective(minus, p.w1, p.w2)) / (2 * eps)
          : which == 1 ? (objective(p.x, plus, p.w2) - objective(p.x, minus, p.w2)) / (2 * eps)
                       : (objective(p.x, p.w1, plus) - objective(p.x, p.w1, minus)) / (2 * eps);
      worst = std::max(worst, std::abs(fd - grad.data()[i]));
    }
  };
  probe(p.x, p.dx, 0);
  probe(p.w1, p.dw1, 1);
  probe(p.w2, p.dw2, 2);
  MESSAGE("max gradient error vs finite differences " << worst);
  CHECK(worst < 1e-6);
}

TEST_CASE("splitting W1 by columns and W2 by rows gives partial outputs that sum to y") {
  const FfnProblem p = make_problem({5, 8, 32}, 9);
  for (int t : {1, 2, 4}) {
    const int fl = 32 / t;
    MatD sum_y = MatD::Zero(5, 8), sum_dx = MatD::Zero(5, 8);
    double dw_err = 0.0;
    for (int r = 0; r < t; ++r) {
      const MatD w1 = column_block(p.w1, r * fl, fl), w2 = row_block(p.w2, r * fl, fl);
      MatD h(5, fl), y(5, 8), dx(5, 8), dw1(8, fl), dw2(fl, 8);
      ffn_forward_ref(p.x, w1, w2, h, y);
      ffn_backward_ref(p.x, w1, w2, p.dy, dx, dw1, dw2);
      sum_y += y;
      sum_dx += dx;
      // The weight gradients of a block are the block of the full weight gradients: no sum.
      dw_err = std::max({dw_err, (dw1 - column_block(p.dw1, r * fl, fl)).cwiseAbs().maxCoeff(),
                         (dw2 - row_block(p.dw2, r * fl, fl)).cwiseAbs().maxCoeff()});
    }
    CHECK((sum_y - p.y).cwiseAbs().maxCoeff() < 1e-12);
    CHECK((sum_dx - p.dx).cwiseAbs().maxCoeff() < 1e-12);
    CHECK(dw_err < 1e-12);
  }
}

TEST_CASE("bf16 bits round-trip exactly for bf16 values and the FLOP count is 6 GEMMs") {
  const MatD m = random_bf16_matrix(7, 3, 2.0, 1);
  CHECK(from_bf16_bits(to_bf16_bits(m), 7, 3) == m);
  CHECK(ffn_step_flops({2, 3, 8}, 2) == doctest::Approx(6 * 2.0 * 2 * 3 * 4));
  CHECK_THROWS_AS(validate_shape({4, 4, 10}, 4, "check"), std::invalid_argument);
}

TEST_CASE("a default hidden width is fitted to a rank count that does not divide it") {
  for (int t : {1, 2, 3, 4, 5, 6, 7, 8}) {
    for (int f : {1024, 16384}) {
      const int fitted = fit_hidden_to_ranks(f, t);
      CHECK(fitted <= f);
      CHECK(fitted % t == 0);
      if (f % t != 0) CHECK((fitted / t) % 8 == 0);
      CHECK(fitted > f - 8 * t);  // the largest that fits
      CHECK_NOTHROW(validate_shape({256, 256, fitted}, t, "check"));
    }
  }
  CHECK(fit_hidden_to_ranks(16384, 3) == 16368);
  CHECK(fit_hidden_to_ranks(16384, 4) == 16384);
  CHECK_THROWS_AS(fit_hidden_to_ranks(10, 3), std::invalid_argument);
}

MGPU_DEVICE_TEST_CASE("gelu kernels match the float64 reference within bf16 rounding") {
  MGPU_REQUIRE_DEVICE();
  DeviceCluster({1, Backend::emulated}).run([](DeviceComm& c) {
    const MatD h = random_bf16_matrix(1, 4096, 3.0, 3), da = random_bf16_matrix(1, 4096, 1.0, 4);
    DeviceBuffer<bf16> dh(c.ledger(), Category::activations, 4096),
        dda(c.ledger(), Category::activations, 4096), out(c.ledger(), Category::activations, 4096);
    const auto hb = to_bf16_bits(h), dab = to_bf16_bits(da);
    dh.upload_raw(hb.data(), hb.size() * 2, c.stream());
    dda.upload_raw(dab.data(), dab.size() * 2, c.stream());
    gelu_forward(dh.data(), out.data(), 4096, c.stream());
    std::vector<std::uint16_t> bits(4096);
    out.download_raw(bits.data(), c.stream());
    const MatD a = from_bf16_bits(bits, 1, 4096);
    gelu_backward(dh.data(), dda.data(), dda.data(), 4096, c.stream());  // in place
    dda.download_raw(bits.data(), c.stream());
    const MatD g = from_bf16_bits(bits, 1, 4096);
    double ea = 0, eg = 0;
    for (int i = 0; i < 4096; ++i) {
      const double x = h(0, i);
      ea = worse_error(ea, std::abs(a(0, i) - gelu_ref(x)) / std::max(1.0, std::abs(gelu_ref(x))));
      eg = worse_error(
          eg, std::abs(g(0, i) - da(0, i) * gelu_grad_ref(x)) / std::max(1.0, std::abs(da(0, i))));
    }
    MESSAGE("gelu forward err " << ea << ", backward err " << eg);
    CHECK(ea < 1e-2);
    CHECK(eg < 1e-2);
  });
}

MGPU_DEVICE_TEST_CASE("row-major gemm helper matches Eigen for every transpose combination") {
  MGPU_REQUIRE_DEVICE();
  DeviceCluster({1, Backend::emulated}).run([](DeviceComm& c) {
    CublasHandle cublas(c.stream());
    const int M = 24, N = 40, K = 16;
    for (Trans ta : {Trans::no, Trans::yes}) {
      for (Trans tb : {Trans::no, Trans::yes}) {
        const MatD A =
            ta == Trans::no ? random_bf16_matrix(M, K, 1, 1) : random_bf16_matrix(K, M, 1, 1);
        const MatD B =
            tb == Trans::no ? random_bf16_matrix(K, N, 1, 2) : random_bf16_matrix(N, K, 1, 2);
        const MatD want = (ta == Trans::no ? A : MatD(A.transpose())) *
                          (tb == Trans::no ? B : MatD(B.transpose()));
        DeviceBuffer<bf16> a(c.ledger(), Category::activations, static_cast<std::size_t>(A.size())),
            b(c.ledger(), Category::activations, static_cast<std::size_t>(B.size()));
        DeviceBuffer<float> out(c.ledger(), Category::activations, static_cast<std::size_t>(M * N));
        const auto ab = to_bf16_bits(A), bb = to_bf16_bits(B);
        a.upload_raw(ab.data(), ab.size() * 2, c.stream());
        b.upload_raw(bb.data(), bb.size() * 2, c.stream());
        gemm(cublas.get(), ta, tb, M, N, K, a.data(), b.data(), out.data(), DType::f32);
        const std::vector<float> got = out.download(c.stream());
        std::vector<double> g(got.begin(), got.end()), w(want.data(), want.data() + want.size());
        const double e = scaled_max_error(g, w);
        MESSAGE("gemm transA=" << (ta == Trans::yes) << " transB=" << (tb == Trans::yes) << " err "
                               << e);
        CHECK(e < 1e-5);  // bf16-exact inputs, fp32 accumulation: only fp32 rounding remains
      }
    }
  });
}

MGPU_DEVICE_TEST_CASE("tensor-parallel FFN on 2 emulated ranks matches the float64 reference") {
  MGPU_REQUIRE_DEVICE();
  const FfnProblem problem = make_problem({64, 64, 256}, 11);
  DeviceCluster cluster({2, Backend::emulated});
  double err = 0.0;
  for (const FfnRankResult& r : run_ranks(cluster, [&](DeviceComm& c) {
         return tp_ffn_rank(c, problem, {64, 64, 256}, 0, 1);
       })) {
    err = worse_error(err, r.err);
  }
  MESSAGE("tp_ffn max rel error " << err);
  CHECK(err < 2e-2);
}
