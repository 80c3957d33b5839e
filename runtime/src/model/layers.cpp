// Forward and backward of the course model's layers (see mgpu/model/layers.hpp).
// Plain Eigen on caller-owned buffers; the backward passes follow the chain rule written out in
// the comments so a reader can check each line against the maths.
#include "mgpu/model/layers.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace mgpu::model {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

std::string shape(const MatIn& m) {
  // Appended piece by piece: GCC 12 at -O3 warns falsely (-Wrestrict) on "literal" + std::string.
  std::string s = "(";
  s += std::to_string(m.rows());
  s += ", ";
  s += std::to_string(m.cols());
  s += ')';
  return s;
}

}  // namespace

// ------------------------------------------------------------------------------------ FLOP counts
double linear_flops(std::int64_t n, std::int64_t in, std::int64_t out) {
  return 2.0 * static_cast<double>(n) * static_cast<double>(in) * static_cast<double>(out);
}

double ffn_flops(std::int64_t n, std::int64_t d, std::int64_t f) {
  return linear_flops(n, d, f) + linear_flops(n, f, d);
}

double attention_flops(std::int64_t n, std::int64_t seq, std::int64_t d, std::int64_t hd) {
  // Q, K, V and output projections, then scores Q K^T and the weighted sum P V: each of the last
  // two is 2*seq*seq*dh per sequence and head, i.e. 2*n*seq*hd in total.
  return 4.0 * linear_flops(n, d, hd) + attention_core_flops(n, seq, hd);
}

double attention_core_flops(std::int64_t n, std::int64_t seq, std::int64_t hd) {
  return 2.0 * linear_flops(n, seq, hd);
}

// ------------------------------------------------------------------------------------ linear
void linear_forward(MatIn x, MatIn w, VecIn b, MatOut y) {
  require(x.cols() == w.rows() && y.rows() == x.rows() && y.cols() == w.cols() &&
              (b.size() == 0 || b.size() == w.cols()),
          "linear_forward: x " + shape(x) + ", w " + shape(w) + ", y " + shape(y) +
              " do not fit y = x w");
  y.noalias() = x * w;
  if (b.size() != 0) y.rowwise() += b;
}

void linear_backward(MatIn x, MatIn w, MatIn dy, MatOut dx, MatOut dw, VecOut db) {
  require(dy.rows() == x.rows() && dy.cols() == w.cols() && dw.rows() == w.rows() &&
              dw.cols() == w.cols(),
          "linear_backward: x " + shape(x) + ", w " + shape(w) + ", dy " + shape(dy) + ", dw " +
              shape(dw) + " do not fit y = x w");
  // y = x W + b  =>  dW = x^T dy, db = sum over rows of dy, dx = dy W^T.
  dw.noalias() += x.transpose() * dy;
  if (db.size() != 0) db += dy.colwise().sum();
  if (dx.size() != 0) dx.noalias() = dy * w.transpose();
}

// The two halves below repeat linear_backward's expressions one for one, so a backward split into
// them (zero-bubble pipelines) gives the fused backward's bits; the tests compare the two.
void linear_backward_input(MatIn w, MatIn dy, MatOut dx) {
  require(dy.cols() == w.cols() && dx.rows() == dy.rows() && dx.cols() == w.rows(),
          "linear_backward_input: w " + shape(w) + ", dy " + shape(dy) + ", dx " + shape(dx) +
              " do not fit dx = dy w^T");
  dx.noalias() = dy * w.transpose();
}

void linear_backward_weight(MatIn x, MatIn dy, MatOut dw, VecOut db) {
  require(dy.rows() == x.rows() && dw.rows() == x.cols() && dw.cols() == dy.cols() &&
              (db.size() == 0 || db.size() == dy.cols()),
          "linear_backward_weight: x " + shape(x) + ", dy " + shape(dy) + ", dw " + shape(dw) +
              " do not fit dw += x^T dy");
  dw.noalias() += x.transpose() * dy;
  if (db.size() != 0) db += dy.colwise().sum();
}

// ------------------------------------------------------------------------------------ GELU
namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;
}  // namespace

void gelu_forward(MatIn h, MatOut a) {
  require(h.rows() == a.rows() && h.cols() == a.cols(),
          "gelu_forward: h " + shape(h) + " vs a " + shape(a));
  a = h.unaryExpr(
      [](float z) { return 0.5f * z * (1.0f + std::tanh(kGeluC * (z + kGeluA * z * z * z))); });
}

