// Graded cases of 11.6's running checkpointing code on the course model: the gradients against
// the reference's, the recomputed FLOPs, the activation peak (budgeted against the reference's),
// and the best interval for a drawn model.
#include <algorithm>
#include <cstring>
#include <vector>

#include "11_6_checkpointing/checkpointing.hpp"
#include "case.hpp"
#include "model_inputs.hpp"

using namespace mgpu::grade;
namespace ck = mgpu::checkpointing;
namespace model = mgpu::model;

namespace {

// A small course model whose shape comes from the seed; d_in and d_out stay at most d_model.
model::ModelConfig drawn_config(Ctx& ctx) {
  model::ModelConfig c;
  c.n_heads = ctx.pick({1, 2, 4});
  c.d_model = c.n_heads * ctx.uniform_int(2, 5);
  c.d_in = ctx.uniform_int(2, static_cast<int>(c.d_model));
  c.d_ff = ctx.pick({1, 2, 4}) * c.d_model;
  c.n_layers = ctx.uniform_int(2, 9);
  c.seq_len = ctx.uniform_int(2, 5);
  c.d_out = ctx.uniform_int(1, static_cast<int>(c.d_model));
  c.attention = ctx.pick({0, 1}) == 1;
  return c;
}


struct Step {
  std::vector<float> grads;
  double loss = 0;
  double peak = 0;   // ledger peak of Category::activations during the step
  double flops = 0;  // compute charged to the clock during the step, in FLOPs
};

// One step on a fresh rank: plain when k is 0, else with a checkpoint every k blocks.
Step run_step(const model::Model& net, const model::Batch& batch, std::int64_t k, std::uint64_t seed) {
  Step s;
  mgpu::Cluster(1).run([&](mgpu::Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), seed);
    r.memory().reset_peaks();
    const double t0 = r.clock().compute_time();
    s.loss = k == 0 ? net.forward_backward(r, rep.params.span(), rep.grads.span(), batch)
                    : ck::checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch, k);
    s.flops = (r.clock().compute_time() - t0) * r.config().flops_per_second;
    s.peak = static_cast<double>(r.memory().peak(mgpu::Category::activations));
    s.grads.assign(rep.grads.begin(), rep.grads.end());
  });
  return s;
}

}  // namespace

MGPU_CASE("11_6.checkpointed_gradients") {
  const model::Model net(drawn_config(ctx));
  const std::int64_t k = ctx.uniform_int(1, static_cast<int>(net.config().n_layers));
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const model::Batch batch = net.make_batch(ctx.uniform_int(1, 4), seed + 1);
  const Step plain = run_step(net, batch, 0, seed), ckpt = run_step(net, batch, k, seed);
  ctx.emit("k", static_cast<double>(k));
  ctx.emit("grads", every_kth(ckpt.grads), Dtype::fp32);
  ctx.emit("loss", ckpt.loss);
  const bool same = ckpt.grads.size() == plain.grads.size() &&
                    std::memcmp(ckpt.grads.data(), plain.grads.data(), plain.grads.size() * sizeof(float)) == 0;
  ctx.emit("bitwise_same_as_plain", same ? 1.0 : 0.0);
}

MGPU_CASE("11_6.peak_and_recompute") {
  // Extra FLOPs over a plain step, for every k: one more forward of every block. The activation
  // peak of the step at a drawn k is a measure, budgeted against the reference's.
  const model::Model net(drawn_config(ctx));
  const std::int64_t layers = net.config().n_layers;
  const auto seed = static_cast<std::uint64_t>(ctx.uniform_int(1, 1 << 20));
  const model::Batch batch = net.make_batch(ctx.uniform_int(1, 4), seed + 1);
  const Step plain = run_step(net, batch, 0, seed);
  std::vector<double> extra;
  for (std::int64_t k = 1; k <= layers; ++k) extra.push_back(run_step(net, batch, k, seed).flops - plain.flops);
  const std::int64_t k = ctx.uniform_int(1, static_cast<int>(layers));
  ctx.emit("extra_flops", extra);
  ctx.emit("k", static_cast<double>(k));
  ctx.measure("peak_activation_bytes", run_step(net, batch, k, seed).peak);
}

MGPU_CASE("11_6.best_interval_model") {
  std::vector<double> best;
  for (int i = 0; i < 4; ++i) {
    const model::Model net(drawn_config(ctx));
    best.push_back(static_cast<double>(ck::best_interval(net, net.config().seq_len * ctx.uniform_int(1, 8))));
  }
  ctx.emit("best", best);
  const model::Model net(drawn_config(ctx));
  const model::Batch batch = net.make_batch(1, 3);
  ctx.emit_rejects("rejects_k_above_layers", [&] {
    mgpu::Cluster(1).run([&](mgpu::Rank& r) {
      model::Replica rep = net.make_replica(r.memory(), 1);
      ck::checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch,
                                        net.config().n_layers + 1);
    });
  });
}
