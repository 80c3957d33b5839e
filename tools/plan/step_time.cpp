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
// for on NVLink.
struct LayerTime {
  double forward_compute = 0, forward_comm = 0;
  double backward_compute = 0, backward_comm = 0;  // recompute included
};

LayerTime layer_time(const RunModel& md, const RunLayout& l, const Hardware& hw) {
  const double t = static_cast<double>(l.tp);
  const double h = static_cast<double>(md.hidden), s = static_cast<double>(md.seq);
  const double a = static_cast<double>(md.heads), kv = static_cast<double>(md.kv_heads);
  const double ffn = static_cast<double>(md.ffn), dh = h / a;
  const double tokens = static_cast<double>(l.micro_batch) * s;
  const double b = static_cast<double>(l.micro_batch);

  // The four weight GEMMs of a layer, each split over tp (11.4): QKV and the FFN's first
  // matrix by columns, the attention output and the FFN's second by rows.
  const double gemms = gemm_seconds(1, tokens, (h + 2 * kv * dh) / t, h, hw) +
                       gemm_seconds(1, tokens, h, h / t, hw) +
                       gemm_seconds(1, tokens, ffn * (md.swiglu ? 2 : 1) / t, h, hw) +
                       gemm_seconds(1, tokens, h, ffn / t, hw);
  // The attention core, b a/t heads at once: scores Q K^T (s x dh by dh x s), then the
  // probabilities times V (s x s by s x dh). Fused attention never writes the scores, so only
  // its FLOPs count.
  const double heads_here = b * a / t;
  const double core_flops = heads_here * 4 * s * s * dh;
  const double core = l.flash_attention ? core_flops / (hw.peak_flops * hw.gemm.at(core_flops))
                                        : gemm_seconds(heads_here, s, s, dh, hw) +
                                              gemm_seconds(heads_here, s, dh, s, hw);
  // Element-wise kernels read their inputs and write their outputs once (bytes per token):
  //  two layer norms, 2h in and 2h out each: 8h; two fused bias-dropout-residual adds, 2h input
  //  + 2h residual in, 2h out and an h-byte mask: 14h; 22h outside the tp region, which
  //  sequence parallelism splits over tp;
  //  the FFN activation on ffn/t elements: GeLU 2 in + 2 out, SwiGLU 4 in + 2 out;
  //  unfused attention on a s / t scores per token: scale-mask-softmax 2 in + 2 out, dropout
  //  2 in + 2 out + 1 mask byte: 9 a s / t.
  const double outside = 22 * h / (l.sequence_parallel ? t : 1);
  const double activation = (md.swiglu ? 6 : 4) * ffn / t;
  const double softmax = l.flash_attention ? 0 : 9 * a * s / t;
  const double elementwise = memory_seconds(tokens * (outside + activation), hw);
  const double softmax_time = memory_seconds(tokens * softmax, hw);

  // Tensor-parallel collectives: one all-reduce of the layer's activation is
  // 2 (t-1)/t s b h bf16 per GPU; 2 in the forward, 2 in the backward, 1 more with sequence
  // parallelism (the backward gathers its saved input shards again) and 2 more when full
  // recompute reruns the forward (tp_all_reduces_per_layer).
  const double all_reduce =
      l.tp == 1 ? 0 : link_seconds(2 * ring_factor(t) * tokens * h * kBf16, false, hw);

  LayerTime out;
  out.forward_compute = gemms + core + elementwise + softmax_time;
  out.forward_comm = 2 * all_reduce;
  // The backward computes two gradients per GEMM (input and weight) and reads and writes about
  // twice the element-wise bytes of the forward.
  out.backward_compute = 2 * out.forward_compute;
  out.backward_comm = (tp_all_reduces_per_layer(l.recompute, l.sequence_parallel) - 2) * all_reduce;
  if (l.recompute == Recompute::full) out.backward_compute += out.forward_compute;
  if (l.recompute == Recompute::selective) out.backward_compute += core + softmax_time;
  return out;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

std::vector<std::int64_t> layers_by_stage(const RunModel& md, const RunLayout& l) {
  const std::int64_t p = l.pp, L = md.layers;
  std::vector<std::int64_t> out(static_cast<std::size_t>(p), 0);
  if (p == 1) {
    out[0] = L;
    return out;
  }
  const std::int64_t first = l.first_stage_layers, last = l.last_stage_layers;
  if (first == 0 && last == 0) {
    require(L % p == 0, fmt::format("layers {} is not divisible by pp {}: give the first and last "
                                    "stages' layers",
                                    L, p));
    std::fill(out.begin(), out.end(), L / p);
    return out;
  }
  const std::int64_t f = first ? first : 0, g = last ? last : 0;
  const std::int64_t middle_stages = p - (first ? 1 : 0) - (last ? 1 : 0);
  const std::int64_t rest = L - f - g;
  require(rest >= 0 && (middle_stages == 0 ? rest == 0 : rest % middle_stages == 0),
          fmt::format("layers {} minus first {} and last {} must split evenly over the other {} "
                      "stages",
                      L, f, g, middle_stages));
  for (std::int64_t i = 0; i < p; ++i)
    out[static_cast<std::size_t>(i)] = middle_stages ? rest / middle_stages : 0;
  if (first) out.front() = first;
  if (last) out.back() = last;
  return out;
}

// The inputs of step_time, checked, with the model's defaults filled in (kv heads = heads,
// ffn = 4 h).
RunModel checked_model(const RunModel& model, const RunLayout& l) {
  RunModel md = model;
  if (md.kv_heads == 0) md.kv_heads = md.heads;
  if (md.ffn == 0) md.ffn = 4 * md.hidden;
  require(md.layers > 0 && md.hidden > 0 && md.heads > 0 && md.seq > 0 && md.vocab > 0 &&
              md.global_batch > 0,
          "the model needs layers, hidden, heads, seq, vocab and global batch, all positive");
  require(l.tp > 0 && l.pp > 0 && l.dp > 0 && l.micro_batch > 0 && l.interleave > 0,
          "tp, pp, dp, micro-batch and interleave must be at least 1");
  require(md.heads % l.tp == 0 && md.kv_heads % l.tp == 0 && md.hidden % md.heads == 0,
          fmt::format("heads {} and kv heads {} must be divisible by tp {}", md.heads, md.kv_heads,
                      l.tp));
  require(md.global_batch % (l.micro_batch * l.dp) == 0,
          fmt::format("global batch {} is not a multiple of micro-batch {} x dp {}",
                      md.global_batch, l.micro_batch, l.dp));
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
  double tokens = 0;                 // tokens of one micro-batch
  LayerTime lt;                      // one layer, one micro-batch
  double logits_forward = 0;         // the last stage's logits, forward
  double logits = 0;                 // the same, forward and backward
  std::vector<std::int64_t> stages;  // layers of each stage
  double layer_params = 0;           // parameters of one layer, all tp ranks

  Step(const RunModel& model, const RunLayout& layout, const Hardware& hardware);
};

// Parameters: L layers of 4 weight matrices (QKV with kv heads, output, FFN) and the embedding.
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
  tokens = static_cast<double>(l.micro_batch) * static_cast<double>(md.seq);
  lt = layer_time(md, l, hw);
  // The last stage also computes the logits, split over tp by vocabulary: one h x V/t GEMM
  // forward and two backward, and the softmax of the loss over V/t per token (2 in, 2 out,
  // twice that backward).
  const double h = static_cast<double>(md.hidden), V = static_cast<double>(md.vocab);
  logits_forward = gemm_seconds(1, tokens, V / t, h, hw) + memory_seconds(tokens * 4 * V / t, hw);
  logits = 3 * logits_forward;
  stages = layers_by_stage(md, l);
  layer_params = layer_parameters(md);
}