void gelu_backward(MatIn h, MatIn da, MatOut dh) {
  require(h.rows() == da.rows() && h.cols() == da.cols() && dh.rows() == h.rows() &&
              dh.cols() == h.cols(),
          "gelu_backward: h " + shape(h) + ", da " + shape(da) + ", dh " + shape(dh) + " differ");
  dh = h.binaryExpr(da, [](float z, float g) {
    const float t = std::tanh(kGeluC * (z + kGeluA * z * z * z));
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * z * z);
    return g * (0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * du);
  });
}

// ------------------------------------------------------------------------------------ FFN
void ffn_forward(MatIn x, MatIn w1, VecIn b1, MatIn w2, VecIn b2, MatOut h, MatOut a, MatOut y) {
  linear_forward(x, w1, b1, h);  // (n, f)
  gelu_forward(h, a);            // (n, f)
  linear_forward(a, w2, b2, y);  // (n, d)
}

void ffn_backward(MatIn x, MatIn w1, MatIn w2, MatIn h, MatIn a, MatIn dy, MatOut dx, MatOut dw1,
                  VecOut db1, MatOut dw2, VecOut db2) {
  MatrixRM da(a.rows(), a.cols());  // (n, f)
  linear_backward(a, w2, dy, da, dw2, db2);
  MatrixRM dh(h.rows(), h.cols());  // (n, f)
  gelu_backward(h, da, dh);
  linear_backward(x, w1, dh, dx, dw1, db1);
}

void ffn_backward_input(MatIn w1, MatIn w2, MatIn h, MatIn dy, MatOut dh, MatOut dx) {
  require(h.cols() == w1.cols() && w2.rows() == w1.cols() && dh.rows() == h.rows() &&
              dh.cols() == h.cols() && dy.rows() == h.rows(),
          "ffn_backward_input: w1 " + shape(w1) + ", w2 " + shape(w2) + ", h " + shape(h) +
              ", dy " + shape(dy) + ", dh " + shape(dh) + " do not fit");
  MatrixRM da(h.rows(), h.cols());  // (n, f), only the input half needs it
  linear_backward_input(w2, dy, da);
  gelu_backward(h, da, dh);
  linear_backward_input(w1, dh, dx);
}

void ffn_backward_weight(MatIn x, MatIn a, MatIn dy, MatIn dh, MatOut dw1, VecOut db1, MatOut dw2,
                         VecOut db2) {
  linear_backward_weight(a, dy, dw2, db2);
  linear_backward_weight(x, dh, dw1, db1);
}

// ------------------------------------------------------------------------------------ attention
namespace {

struct AttnShape {
  std::int64_t n, d, hd, seq, heads, dh, batch;
};

AttnShape attention_shape(MatIn x, std::int64_t seq, std::int64_t heads, MatIn wq, MatIn wk,
                          MatIn wv, MatIn wo) {
  AttnShape s{x.rows(), x.cols(), wq.cols(), seq, heads, 0, 0};
  require(seq > 0 && s.n % seq == 0, "attention: " + std::to_string(s.n) +
                                         " tokens is not a whole number of sequences of length " +
                                         std::to_string(seq));
  require(heads > 0 && s.hd % heads == 0, "attention: inner width " + std::to_string(s.hd) +
                                              " does not split into " + std::to_string(heads) +
                                              " heads");
  require(wq.rows() == s.d && wk.rows() == s.d && wv.rows() == s.d && wk.cols() == s.hd &&
              wv.cols() == s.hd && wo.rows() == s.hd && wo.cols() == s.d,
          "attention: x " + shape(x) + " with wq " + shape(wq) + ", wk " + shape(wk) + ", wv " +
              shape(wv) + ", wo " + shape(wo) +
              ": expected (d, hd) projections and a (hd, d) output");
  s.dh = s.hd / heads;
  s.batch = s.n / seq;
  return s;
}

// Checks the core's shapes and returns (batch, dh).
std::pair<std::int64_t, std::int64_t> core_shape(const char* who, MatIn q, MatIn k, MatIn v,
                                                 std::int64_t seq, std::int64_t heads) {
  const std::int64_t n = q.rows(), hd = q.cols();
  require(seq > 0 && n % seq == 0, std::string(who) + ": " + std::to_string(n) +
                                       " tokens is not a whole number of sequences of length " +
                                       std::to_string(seq));
  require(heads > 0 && hd % heads == 0, std::string(who) + ": inner width " + std::to_string(hd) +
                                            " does not split into " + std::to_string(heads) +
                                            " heads");
  require(k.rows() == n && k.cols() == hd && v.rows() == n && v.cols() == hd,
          std::string(who) + ": q " + shape(q) + ", k " + shape(k) + ", v " + shape(v) + " differ");
  return {n / seq, hd / heads};
}

}  // namespace

