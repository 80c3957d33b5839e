// What the 11.6 host cases share: one training step of the course model on a fresh one-rank
// cluster (its rank runs a step body of checkpointing.cpp or selective.cpp), measured on its
// ledger and clock, and the gradients of a step judged against a plain step's.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "case.hpp"
#include "model_inputs.hpp"
#include "rank_code.hpp"
#include "step.inputs.hpp"

namespace mgpu::grade::checkpointing_cases {

/// The fixed model of the grid points: `layers` blocks of width 4 with 2 heads, sequences of 3.
inline mgpu::model::ModelConfig fixed_config(std::int64_t layers, bool attention,
                                             bool causal = true) {
  return {.d_in = 3,
          .d_model = 4,
          .d_ff = 8,
          .n_layers = layers,
          .n_heads = 2,
          .seq_len = 3,
          .d_out = 2,
          .attention = attention,
          .causal = causal};
}

/// Which switch of the model the last draw of drawn_config sets (the other keeps its default).
enum class DrawnSwitch { attention, causal };

/// A small course model whose shape comes from the seed: 2 to `max_layers` blocks, sequences of
/// 2 to `max_seq`, d_in and d_out at most d_model, and attention or a causal mask or not. The
/// draws come in a fixed order (heads, width, d_in, d_ff, blocks, sequence, d_out, the switch).
inline mgpu::model::ModelConfig drawn_config(Ctx& ctx, int max_layers, int max_seq,
                                             DrawnSwitch last) {
  mgpu::model::ModelConfig c;
  c.n_heads = ctx.pick({1, 2, 4});
  c.d_model = c.n_heads * ctx.uniform_int(2, 5);
  c.d_in = ctx.uniform_int(2, static_cast<int>(c.d_model));
  c.d_ff = ctx.pick({1, 2, 4}) * c.d_model;
  c.n_layers = ctx.uniform_int(2, max_layers);
  c.seq_len = ctx.uniform_int(2, max_seq);
  c.d_out = ctx.uniform_int(1, static_cast<int>(c.d_model));
  (last == DrawnSwitch::attention ? c.attention : c.causal) = ctx.pick({0, 1}) == 1;
  return c;
}

/// What one step produced and cost.
struct Step {
  std::vector<float> grads;
  double loss = 0;
  double peak = 0;   ///< ledger peak of Category::activations during the step
  double flops = 0;  ///< compute charged to the clock during the step, in FLOPs
};

/// One step on a fresh rank, run by the rank body `body` on `in`: the loss and gradients it
/// published, and its costs from the checkpoints the cluster's side recorded around the step.
inline Step measure_step(const std::string& body, const StepInput& in) {
  Step s;
  mgpu::Cluster cluster(1);
  // The rank may be a process of its own: it publishes its results, and the step's costs come
  // from checkpoints the cluster's side records around it.
  run_ranks(cluster, body, [&](int) { return in; });
  const auto& marks = cluster.report(0).checkpoints;
  const mgpu::Checkpoint &before = marks.at("before"), &after = marks.at("after");
  s.loss = published_value(cluster, 0, "loss");
  s.flops = (after.compute - before.compute) * cluster.config().flops_per_second;
  s.peak = static_cast<double>(after.memory.peak(mgpu::Category::activations));
  s.grads = cluster.published<float>(0, "grads");
  return s;
}

/// Emits `at`.grads and `at`.loss of `step`, and `at`.bitwise_same_as_plain: 1 when its gradients
/// are bit for bit those of `plain`, the same model trained without recomputing anything.
inline void emit_against_plain(Ctx& ctx, const std::string& at, const Step& step,
                               const Step& plain) {
  ctx.emit(at + ".grads", every_kth(step.grads), DType::f32);
  ctx.emit(at + ".loss", step.loss, DType::f32);
  const bool same =
      step.grads.size() == plain.grads.size() &&
      std::memcmp(step.grads.data(), plain.grads.data(), plain.grads.size() * sizeof(float)) == 0;
  ctx.emit(at + ".bitwise_same_as_plain", same ? 1.0 : 0.0);
}

}  // namespace mgpu::grade::checkpointing_cases
