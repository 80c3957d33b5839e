// One training step priced operation by operation. The counts here (which GEMMs a layer runs,
// which bytes an element-wise kernel reads and writes, how many collectives a layer needs) are
// the algorithm's, derived in the comments; every rate and efficiency is the hardware file's.
#include "plan/step_time.hpp"

#include "plan/model.hpp"  // tp_all_reduces_per_layer

#include <fmt/format.h>
#include <algorithm>
#include <numeric>
#include <vector>

namespace mgpu::planner {

namespace {

constexpr double kBf16 = 2;  // bytes of one bf16 element: weights, activations, gradients

// A GEMM (m x k) times (k x n) in bf16: its FLOPs at the curve's efficiency for that size, or
// the time to read both inputs and write the output, whichever is longer (the roofline).
double gemm_seconds(double batch, double m, double n, double k, const Hardware& hw) {
  const double flops = batch * 2 * m * n * k;
  const double bytes = batch * kBf16 * (m * k + k * n + m * n);
  return std::max(flops / (hw.peak_flops * hw.gemm.at(flops)),
                  bytes / (hw.hbm_bytes_per_s * hw.hbm_efficiency));
}

double memory_seconds(double bytes, const Hardware& hw) {
  return bytes / (hw.hbm_bytes_per_s * hw.hbm_efficiency);
}

// One collective or send that puts `bytes` on each GPU's link.
double link_seconds(double bytes, bool across_servers, const Hardware& hw) {
  return across_servers
             ? hw.network_latency_s + bytes / (hw.network_bytes_per_s * hw.network_efficiency)
             : hw.nvlink_latency_s + bytes / (hw.nvlink_bytes_per_s * hw.nvlink_efficiency);
}

// A ring all-reduce among n GPUs sends 2 (n-1)/n of the buffer from each (11.2); a
// reduce-scatter or an all-gather half of that.
double ring_factor(double n) { return (n - 1) / n; }

// One layer on one GPU for one micro-batch, split into what the GPU computes and what it waits
// for: tensor-parallel collectives on NVLink, ring attention's sends on the cp group's links.
struct LayerTime {
  double forward_compute = 0, forward_comm = 0, forward_ring = 0;
  double backward_compute = 0, backward_comm = 0, backward_ring = 0;  // recompute included
  double ring_bytes = 0;  // bytes this GPU sends round the cp ring for the layer, both passes
  // The ring's steps of each pass, which the three ring fields above sum and the simulation runs.
  std::vector<RingStep> ring_forward_steps, ring_backward_steps;
};

// Whether the cp group (tp x cp consecutive GPUs) stays inside a server.
bool cp_inside_server(const RunLayout& l, const Hardware& hw) {
  return hw.gpus_per_server % (l.tp * l.cp) == 0;
}

LayerTime layer_time(const RunModel& md, const RunLayout& l, const Hardware& hw) {
  const double t = static_cast<double>(l.tp), c = static_cast<double>(l.cp);
  const double h = static_cast<double>(md.hidden), s = static_cast<double>(md.seq);
  const double a = static_cast<double>(md.heads), kv = static_cast<double>(md.kv_heads);
  const double ffn = static_cast<double>(md.ffn), dh = h / a;
  // With context parallelism each rank holds s/c tokens of every sequence.
  const double tokens = static_cast<double>(l.micro_batch) * s / c;
  const double b = static_cast<double>(l.micro_batch);

  // The four weight GEMMs of a layer, each split over tp (11.4): QKV and the FFN's first
  // matrix by columns, the attention output and the FFN's second by rows.
  const double gemms = gemm_seconds(1, tokens, (h + 2 * kv * dh) / t, h, hw) +
                       gemm_seconds(1, tokens, h, h / t, hw) +
                       gemm_seconds(1, tokens, ffn * (md.swiglu ? 2 : 1) / t, h, hw) +
                       gemm_seconds(1, tokens, h, ffn / t, hw);
  // The attention core, b a/t heads at once: scores Q K^T (s/c x dh by dh x s), then the
  // probabilities times V (s/c x s by s x dh): this rank's queries against every key, which ring
  // attention brings round in c blocks. Unfused, both are whole batched GEMMs and the causal
  // mask is applied to scores already computed. Fused attention never writes the scores and
  // skips the blocks above the diagonal, so it performs half those FLOPs (ring attention's
  // zig-zag split gives every cp rank the same half), at the hardware file's fused-attention
  // efficiency rather than a GEMM's.
  const double heads_here = b * a / t;
  const double core_flops = heads_here * 4 * (s / c) * s * dh;
  const auto fused = [&](double flops) {
    return flops / (hw.peak_flops * hw.fused_attention_efficiency);
  };
  const double core = l.flash_attention ? fused(core_flops / 2)
                                        : gemm_seconds(heads_here, s / c, s, dh, hw) +
                                              gemm_seconds(heads_here, s / c, dh, s, hw);
  // Its backward: unfused, four batched GEMMs of the forward's sizes (dV = P^T dO, dP = dO V^T,
  // dQ = dS K, dK = dS^T Q), twice the forward; fused, the scores are recomputed first (Q K^T
  // again), five products of the forward's size where the forward had two (Dao 2023,
  // FlashAttention-2, section 3.1.2): 2.5 times its FLOPs.
  const double core_backward = l.flash_attention ? fused(2.5 * core_flops / 2) : 2 * core;
  // Element-wise kernels read their inputs and write their outputs once (bytes per token):
  //  two layer norms, 2h in and 2h out each: 8h; two fused bias-dropout-residual adds, 2h input
  //  + 2h residual in, 2h out and an h-byte mask: 14h; 22h outside the tp region, which
  //  sequence parallelism splits over tp;
  //  the FFN activation on ffn/t elements: GeLU 2 in + 2 out, SwiGLU 4 in + 2 out;
  //  unfused attention on a s / t scores per token: scale-mask-softmax 2 in + 2 out, dropout
  //  2 in + 2 out + 1 mask byte: 9 a s / t.
  // Their backward kernels move their own bytes, not twice the forward's:
  //  a layer norm reads its input and the output's gradient and writes the input's, 6h each:
  //  12h; a bias-dropout-residual add reads the gradient and the mask and writes the branch's
  //  gradient (the residual's passes through), 5h each: 10h; 22h outside the tp region, the
  //  forward's total by coincidence of the two sums;
  //  GeLU reads its input and gradient, writes one gradient: 6; SwiGLU reads both inputs and the
  //  gradient, writes two gradients: 10;
  //  the softmax's backward reads its saved output and the gradient, writes one: 6; dropout's
  //  reads the gradient and the mask, writes one: 5: 11 a s / t.
  const double sp = l.sequence_parallel ? t : 1;
  const double outside = 22 * h / sp;
  const double activation = (md.swiglu ? 6 : 4) * ffn / t;
  const double activation_backward = (md.swiglu ? 10 : 6) * ffn / t;
  const double softmax = l.flash_attention ? 0 : 9 * a * s / t;
  const double softmax_backward = l.flash_attention ? 0 : 11 * a * s / t;
  const double elementwise = memory_seconds(tokens * (outside + activation), hw);
  const double softmax_time = memory_seconds(tokens * softmax, hw);
  const double elementwise_backward =
      memory_seconds(tokens * (outside + activation_backward + softmax_backward), hw);

  // Tensor-parallel collectives: one all-reduce of the layer's activation is
  // 2 (t-1)/t s b h bf16 per GPU; 2 in the forward, 2 in the backward, 1 more with sequence
  // parallelism (the backward gathers its saved input shards again) and 2 more when full
  // recompute reruns the forward (tp_all_reduces_per_layer).
  const double all_reduce =
      l.tp == 1 ? 0 : link_seconds(2 * ring_factor(t) * tokens * h * kBf16, false, hw);

  LayerTime out;
  out.forward_compute = gemms + core + elementwise + softmax_time;
  out.forward_comm = 2 * all_reduce;
  // The backward of each weight GEMM is two GEMMs of its size, the input's gradient and the
  // weight's; the attention core and the element-wise kernels cost what their own FLOPs and
  // bytes do (above), so the layer's backward is less than twice its forward where those are a
  // visible share and tends to twice it where the GEMMs dominate.
  out.backward_compute = 2 * gemms + core_backward + elementwise_backward;
  out.backward_comm = (tp_all_reduces_per_layer(l.recompute, l.sequence_parallel) - 2) * all_reduce;
  if (l.recompute == Recompute::full) out.backward_compute += out.forward_compute;
  if (l.recompute == Recompute::selective) out.backward_compute += core + softmax_time;
  // What the kernels above leave out and a real run spends between and around them
  // (hardware.hpp): one fraction of the modelled compute, the hardware file's fitted constant.
  out.forward_compute *= 1 + hw.compute_overhead;
  out.backward_compute *= 1 + hw.compute_overhead;

  // Ring attention (11.7): the forward takes c - 1 steps, in each of which this rank sends its
  // keys and values (kv_heads/t heads of dh, b s/c tokens, bf16: the KV width, not h) to the next
  // rank while it computes the block it already holds, 1/c of its attention core; only what a
  // step's send takes beyond that block is waited for. The backward sends the keys and values
  // again with their two gradients, twice the bytes, beside twice the block's compute. Full
  // recompute reruns the forward's ring.
  if (l.cp > 1) {
    const double kv_bytes = 2 * tokens * (kv * dh / t) * kBf16;
    const RingStep forward{kv_bytes, core / c}, backward{2 * kv_bytes, 2 * core / c};
    out.ring_forward_steps.assign(static_cast<std::size_t>(l.cp - 1), forward);
    if (l.recompute == Recompute::full) out.ring_backward_steps = out.ring_forward_steps;
    out.ring_backward_steps.insert(out.ring_backward_steps.end(),
                                   static_cast<std::size_t>(l.cp - 1), backward);
    const bool inside = cp_inside_server(l, hw);
    const auto exposed = [&](const std::vector<RingStep>& steps) {
      double seconds = 0;
      for (const RingStep& step : steps)
        seconds += std::max(0.0, link_seconds(step.bytes, !inside, hw) - step.block_seconds);
      return seconds;
    };
    out.forward_ring = exposed(out.ring_forward_steps);
    out.backward_ring = exposed(out.ring_backward_steps);
    for (const auto* steps : {&out.ring_forward_steps, &out.ring_backward_steps})
      for (const RingStep& step : *steps) out.ring_bytes += step.bytes;
  }
  return out;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

// The inputs of step_time, checked, with the model's defaults filled in (kv heads = heads,
// ffn = 4 h). The layout checks are the memory report's (options.hpp), so the two halves of
// `mgpu plan` accept the same runs.
RunModel checked_model(const RunModel& model, const RunLayout& l) {
  RunModel md = model;
  if (md.kv_heads == 0) md.kv_heads = md.heads;
  if (md.ffn == 0) md.ffn = 4 * md.hidden;
  require(md.layers > 0 && md.hidden > 0 && md.heads > 0 && md.seq > 0 && md.vocab > 0 &&
              md.global_batch > 0,
          "the model needs layers, hidden, heads, seq, vocab and global batch, all positive");
  require(l.tp > 0 && l.pp > 0 && l.dp > 0 && l.cp > 0 && l.micro_batch > 0 && l.interleave > 0,
          "tp, pp, dp, cp, micro-batch and interleave must be at least 1");
  require(md.heads % l.tp == 0 && md.kv_heads % l.tp == 0 && md.hidden % md.heads == 0 &&
              md.heads % md.kv_heads == 0,
          fmt::format("heads {} and kv heads {} must be divisible by tp {}, and kv heads must "
                      "divide heads",
                      md.heads, md.kv_heads, l.tp));
  require(md.ffn % l.tp == 0, fmt::format("ffn {} must be divisible by tp {}", md.ffn, l.tp));
  require(md.global_batch % (l.micro_batch * l.dp) == 0,
          fmt::format("global batch {} is not a multiple of micro-batch {} x dp {}",
                      md.global_batch, l.micro_batch, l.dp));
  require(l.cp == 1 || md.seq % (2 * l.cp) == 0,
          fmt::format("seq {} is not divisible by 2 x cp = {}: ring attention's zig-zag split",
                      md.seq, 2 * l.cp));
  const std::int64_t m = md.global_batch / (l.micro_batch * l.dp);
  require(l.interleave == 1 || (l.pp > 1 && m % l.pp == 0),
          fmt::format("interleave {} needs a pipeline and micro-batches m = {} a multiple of pp {}",
                      l.interleave, m, l.pp));
  require(l.zero_stage >= 0 && l.zero_stage <= 3, "ZeRO stage is 0 to 3");
  return md;
}

// What the steps below share: the checked inputs and the quantities derived from them once.
struct Step {
  RunModel md;
  const RunLayout& l;
  const Hardware& hw;
  double m = 0;                      // micro-batches per step, per data-parallel rank
  double t = 0;                      // tp as a number
  double tokens = 0;                 // tokens one rank holds of a micro-batch: b s/cp
  LayerTime lt;                      // one layer, one micro-batch
  double logits_forward = 0;         // the last stage's logits, forward
  double logits = 0;                 // the same, forward and backward
  std::vector<std::int64_t> stages;  // layers of each stage
  double layer_params = 0;           // parameters of one layer, all tp ranks
  std::vector<double> stage_params;  // parameters one GPU of each stage holds
  double gradient_group = 1;         // ranks holding the same weights: dp x cp

  Step(const RunModel& model, const RunLayout& layout, const Hardware& hardware);
};

// Parameters of one layer: its 4 weight matrices (QKV with kv heads, output, FFN; SwiGLU's
// first is two).
double layer_parameters(const RunModel& md) {
  const double h = static_cast<double>(md.hidden);
  const double dh = h / static_cast<double>(md.heads);
  const double ffn = static_cast<double>(md.ffn);
  return h * (h + 2 * static_cast<double>(md.kv_heads) * dh) + h * h +
         (md.swiglu ? 3 : 2) * h * ffn;
}

Step::Step(const RunModel& model, const RunLayout& layout, const Hardware& hardware)
    : md(checked_model(model, layout)), l(layout), hw(hardware) {
  m = static_cast<double>(md.global_batch / (l.micro_batch * l.dp));
  t = static_cast<double>(l.tp);
  tokens = static_cast<double>(l.micro_batch) * static_cast<double>(md.seq / l.cp);
  lt = layer_time(md, l, hw);
  // The last stage also computes the logits, split over tp by vocabulary: one h x V/t GEMM
  // forward and two backward, and the softmax of the loss over V/t per token (2 in, 2 out,
  // twice that backward).
  const double h = static_cast<double>(md.hidden), V = static_cast<double>(md.vocab);
  logits_forward =
      (gemm_seconds(1, tokens, V / t, h, hw) + memory_seconds(tokens * 4 * V / t, hw)) *
      (1 + hw.compute_overhead);
  logits = 3 * logits_forward;
  stages = stage_layers(md.layers, l.pp, l.first_stage_layers, l.last_stage_layers);
  layer_params = layer_parameters(md);
  const double embedding = V * h;
  const double params =
      md.params > 0 ? md.params : static_cast<double>(md.layers) * layer_params + embedding;
  require(params > embedding,
          fmt::format("params {:.4g} is no more than the embedding V h = {:.4g}: give the whole "
                      "model's parameters",
                      params, embedding));
  stage_params = stage_params_per_gpu(params, stages, embedding, l.tp);
  gradient_group = static_cast<double>(l.dp * l.cp);
}

// The pipeline: the busiest stage's compute and its tensor-parallel and ring-attention waits,
// the bubble, and the sends between stages. Returns the busiest stage's index.
std::size_t add_pipeline(StepTime& st, const Step& x) {
  const std::size_t p = x.stages.size();
  std::vector<double> compute(p), comm(p), ring(p);
  for (std::size_t i = 0; i < p; ++i) {
    const double n = static_cast<double>(x.stages[i]);
    compute[i] = n * (x.lt.forward_compute + x.lt.backward_compute) + (i + 1 == p ? x.logits : 0);
    comm[i] = n * (x.lt.forward_comm + x.lt.backward_comm);
    ring[i] = n * (x.lt.forward_ring + x.lt.backward_ring);
  }
  const auto total = [&](std::size_t i) { return compute[i] + comm[i] + ring[i]; };
  std::size_t busiest = 0;
  for (std::size_t i = 1; i < p; ++i)
    if (total(i) > total(busiest)) busiest = i;
  st.compute = x.m * compute[busiest];
  st.exposed_tp = x.m * comm[busiest];
  st.exposed_cp = x.m * ring[busiest];
  // 1F1B (11.5): the busiest stage runs its m micro-batches back to back; before its first and
  // after its last, the pipeline fills and drains through the other stages, each chunk of
  // 1/v of a stage's work at a time, so the wait is the other stages' time over v
  // ((p-1)/v of a stage when they are even). Uneven stages enter with their own layers.
  double all_stages = 0;
  for (std::size_t i = 0; i < p; ++i) all_stages += total(i);
  st.bubble = (all_stages - total(busiest)) / static_cast<double>(x.l.interleave);
  // Pipeline sends: each micro-batch enters and leaves every one of the stage's v chunks,
  // activations forward and gradients backward; each tp GPU sends its 1/t slice (11.7) of its
  // b s/c tokens.
  st.p2p_bytes = x.tokens * static_cast<double>(x.md.hidden) * kBf16 / x.t;
  st.pp_bytes = x.m * pipeline_sends_per_micro_batch(x.l.pp, x.l.interleave) * st.p2p_bytes;
  if (x.l.pp > 1) {
    const bool across = x.l.tp * x.l.cp * x.l.pp > x.hw.gpus_per_server;
    st.p2p =
        2 * x.m * static_cast<double>(x.l.interleave) * link_seconds(st.p2p_bytes, across, x.hw);
  }
  return busiest;
}

// Data-parallel collectives of the parameters one GPU of stage i holds (11.2, 11.3), over the
// dp x cp ranks that hold the same weights, and their bytes:
//  stage 0: one all-reduce of the gradients per step, 2 f P g bytes (f = (n-1)/n);
//  stage 1: one reduce-scatter of the gradients and one all-gather of the updated weights per
//    step, f P (g + w);
//  stage 2: the gradients are kept only as a shard, so every micro-batch's backward
//    reduce-scatters its own (m f P g), then one all-gather of the updated weights (f P w);
//  stage 3: the weights too are kept as a shard: in every micro-batch each layer is gathered
//    before its forward and again before its backward, and its gradients reduce-scattered after
//    it, m f P (2w + g), in layer-sized collectives that each pay the link's latency.
// What is exposed: without dp_overlap, all of it. With it, stages 0 and 1 run behind the
// stage's last backward (the gradients are final only then: what sticks out of one micro-batch's
// backward is waited for); stage 2's reduce-scatters behind every micro-batch's backward; stage
// 3 prefetches: each pass waits for its first layer's gather (and the backward for its last
// layer's reduce-scatter), the rest of the forward's gathers run behind the forward and the
// backward's gathers and reduce-scatters behind the backward.
struct DataParallel {
  double exposed = 0;  // seconds
  double bytes = 0;    // sent by one GPU per step
};

// How many ranks of one gradient group (dp x cp ranks of the same tp rank and stage) share a
// server: GPUs are numbered tp fastest, then cp, pp and dp, a server holding consecutive ones.
std::int64_t gradient_group_per_server(const RunLayout& l, const Hardware& hw) {
  std::int64_t members = 0;
  for (std::int64_t g = 0; g < hw.gpus_per_server; ++g)
    members += g % l.tp == 0 && (g / (l.tp * l.cp)) % l.pp == 0;
  return std::max<std::int64_t>(1, members);
}

// A collective of the gradient group across servers when k of its ranks share each server:
// NCCL runs k rings (channels) side by side, each on a slice 1/k of the buffer and each leaving
// the server through a different GPU's NIC, so a NIC carries 1/k of what each rank sends and
// NVLink the other (k-1)/k. With one rank per server (tp filling the server, as in Megatron's
// layouts) all of it goes through the rank's own NIC.
double group_link_seconds(double bytes, bool across, std::int64_t per_server, const Hardware& hw) {
  if (!across || per_server == 1) return link_seconds(bytes, across, hw);
  const double k = static_cast<double>(per_server);
  return hw.network_latency_s +
         std::max(bytes / k / (hw.network_bytes_per_s * hw.network_efficiency),
                  bytes * (k - 1) / k / (hw.nvlink_bytes_per_s * hw.nvlink_efficiency));
}

DataParallel data_parallel(const Step& x, std::size_t i) {
  const RunLayout& l = x.l;
  DataParallel out;
  const double n = x.gradient_group, m = x.m;
  if (n == 1) return out;
  // With one replica the ranks holding the same weights are the stage's cp group, on NVLink when
  // it fits in a server; across replicas they span the whole layout.
  const bool across =
      l.dp == 1 ? !cp_inside_server(l, x.hw) : l.tp * l.cp * l.pp * l.dp > x.hw.gpus_per_server;
  const double P = x.stage_params[i], f = ring_factor(n);
  const double grads = f * P * l.grad_bytes, weights = f * P * l.weight_bytes;
  const double layers = static_cast<double>(std::max<std::int64_t>(1, x.stages[i]));
  const double forward = layers * (x.lt.forward_compute + x.lt.forward_comm + x.lt.forward_ring);
  const double backward =
      layers * (x.lt.backward_compute + x.lt.backward_comm + x.lt.backward_ring);
  const std::int64_t per_server = gradient_group_per_server(l, x.hw);
  const auto link = [&](double bytes) {
    return group_link_seconds(bytes, across, per_server, x.hw);
  };
  double all = 0, exposed = 0;
  switch (l.zero_stage) {
    case 0:
      out.bytes = 2 * grads;
      all = link(2 * grads);
      exposed = std::max(0.0, all - backward);
      break;
    case 1:
      out.bytes = grads + weights;
      all = link(grads) + link(weights);
      exposed = std::max(0.0, all - backward);
      break;
    case 2:
      out.bytes = m * grads + weights;
      all = m * link(grads) + link(weights);
      exposed = std::max(0.0, all - m * backward);
      break;
    default: {
      out.bytes = m * (grads + 2 * weights);
      const double gather = link(weights / layers), scatter = link(grads / layers);
      all = m * layers * (2 * gather + scatter);
      const double forward_wait = gather + std::max(0.0, (layers - 1) * gather - forward);
      const double backward_wait =
          gather + scatter + std::max(0.0, (layers - 1) * (gather + scatter) - backward);
      exposed = m * (forward_wait + backward_wait);
      break;
    }
  }
  out.exposed = l.dp_overlap ? exposed : all;
  return out;
}

// Adam on this GPU's share (all of it, or 1/(dp cp) of it under ZeRO): read the fp32 master
// weight, both moments and the fp32 gradient (16 bytes), write the three back and the bf16
// weight (14 bytes).
double optimizer_seconds(const Step& x, double params) {
  return memory_seconds(30 * params / (x.l.zero_stage >= 1 ? x.gradient_group : 1.0), x.hw);
}

// Every stage's times, for a simulation of the schedule.
void add_stages(StepTime& st, const Step& x) {
  const std::size_t p = x.stages.size();
  for (std::size_t i = 0; i < p; ++i) {
    StageTime& sg = st.stages.emplace_back();
    sg.layers = x.stages[i];
    sg.layer_forward = x.lt.forward_compute;
    sg.layer_backward = x.lt.backward_compute;
    sg.layer_forward_tp = x.lt.forward_comm;
    sg.layer_backward_tp = x.lt.backward_comm;
    sg.ring_forward = x.lt.ring_forward_steps;
    sg.ring_backward = x.lt.ring_backward_steps;
    if (i + 1 == p) {
      sg.logits_forward = x.logits_forward;
      sg.logits_backward = x.logits - x.logits_forward;
    }
    sg.params = x.stage_params[i];
    sg.optimizer = optimizer_seconds(x, sg.params);
  }
}

// FLOPs (11.1's 6 Psi D spelled out per layer): per token a layer's GEMMs are 2 x its weight
// count and the attention core 4 s h (scores and their product with V over the whole
// sequence, as the papers count it); the logits 2 h V; the backward twice the forward. Then
// the rates and utilisations they give at st.seconds.
void add_flops(StepTime& st, const Step& x) {
  const RunModel& md = x.md;
  const double h = static_cast<double>(md.hidden), s = static_cast<double>(md.seq);
  const double V = static_cast<double>(md.vocab), L = static_cast<double>(md.layers);
  const double B = static_cast<double>(md.global_batch);
  const double per_token_layer = 2 * x.layer_params + 4 * s * h;
  st.model_flops = 3 * B * s * (L * per_token_layer + 2 * h * V);
  const double recomputed = x.l.recompute == Recompute::full        ? per_token_layer
                            : x.l.recompute == Recompute::selective ? 4 * s * h
                                                                    : 0.0;
  st.hardware_flops = st.model_flops + B * s * L * recomputed;
  st.paper_flops = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  const double gpus = x.t * static_cast<double>(x.l.cp * x.l.pp * x.l.dp);
  const double gpu_seconds = st.seconds * gpus;
  st.tflops_per_gpu = st.hardware_flops / gpu_seconds / 1e12;
  st.paper_tflops_per_gpu = st.paper_flops / gpu_seconds / 1e12;
  st.mfu = st.model_flops / (gpu_seconds * x.hw.peak_flops);
  st.hfu = st.hardware_flops / (gpu_seconds * x.hw.peak_flops);
}

// The bytes the other groups send, of the stage holding the most layers: its tensor-parallel
// all-reduces (tp_all_reduces_per_layer of the layer's b s/c h bf16, each 2 (t-1)/t of it) and
// its ring-attention sends, every micro-batch.
void add_layer_bytes(StepTime& st, const Step& x) {
  const double most = static_cast<double>(*std::max_element(x.stages.begin(), x.stages.end()));
  if (x.l.tp > 1)
    st.tp_bytes = x.m * most * tp_all_reduces_per_layer(x.l.recompute, x.l.sequence_parallel) * 2 *
                  ring_factor(x.t) * x.tokens * static_cast<double>(x.md.hidden) * kBf16;
  st.cp_bytes = x.m * most * x.lt.ring_bytes;
}

}  // namespace

StepTime step_time(const RunModel& model, const RunLayout& layout, const Hardware& hw) {
  const Step x(model, layout, hw);
  StepTime st;
  st.micro_batches = x.md.global_batch / (layout.micro_batch * layout.dp);
  st.layer_forward = x.lt.forward_compute + x.lt.forward_comm + x.lt.forward_ring;
  st.layer_backward = x.lt.backward_compute + x.lt.backward_comm + x.lt.backward_ring;
  const std::size_t busiest = add_pipeline(st, x);
  const double h = static_cast<double>(x.md.hidden), V = static_cast<double>(x.md.vocab);
  st.params =
      x.md.params > 0 ? x.md.params : static_cast<double>(x.md.layers) * x.layer_params + V * h;
  // The step ends when the last stage's data-parallel collectives do; the bytes are those of
  // the GPU holding the most parameters.
  std::size_t most_params = 0;
  for (std::size_t i = 0; i < x.stages.size(); ++i) {
    const DataParallel dp = data_parallel(x, i);
    st.exposed_dp = std::max(st.exposed_dp, dp.exposed);
    if (x.stage_params[i] > x.stage_params[most_params]) most_params = i;
  }
  st.dp_bytes = data_parallel(x, most_params).bytes;
  st.optimizer = optimizer_seconds(x, x.stage_params[busiest]);
  add_stages(st, x);
  add_layer_bytes(st, x);
  st.seconds = st.compute + st.exposed_tp + st.exposed_cp + st.bubble + st.p2p + st.exposed_dp +
               st.optimizer;
  add_flops(st, x);
  return st;
}

}  // namespace mgpu::planner