void attention_core_forward(MatIn q, MatIn k, MatIn v, std::int64_t seq, std::int64_t heads,
                            bool causal, MatOut p, MatOut o) {
  const auto [batch, dh] = core_shape("attention_core_forward", q, k, v, seq, heads);
  require(p.rows() == batch * heads * seq && p.cols() == seq,
          "attention_core_forward: p is " + shape(p) + ", expected (batch*heads*seq, seq)");
  require(o.rows() == q.rows() && o.cols() == q.cols(),
          "attention_core_forward: o is " + shape(o) + ", expected " + shape(q));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t j = 0; j < heads; ++j) {
      auto qb = q.block(b * seq, j * dh, seq, dh);  // (seq, dh)
      auto kb = k.block(b * seq, j * dh, seq, dh);
      auto vb = v.block(b * seq, j * dh, seq, dh);
      auto pb = p.block((b * heads + j) * seq, 0, seq, seq);  // (seq, seq)
      pb.noalias() = (qb * kb.transpose()) * scale;
      for (std::int64_t r = 0; r < seq; ++r) {
        // A causal row r sees keys 0..r only; masked entries get probability exactly 0.
        const std::int64_t visible = causal ? r + 1 : seq;
        auto row = pb.row(r);
        const float mx = row.head(visible).maxCoeff();
        row.head(visible) = (row.head(visible).array() - mx).exp().matrix();
        row.head(visible) /= row.head(visible).sum();
        if (visible < seq) row.tail(seq - visible).setZero();
      }
      o.block(b * seq, j * dh, seq, dh).noalias() = pb * vb;
    }
  }
}

void attention_core_backward(MatIn q, MatIn k, MatIn v, MatIn p, MatIn d_o, std::int64_t seq,
                             std::int64_t heads, MatOut dq, MatOut dk, MatOut dv) {
  const auto [batch, dh] = core_shape("attention_core_backward", q, k, v, seq, heads);
  require(p.rows() == batch * heads * seq && p.cols() == seq && d_o.rows() == q.rows() &&
              d_o.cols() == q.cols(),
          "attention_core_backward: p " + shape(p) + ", d_o " + shape(d_o) + " do not fit q " +
              shape(q));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  MatrixRM dp(seq, seq);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t j = 0; j < heads; ++j) {
      const auto qb = q.block(b * seq, j * dh, seq, dh);
      const auto kb = k.block(b * seq, j * dh, seq, dh);
      const auto vb = v.block(b * seq, j * dh, seq, dh);
      const auto pb = p.block((b * heads + j) * seq, 0, seq, seq);
      const auto dob = d_o.block(b * seq, j * dh, seq, dh);
      // O = P V  =>  dV = P^T dO, dP = dO V^T.
      dv.block(b * seq, j * dh, seq, dh).noalias() = pb.transpose() * dob;
      dp.noalias() = dob * vb.transpose();
      // Softmax per row: dS = P * (dP - sum(P * dP)); masked entries have P = 0, so dS = 0 there.
      const Eigen::VectorXf rowdot = (pb.array() * dp.array()).rowwise().sum();
      dp = (pb.array() * (dp.array().colwise() - rowdot.array())).matrix();
      // S = Q K^T * scale  =>  dQ = dS K * scale, dK = dS^T Q * scale.
      dq.block(b * seq, j * dh, seq, dh).noalias() = (dp * kb) * scale;
      dk.block(b * seq, j * dh, seq, dh).noalias() = (dp.transpose() * qb) * scale;
    }
  }
}

void attention_forward(MatIn x, std::int64_t seq, std::int64_t heads, bool causal, MatIn wq,
                       MatIn wk, MatIn wv, MatIn wo, MatOut q, MatOut k, MatOut v, MatOut p,
                       MatOut o, MatOut y) {
  attention_shape(x, seq, heads, wq, wk, wv, wo);
  q.noalias() = x * wq;  // (n, hd)
  k.noalias() = x * wk;
  v.noalias() = x * wv;
  attention_core_forward(q, k, v, seq, heads, causal, p, o);
  y.noalias() = o * wo;  // (n, d)
}

