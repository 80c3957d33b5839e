// Lab tp_ffn, harness: float64 reference FFN and the bf16 data helpers.
#include "tp_ffn/reference.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace mgpu::gpu {

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;

std::uint16_t bits_of(Eigen::bfloat16 b) { return Eigen::numext::bit_cast<std::uint16_t>(b); }
}  // namespace

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
}

double gelu_grad_ref(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
}

void ffn_forward_ref(const Eigen::Ref<const MatD>& x, const Eigen::Ref<const MatD>& w1,
                     const Eigen::Ref<const MatD>& w2, Eigen::Ref<MatD> h, Eigen::Ref<MatD> y) {
  h = x * w1;                       // (B, f)
  y = h.unaryExpr(&gelu_ref) * w2;  // (B, d)
}

void ffn_backward_ref(const Eigen::Ref<const MatD>& x, const Eigen::Ref<const MatD>& w1,
                      const Eigen::Ref<const MatD>& w2, const Eigen::Ref<const MatD>& dy,
                      Eigen::Ref<MatD> dx, Eigen::Ref<MatD> dw1, Eigen::Ref<MatD> dw2) {
  const MatD h = x * w1;                                                            // (B, f)
  dw2 = h.unaryExpr(&gelu_ref).transpose() * dy;                                    // (f, d)
  const MatD dh = (dy * w2.transpose()).cwiseProduct(h.unaryExpr(&gelu_grad_ref));  // (B, f)
  dw1 = x.transpose() * dh;                                                         // (d, f)
  dx = dh * w1.transpose();                                                         // (B, d)
}

MatD random_bf16_matrix(int rows, int cols, double stddev, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  MatD m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    m.data()[i] =
        static_cast<double>(static_cast<float>(Eigen::bfloat16(static_cast<float>(dist(gen)))));
  }
  return m;
}

MatD column_block(const MatD& m, int c0, int n) {
  if (c0 < 0 || n < 0 || c0 + n > m.cols()) {
    throw std::out_of_range("column_block [" + std::to_string(c0) + ", " + std::to_string(c0 + n) +
                            ") of a matrix with " + std::to_string(m.cols()) + " columns");
  }
  return m.middleCols(c0, n);
}

MatD row_block(const MatD& m, int r0, int n) {
  if (r0 < 0 || n < 0 || r0 + n > m.rows()) {
    throw std::out_of_range("row_block [" + std::to_string(r0) + ", " + std::to_string(r0 + n) +
                            ") of a matrix with " + std::to_string(m.rows()) + " rows");
  }
  return m.middleRows(r0, n);
}

std::vector<std::uint16_t> to_bf16_bits(const MatD& m) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    out[static_cast<std::size_t>(i)] = bits_of(Eigen::bfloat16(static_cast<float>(m.data()[i])));
  }
  return out;
}

MatD from_bf16_bits(const std::vector<std::uint16_t>& bits, int rows, int cols) {
  if (bits.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols)) {
    throw std::invalid_argument("from_bf16_bits: " + std::to_string(bits.size()) +
                                " values for a (" + std::to_string(rows) + ", " +
                                std::to_string(cols) + ") matrix");
  }
  MatD m(rows, cols);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const auto b = Eigen::numext::bit_cast<Eigen::bfloat16>(bits[i]);
    m.data()[i] = static_cast<double>(static_cast<float>(b));
  }
  return m;
}

}  // namespace mgpu::gpu
