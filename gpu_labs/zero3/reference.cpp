// Lab zero3, harness: float64 Adam and the linear stack's loss and gradient (Eigen).
#include "zero3/reference.hpp"

#include <Eigen/Core>

#include <cmath>
#include <stdexcept>
#include <string>

namespace mgpu::gpu {

void adam_step_ref(std::vector<double>& master, std::vector<double>& m, std::vector<double>& v,
                   const std::vector<double>& grad, const AdamConfig& cfg, int step) {
  if (m.size() != master.size() || v.size() != master.size() || grad.size() != master.size()) {
    throw std::invalid_argument("adam_step_ref: master, m, v and grad must have the same length");
  }
  const double b1 = cfg.beta1, b2 = cfg.beta2;
  const double c1 = 1.0 - std::pow(b1, step), c2 = 1.0 - std::pow(b2, step);
  for (std::size_t i = 0; i < master.size(); ++i) {
    m[i] = b1 * m[i] + (1.0 - b1) * grad[i];
    v[i] = b2 * v[i] + (1.0 - b2) * grad[i] * grad[i];
    master[i] -= cfg.lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + cfg.eps);
  }
}

double linear_stack_loss_grad(const std::vector<double>& weights, const std::vector<double>& x,
                              const std::vector<double>& target, int layers, int d, int rows,
                              std::vector<double>& grad) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat>;
  const std::size_t dd = static_cast<std::size_t>(d) * static_cast<std::size_t>(d);
  if (weights.size() != dd * static_cast<std::size_t>(layers) ||
      x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(d) ||
      target.size() != x.size()) {
    throw std::invalid_argument(
        "linear_stack_loss_grad: sizes do not match layers=" + std::to_string(layers) +
        " d=" + std::to_string(d) + " rows=" + std::to_string(rows));
  }
  std::vector<Mat> acts{CMap(x.data(), rows, d)};  // acts[l] feeds layer l
  for (int l = 0; l < layers; ++l)
    acts.push_back(acts.back() * CMap(weights.data() + l * dd, d, d));
  const Mat err = acts.back() - CMap(target.data(), rows, d);
  const double loss = 0.5 * err.squaredNorm() / rows;
  grad.assign(weights.size(), 0.0);
  Mat dy = err / rows;  // (rows, d)
  for (int l = layers - 1; l >= 0; --l) {
    Eigen::Map<Mat>(grad.data() + l * dd, d, d) =
        acts[static_cast<std::size_t>(l)].transpose() * dy;
    dy = (dy * CMap(weights.data() + l * dd, d, d).transpose()).eval();
  }
  return loss;
}

}  // namespace mgpu::gpu