// The pipeline: the busiest stage's compute and tensor-parallel waits, the bubble, and the
// sends between stages. Returns the busiest stage's index.
std::size_t add_pipeline(StepTime& st, const Step& x) {
  const std::size_t p = x.stages.size();
  std::vector<double> compute(p), comm(p);
  for (std::size_t i = 0; i < p; ++i) {
    const double n = static_cast<double>(x.stages[i]);
    compute[i] = n * (x.lt.forward_compute + x.lt.backward_compute) + (i + 1 == p ? x.logits : 0);
    comm[i] = n * (x.lt.forward_comm + x.lt.backward_comm);
  }
  std::size_t busiest = 0;
  for (std::size_t i = 1; i < p; ++i)
    if (compute[i] + comm[i] > compute[busiest] + comm[busiest]) busiest = i;
  const double busiest_total = compute[busiest] + comm[busiest];
  st.compute = x.m * compute[busiest];
  st.exposed_tp = x.m * comm[busiest];
  // 1F1B (11.5): the busiest stage runs its m micro-batches back to back; before its first and
  // after its last, the pipeline fills and drains through the other stages, each chunk of
  // 1/v of a stage's work at a time, so the wait is the other stages' time over v
  // ((p-1)/v of a stage when they are even).
  const double all_stages = std::accumulate(compute.begin(), compute.end(), 0.0) +
                            std::accumulate(comm.begin(), comm.end(), 0.0);
  st.bubble = (all_stages - busiest_total) / static_cast<double>(x.l.interleave);
  // Pipeline sends: each micro-batch enters and leaves every one of the stage's v chunks,
  // activations forward and gradients backward; each tp GPU sends its 1/t slice (11.7).
  st.p2p_bytes = x.tokens * static_cast<double>(x.md.hidden) * kBf16 / x.t;
  if (x.l.pp > 1) {
    const bool across = x.l.tp * x.l.pp > x.hw.gpus_per_server;
    st.p2p =
        2 * x.m * static_cast<double>(x.l.interleave) * link_seconds(st.p2p_bytes, across, x.hw);
  }
  return busiest;
}

