// 11.7 reference solution: a mixture-of-experts layer over an expert-parallel group, with a
// top-k softmax router, per-expert capacity, and all_to_all_v dispatch and combine both ways.
// Implements chapters/11_7_3d_and_experts/moe.hpp.
#include "11_7_3d_and_experts/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

namespace mgpu::experts {

namespace {

// Index of a std::vector or size of a Buffer from the signed counts Eigen and the header use.
std::size_t u(std::int64_t i) { return static_cast<std::size_t>(i); }

void check_rows(const char* where, const char* name, MatIn m, std::int64_t rows,
                std::int64_t cols) {
  if (m.rows() != rows || m.cols() != cols)
    args::fail(where, name, "(" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + ")",
               "should be (" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
}

// Local expert i's weights (h, h) inside the rank's flat buffer.
ConstMatrixMap<float> expert_weights(const Buffer<float>& w, std::int64_t h, std::int64_t i) {
  const auto hh = u(h);
  return as_matrix(w, hh, hh, u(i) * hh * hh);
}

// Sends `rows` (laid out as the dispatch sent its copies) along the dispatch's path, or back
// along it when `back`: the forward and backward passes share the same two routes.
Buffer<float> exchange(Rank& rank, Comm& ep, const Dispatch& d, std::span<const float> rows,
                       bool back, const char* label) {
  const auto& send = back ? d.recv_counts : d.send_counts;
  const auto& recv = back ? d.send_counts : d.recv_counts;
  Buffer<float> out(rank.memory(), Category::activations,
                    std::accumulate(recv.begin(), recv.end(), std::size_t{0}), label);
  ep.all_to_all_v(rows, send, out, recv);
  return out;
}

}  // namespace

std::int64_t expert_capacity(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                             double capacity_factor) {
  const char* where = "expert_capacity";
  args::check_non_negative(where, "tokens", static_cast<double>(tokens));
  args::check_count(where, "top_k", top_k);
  args::check_count(where, "experts", experts);
  if (top_k > experts)
    args::fail(where, "top_k", std::to_string(top_k), "exceeds experts: use k <= E");
  args::check_positive(where, "capacity_factor", capacity_factor);
  // The even share is tokens*k/E copies per expert; rounding up never leaves an even routing
  // short of a slot.
  return static_cast<std::int64_t>(std::ceil(capacity_factor * static_cast<double>(tokens * top_k) /
                                             static_cast<double>(experts)));
}

Routing moe_route(MatIn x, MatIn router, std::int64_t top_k, double capacity_factor) {
  const std::int64_t tokens = x.rows(), experts = router.cols();
  check_rows("moe_route", "router", router, x.cols(), experts);
  const std::int64_t capacity = expert_capacity(tokens, top_k, experts, capacity_factor);

  Routing r{tokens, top_k, {}, {}, {}, 0, MatrixRM(tokens, experts)};
  const MatrixRM logits = x * router;
  for (std::int64_t t = 0; t < tokens; ++t) {
    // Subtracting the row's maximum keeps exp from overflowing; it cancels in the ratio.
    const Eigen::RowVectorXf e = (logits.row(t).array() - logits.row(t).maxCoeff()).exp();
    r.probs.row(t) = e / e.sum();
  }

  std::vector<std::int64_t> used(u(experts), 0);
  std::vector<int> by_prob(u(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::iota(by_prob.begin(), by_prob.end(), 0);
    // stable_sort keeps the lower expert first among equal probabilities.
    std::stable_sort(by_prob.begin(), by_prob.end(),
                     [&](int a, int b) { return r.probs(t, a) > r.probs(t, b); });
    for (std::int64_t j = 0; j < top_k; ++j) {
      const int e = by_prob[u(j)];
      const bool fits = used[u(e)] < capacity;
      if (fits) ++used[u(e)];
      r.expert.push_back(e);
      r.gate.push_back(r.probs(t, e));
      r.kept.push_back(fits ? 1 : 0);
      r.dropped += fits ? 0 : 1;
    }
  }
  return r;
}

Dispatch moe_dispatch(Rank& rank, Comm& ep, const MoeLayer& layer, MatIn x,
                      const Routing& routing) {
  const std::int64_t h = layer.config.hidden, E = layer.config.experts, local = layer.local_experts;
  const int n = ep.size();
  check_rows("moe_dispatch", "x", x, routing.tokens, h);

  Dispatch d;
  for (std::int64_t c = 0; c < routing.tokens * routing.top_k; ++c)
    if (routing.kept[u(c)]) d.order.push_back(c);
  // Grouping by global expert groups by destination rank too (rank = expert / local), so each
  // rank's block is contiguous and sorted by its local experts.
  std::stable_sort(d.order.begin(), d.order.end(), [&](std::int64_t a, std::int64_t b) {
    return routing.expert[u(a)] < routing.expert[u(b)];
  });

  // Row counts per (destination, its local expert): exactly the per-expert counts in order.
  std::vector<double> rows_to(u(E), 0.0), rows_from(u(E));
  for (std::int64_t c : d.order) rows_to[u(routing.expert[u(c)])] += 1;
  ep.all_to_all(rows_to, rows_from);

  d.send_counts.assign(u(n), 0);
  d.recv_counts.assign(u(n), 0);
  for (std::int64_t e = 0; e < E; ++e) {
    const auto peer = u(e / local);
    const auto rows_out = static_cast<std::int64_t>(rows_to[u(e)]);
    const auto rows_in = static_cast<std::int64_t>(rows_from[u(e)]);
    d.send_counts[peer] += u(rows_out * h);
    d.recv_counts[peer] += u(rows_in * h);
    d.rows_from.push_back(rows_in);
    d.received_rows += rows_in;
  }

  Buffer<float> packed(rank.memory(), Category::comm, d.order.size() * u(h), "moe dispatch send");
  auto send = as_matrix(packed, d.order.size(), u(h));
  for (std::size_t i = 0; i < d.order.size(); ++i)
    send.row(static_cast<Eigen::Index>(i)) = x.row(d.order[i] / routing.top_k);
  d.received = Buffer<float>(rank.memory(), Category::activations, u(d.received_rows * h),
                             "moe expert inputs");
  ep.all_to_all_v(packed, d.send_counts, d.received, d.recv_counts);
  return d;
}

Buffer<float> moe_combine(Rank& rank, Comm& ep, const Dispatch& dispatch, MatIn expert_out,
                          const Routing& routing, MatOut y) {
  const std::int64_t h = y.cols();
  check_rows("moe_combine", "expert_out", expert_out, dispatch.received_rows, h);
  check_rows("moe_combine", "y", y, routing.tokens, h);
  const std::span<const float> out_rows(expert_out.data(), u(expert_out.size()));
  Buffer<float> returned =
      exchange(rank, ep, dispatch, out_rows, /*back=*/true, "moe returned copies");

  const auto back = as_matrix(std::as_const(returned), dispatch.order.size(), u(h));
  y.setZero();
  for (std::size_t i = 0; i < dispatch.order.size(); ++i) {
    const std::int64_t c = dispatch.order[i];
    y.row(c / routing.top_k) += routing.gate[u(c)] * back.row(static_cast<Eigen::Index>(i));
  }
  return returned;
}

MoeCache moe_forward(Rank& rank, Comm& ep, const MoeLayer& layer, MatIn x, MatOut y) {
  const std::int64_t h = layer.config.hidden, E = layer.config.experts, local = layer.local_experts;
  check_rows("moe_forward", "x", x, x.rows(), h);
  check_rows("moe_forward", "y", y, x.rows(), h);
  MoeCache cache;
  cache.routing = moe_route(x, as_matrix(layer.router, u(h), u(E)), layer.config.top_k,
                            layer.config.capacity_factor);
  cache.dispatch = moe_dispatch(rank, ep, layer, x, cache.routing);
  const Dispatch& d = cache.dispatch;

  // Rows arrive source by source, each source's block by local expert: walk them in that order.
  const auto hh = u(h);
  const auto in = as_matrix(std::as_const(d.received), u(d.received_rows), hh);
  Buffer<float> out_buf(rank.memory(), Category::comm, u(d.received_rows) * hh,
                        "moe expert outputs");
  auto out = as_matrix(out_buf, u(d.received_rows), hh);
  Eigen::Index row = 0;
  for (int s = 0; s < ep.size(); ++s)
    for (std::int64_t i = 0; i < local; ++i) {
      const auto rows = static_cast<Eigen::Index>(d.rows_from[u(s * local + i)]);
      out.middleRows(row, rows) = in.middleRows(row, rows) * expert_weights(layer.w, h, i);
      row += rows;
    }
  rank.compute(model::linear_flops(d.received_rows, h, h), "moe_experts_forward");

  cache.returned = moe_combine(rank, ep, d, out, cache.routing, y);
  return cache;
}

void moe_backward(Rank& rank, Comm& ep, MoeLayer& layer, MatIn x, const MoeCache& cache, MatIn dy,
                  MatOut dx) {
  const std::int64_t h = layer.config.hidden, E = layer.config.experts, local = layer.local_experts;
  const Routing& r = cache.routing;
  const Dispatch& d = cache.dispatch;
  check_rows("moe_backward", "x", x, r.tokens, h);
  check_rows("moe_backward", "dy", dy, r.tokens, h);
  check_rows("moe_backward", "dx", dx, r.tokens, h);
  const auto hh = u(h);
  const std::size_t copies = d.order.size();

  // Each kept copy's output gradient is its gate times its token's dy; the gate's own gradient
  // is dy_t . output, which the router's softmax then carries back.
  const auto returned = as_matrix(cache.returned, copies, hh);
  Buffer<float> dcopies(rank.memory(), Category::comm, copies * hh, "moe output grads");
  auto dcopy = as_matrix(dcopies, copies, hh);
  MatrixRM dprobs = MatrixRM::Zero(r.tokens, E);
  for (std::size_t i = 0; i < copies; ++i) {
    const std::int64_t c = d.order[i], t = c / r.top_k;
    const auto row = static_cast<Eigen::Index>(i);
    dcopy.row(row) = r.gate[u(c)] * dy.row(t);
    dprobs(t, r.expert[u(c)]) += dy.row(t).dot(returned.row(row));
  }

  // Out to the experts along the dispatch's path.
  Buffer<float> dout_buf =
      exchange(rank, ep, d, dcopies.span(), /*back=*/false, "moe expert output grads");
  const auto in = as_matrix(d.received, u(d.received_rows), hh);
  const auto dout = as_matrix(std::as_const(dout_buf), u(d.received_rows), hh);
  Buffer<float> din_buf(rank.memory(), Category::comm, u(d.received_rows) * hh,
                        "moe expert input grads");
  auto din = as_matrix(din_buf, u(d.received_rows), hh);
  Eigen::Index row = 0;
  for (int s = 0; s < ep.size(); ++s)
    for (std::int64_t i = 0; i < local; ++i) {
      const auto rows = static_cast<Eigen::Index>(d.rows_from[u(s * local + i)]);
      auto dw = as_matrix(layer.dw, hh, hh, u(i) * hh * hh);
      dw.noalias() += in.middleRows(row, rows).transpose() * dout.middleRows(row, rows);
      din.middleRows(row, rows).noalias() =
          dout.middleRows(row, rows) * expert_weights(layer.w, h, i).transpose();
      row += rows;
    }
  rank.compute(2 * model::linear_flops(d.received_rows, h, h), "moe_experts_backward");

  // And back to the tokens along the combine's path; every copy adds to its token's dx.
  Buffer<float> dx_buf =
      exchange(rank, ep, d, din_buf.span(), /*back=*/true, "moe returned input grads");
  const auto dx_copies = as_matrix(std::as_const(dx_buf), copies, hh);
  dx.setZero();
  for (std::size_t i = 0; i < copies; ++i)
    dx.row(d.order[i] / r.top_k) += dx_copies.row(static_cast<Eigen::Index>(i));

  // Softmax backward per token: dlogits = p * (dp - p . dp).
  const Eigen::VectorXf p_dot_dp = r.probs.cwiseProduct(dprobs).rowwise().sum();
  const MatrixRM dlogits = (r.probs.array() * (dprobs.colwise() - p_dot_dp).array()).matrix();
  const auto router = as_matrix(std::as_const(layer.router), hh, u(E));
  as_matrix(layer.drouter, hh, u(E)).noalias() += x.transpose() * dlogits;
  dx.noalias() += dlogits * router.transpose();
}

}  // namespace mgpu::experts