void attention_backward(MatIn x, std::int64_t seq, std::int64_t heads, MatIn wq, MatIn wk, MatIn wv,
                        MatIn wo, MatIn q, MatIn k, MatIn v, MatIn p, MatIn o, MatIn dy, MatOut dx,
                        MatOut dwq, MatOut dwk, MatOut dwv, MatOut dwo) {
  const AttnShape s = attention_shape(x, seq, heads, wq, wk, wv, wo);
  dwo.noalias() += o.transpose() * dy;  // (hd, d)
  MatrixRM d_o = dy * wo.transpose();   // (n, hd)
  MatrixRM dq(s.n, s.hd), dk(s.n, s.hd), dv(s.n, s.hd);
  attention_core_backward(q, k, v, p, d_o, seq, heads, dq, dk, dv);
  dwq.noalias() += x.transpose() * dq;
  dwk.noalias() += x.transpose() * dk;
  dwv.noalias() += x.transpose() * dv;
  dx.noalias() = dq * wq.transpose();
  dx.noalias() += dk * wk.transpose();
  dx.noalias() += dv * wv.transpose();
}

void attention_backward_input(std::int64_t seq, std::int64_t heads, MatIn wq, MatIn wk, MatIn wv,
                              MatIn wo, MatIn q, MatIn k, MatIn v, MatIn p, MatIn dy, MatOut dq,
                              MatOut dk, MatOut dv, MatOut dx) {
  const std::int64_t n = q.rows(), d = wq.rows(), hd = wq.cols();
  require(wk.rows() == d && wv.rows() == d && wk.cols() == hd && wv.cols() == hd &&
              wo.rows() == hd && wo.cols() == d && q.cols() == hd && dy.rows() == n &&
              dy.cols() == d && dx.rows() == n && dx.cols() == d && dq.rows() == n &&
              dq.cols() == hd && dk.rows() == n && dk.cols() == hd && dv.rows() == n &&
              dv.cols() == hd,
          "attention_backward_input: wq " + shape(wq) + ", wo " + shape(wo) + ", q " + shape(q) +
              ", dy " + shape(dy) + ", dq " + shape(dq) + ", dx " + shape(dx) +
              ": expected (d, hd) projections, a (hd, d) output, (n, hd) q and dq, (n, d) dy, dx");
  MatrixRM d_o = dy * wo.transpose();  // (n, hd)
  attention_core_backward(q, k, v, p, d_o, seq, heads, dq, dk, dv);
  dx.noalias() = dq * wq.transpose();
  dx.noalias() += dk * wk.transpose();
  dx.noalias() += dv * wv.transpose();
}

void attention_backward_weight(MatIn x, MatIn o, MatIn dy, MatIn dq, MatIn dk, MatIn dv, MatOut dwq,
                               MatOut dwk, MatOut dwv, MatOut dwo) {
  const std::int64_t n = x.rows(), d = x.cols(), hd = o.cols();
  require(o.rows() == n && dy.rows() == n && dy.cols() == d && dq.rows() == n && dq.cols() == hd &&
              dk.rows() == n && dk.cols() == hd && dv.rows() == n && dv.cols() == hd &&
              dwq.rows() == d && dwq.cols() == hd && dwk.rows() == d && dwk.cols() == hd &&
              dwv.rows() == d && dwv.cols() == hd && dwo.rows() == hd && dwo.cols() == d,
          "attention_backward_weight: x " + shape(x) + ", o " + shape(o) + ", dy " + shape(dy) +
              ", dq " + shape(dq) + ", dwq " + shape(dwq) + ", dwo " + shape(dwo) +
              ": expected (n, d) x and dy, (n, hd) o and dq, (d, hd) and (hd, d) gradients");
  dwo.noalias() += o.transpose() * dy;  // (hd, d)
  dwq.noalias() += x.transpose() * dq;
  dwk.noalias() += x.transpose() * dk;
  dwv.noalias() += x.transpose() * dv;
}

// ------------------------------------------------------------------------------------ layer norm
void layer_norm_forward(MatIn x, VecIn gamma, VecIn beta, float eps, MatOut xhat, VecOut rstd,
                        MatOut y) {
  const Eigen::Index n = x.rows(), d = x.cols();
  require(gamma.size() == d && beta.size() == d && xhat.rows() == n && xhat.cols() == d &&
              rstd.size() == n && y.rows() == n && y.cols() == d,
          "layer_norm_forward: x " + shape(x) + ", gamma " + std::to_string(gamma.size()) +
              ", beta " + std::to_string(beta.size()) + ", xhat " + shape(xhat) + ", rstd " +
              std::to_string(rstd.size()) + ", y " + shape(y));
  require(eps > 0.0f, "layer_norm_forward: eps must be positive");
  if (d == 0) return;
  for (Eigen::Index i = 0; i < n; ++i) {
    const float mean = x.row(i).mean();
    const float var = (x.row(i).array() - mean).square().mean();
    rstd(i) = 1.0f / std::sqrt(var + eps);
    xhat.row(i) = (x.row(i).array() - mean) * rstd(i);
  }
  y = (xhat.array().rowwise() * gamma.array()).rowwise() + beta.array();
}