// One GPU's parameters on stage i: its layers' 1/t and, on the first or last stage, 1/t of the
// embedding (the last stage keeps a tied copy for the logits).
double stage_params(const Step& x, std::size_t i) {
  const double embedding = static_cast<double>(x.md.vocab) * static_cast<double>(x.md.hidden);
  const bool holds_embedding = i == 0 || i + 1 == x.stages.size();
  return (static_cast<double>(x.stages[i]) * x.layer_params + (holds_embedding ? embedding : 0)) /
         x.t;
}

// Data-parallel collectives of this GPU's parameters (11.2, 11.3): the gradient all-reduce,
// or ZeRO's reduce-scatter of gradients and all-gather of weights; stages 2 and 3 repeat
// theirs in every micro-batch (zero_repeats). What is left once overlap has hidden what it can.
double exposed_dp_seconds(const Step& x, std::size_t busiest, double params_here) {
  const RunLayout& l = x.l;
  const double d = static_cast<double>(l.dp), m = x.m;
  const bool across = l.tp * l.pp * l.dp > x.hw.gpus_per_server;
  const double grads = params_here * l.grad_bytes, weights = params_here * kBf16;
  const double rs = link_seconds(ring_factor(d) * grads, across, x.hw);
  const double ag = link_seconds(ring_factor(d) * weights, across, x.hw);
  double dp_time = 0;
  switch (l.zero_stage) {
    case 0:
      dp_time = link_seconds(2 * ring_factor(d) * grads, across, x.hw);
      break;
    case 1:
      dp_time = rs + ag;
      break;
    case 2:
      dp_time = m * rs + ag;
      break;
    default:
      dp_time = m * (rs + 2 * ag);
      break;
  }
  // Overlapped, stage 0 and 1 hide behind the last micro-batch's backward (the gradients are
  // final only then); stages 2 and 3 spread over every micro-batch.
  const double window = (l.zero_stage >= 2 ? m : 1.0) * static_cast<double>(x.stages[busiest]) *
                        (x.lt.backward_compute + x.lt.backward_comm);
  return l.dp_overlap ? std::max(0.0, dp_time - window) : dp_time;
}

// Adam on this GPU's share (all of it, or 1/dp of it under ZeRO): read the fp32 master weight,
// both moments and the fp32 gradient (16 bytes), write the three back and the bf16 weight
// (14 bytes).
double optimizer_seconds(const Step& x, double params) {
  return memory_seconds(30 * params / (x.l.zero_stage >= 1 ? static_cast<double>(x.l.dp) : 1.0),
                        x.hw);
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
    if (i + 1 == p) {
      sg.logits_forward = x.logits_forward;
      sg.logits_backward = x.logits - x.logits_forward;
    }
    sg.params = stage_params(x, i);
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
  const double gpus = x.t * static_cast<double>(x.l.pp) * static_cast<double>(x.l.dp);
  const double gpu_seconds = st.seconds * gpus;
  st.tflops_per_gpu = st.hardware_flops / gpu_seconds / 1e12;
  st.paper_tflops_per_gpu = st.paper_flops / gpu_seconds / 1e12;
  st.mfu = st.model_flops / (gpu_seconds * x.hw.peak_flops);
  st.hfu = st.hardware_flops / (gpu_seconds * x.hw.peak_flops);
}

}  // namespace

StepTime step_time(const RunModel& model, const RunLayout& layout, const Hardware& hw) {
  const Step x(model, layout, hw);
  StepTime st;
  st.micro_batches = x.md.global_batch / (layout.micro_batch * layout.dp);
  st.layer_forward = x.lt.forward_compute + x.lt.forward_comm;
  st.layer_backward = x.lt.backward_compute + x.lt.backward_comm;
  const std::size_t busiest = add_pipeline(st, x);
  const double h = static_cast<double>(x.md.hidden), V = static_cast<double>(x.md.vocab);
  st.params = static_cast<double>(x.md.layers) * x.layer_params + V * h;
  const double params_here = stage_params(x, busiest);
  if (layout.dp > 1) st.exposed_dp = exposed_dp_seconds(x, busiest, params_here);
  st.optimizer = optimizer_seconds(x, params_here);
  add_stages(st, x);
  st.seconds = st.compute + st.exposed_tp + st.bubble + st.p2p + st.exposed_dp + st.optimizer;
  add_flops(st, x);
  return st;
}

}  // namespace mgpu::planner