void layer_norm_backward(MatIn xhat, VecIn rstd, VecIn gamma, MatIn dy, MatOut dx, VecOut dgamma,
                         VecOut dbeta) {
  const Eigen::Index n = xhat.rows(), d = xhat.cols();
  require(rstd.size() == n && gamma.size() == d && dy.rows() == n && dy.cols() == d &&
              dx.rows() == n && dx.cols() == d && dgamma.size() == d && dbeta.size() == d,
          "layer_norm_backward: xhat " + shape(xhat) + ", dy " + shape(dy) + ", dx " + shape(dx) +
              ", rstd " + std::to_string(rstd.size()) + ", gamma/dgamma/dbeta " +
              std::to_string(gamma.size()) + "/" + std::to_string(dgamma.size()) + "/" +
              std::to_string(dbeta.size()));
  if (d == 0) return;
  dgamma += (dy.array() * xhat.array()).colwise().sum().matrix();
  dbeta += dy.colwise().sum();
  // g = dy * gamma is the gradient of xhat. Through the row's mean and variance:
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), every mean over the row's d entries.
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::RowVectorXf g = dy.row(i).cwiseProduct(gamma);
    const float g_mean = g.mean();
    const float gx_mean = g.cwiseProduct(xhat.row(i)).mean();
    dx.row(i) = rstd(i) * (g.array() - g_mean - xhat.row(i).array() * gx_mean);
  }
}

// ------------------------------------------------------------------------------------ losses
double mse_forward(MatIn y, MatIn target) {
  require(y.rows() == target.rows() && y.cols() == target.cols(),
          "mse_forward: output " + shape(y) + " vs target " + shape(target));
  if (y.size() == 0) return 0.0;
  return (y - target).cast<double>().squaredNorm() / static_cast<double>(y.size());
}

void mse_backward(MatIn y, MatIn target, MatOut dy, float scale) {
  require(y.rows() == target.rows() && y.cols() == target.cols() && dy.rows() == y.rows() &&
              dy.cols() == y.cols(),
          "mse_backward: output " + shape(y) + ", target " + shape(target) + ", dy " + shape(dy));
  if (y.size() == 0) return;
  dy = (y - target) * (2.0f * scale / static_cast<float>(y.size()));
}

namespace {
void check_labels(MatIn logits, std::span<const std::int32_t> labels, const char* who) {
  require(static_cast<std::int64_t>(labels.size()) == logits.rows(),
          std::string(who) + ": " + std::to_string(labels.size()) + " labels for " +
              std::to_string(logits.rows()) + " rows of logits");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= logits.cols()) {
      throw std::out_of_range(std::string(who) + ": label " + std::to_string(labels[i]) +
                              " at row " + std::to_string(i) + " is outside [0, " +
                              std::to_string(logits.cols()) + ")");
    }
  }
}
}  // namespace

double cross_entropy_forward(MatIn logits, std::span<const std::int32_t> labels) {
  check_labels(logits, labels, "cross_entropy_forward");
  if (logits.rows() == 0) return 0.0;
  double total = 0.0;
  for (std::int64_t r = 0; r < logits.rows(); ++r) {
    const auto row = logits.row(r);
    const float mx = row.maxCoeff();
    const double lse =
        static_cast<double>(mx) + std::log((row.array() - mx).exp().cast<double>().sum());
    total += lse - static_cast<double>(row(labels[static_cast<std::size_t>(r)]));
  }
  return total / static_cast<double>(logits.rows());
}

void cross_entropy_backward(MatIn logits, std::span<const std::int32_t> labels, MatOut dlogits,
                            float scale) {
  check_labels(logits, labels, "cross_entropy_backward");
  require(dlogits.rows() == logits.rows() && dlogits.cols() == logits.cols(),
          "cross_entropy_backward: dlogits " + shape(dlogits) + " vs logits " + shape(logits));
  if (logits.rows() == 0) return;
  const float w = scale / static_cast<float>(logits.rows());
  for (std::int64_t r = 0; r < logits.rows(); ++r) {
    const auto row = logits.row(r);
    const float mx = row.maxCoeff();
    auto out = dlogits.row(r);
    out = (row.array() - mx).exp().matrix();
    out *= w / out.sum();
    out(labels[static_cast<std::size_t>(r)]) -= w;
  }
}

}  // namespace mgpu::model
