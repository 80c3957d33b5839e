// The time of one training step from the layout's schedule and a hardware description: per
// layer the GEMMs by shape, the attention core, the memory-bound operations, the tensor-parallel
// collectives and ring attention's exposed sends; per stage the pipeline sends and the bubble;
// per step the data-parallel collectives (plain, ZeRO 1 to 3) and the optimizer. A per-operation
// cost model in the spirit of the course's formulas (11.1 FLOPs, 11.4 collectives per layer, 11.5
// bubble, 11.6 recompute), priced on a Hardware preset (plan/hardware.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/hardware.hpp"
#include "plan/options.hpp"

namespace mgpu::planner {

/// The model of a real run: a decoder-only transformer.
struct RunModel {
  std::int64_t layers = 0;        ///< L
  std::int64_t hidden = 0;        ///< h
  std::int64_t heads = 0;         ///< a, query heads
  std::int64_t kv_heads = 0;      ///< key/value heads (grouped-query attention); 0: = heads
  std::int64_t ffn = 0;           ///< FFN inner size; 0: 4h
  bool swiglu = false;            ///< gated FFN: three h x ffn matrices instead of two
  std::int64_t seq = 0;           ///< s, tokens per sequence
  std::int64_t vocab = 0;         ///< V
  std::int64_t global_batch = 0;  ///< B, sequences per step
  /// Parameters of the whole model as its authors count them (`mgpu plan --params`), shared by
  /// the stages as the memory report shares them (stage_params_per_gpu); 0: counted from the
  /// shape, L layers and one V h embedding. FLOPs always come from the shape.
  double params = 0;
};

/// How the run was laid out and what it recomputed.
struct RunLayout {
  std::int64_t tp = 1, pp = 1, dp = 1;  ///< degrees; GPUs = tp cp pp dp
  std::int64_t cp = 1;  ///< context parallel: ranks sharing each sequence (ring attention, 11.7)
  std::int64_t micro_batch = 1;  ///< b, sequences per micro-batch
  std::int64_t interleave = 1;   ///< v, model chunks per pipeline stage
  /// Layers on the first and on the last stage when they differ from L/p (0: L/p); the other
  /// stages share the rest evenly.
  std::int64_t first_stage_layers = 0, last_stage_layers = 0;
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  bool flash_attention = false;  ///< fused attention: no s x s scores in memory
  int zero_stage = 0;            ///< 0: all-reduce of gradients; 1..3: ZeRO's collectives
  /// Data-parallel collectives overlap the compute: gradients the backward (stages 0 to 2),
  /// ZeRO-3's layer-by-layer gathers the forward and backward (exposed_dp_seconds says how).
  bool dp_overlap = false;
  double grad_bytes = 2;    ///< bytes per gradient element communicated
  double weight_bytes = 2;  ///< bytes per weight element ZeRO all-gathers
};

/// One step of ring attention's exchange (11.7) on one GPU of the cp group: it sends `bytes` to
/// the next rank of the ring while it computes `block_seconds` of its attention core, the block
/// whose keys and values it already holds, so only what the send takes beyond that is waited for.
struct RingStep {
  double bytes = 0;          ///< keys and values (backward: with their two gradients), bf16
  double block_seconds = 0;  ///< attention compute that hides the send
};

/// One pipeline stage as one of its GPUs sees it, per micro-batch: what a simulation of the
/// schedule (plan/simulate.hpp) runs. The forward and backward of the stage's layers, the
/// logits' on the last stage; `*_tp` is the exposed tensor-parallel part of each.
struct StageTime {
  std::int64_t layers = 0;       ///< transformer layers on the stage
  double layer_forward = 0;      ///< one layer's forward compute (no tp collectives)
  double layer_backward = 0;     ///< one layer's backward compute, recompute included
  double layer_forward_tp = 0;   ///< one layer's forward exposed tp time
  double layer_backward_tp = 0;  ///< one layer's backward exposed tp time
  double logits_forward = 0;     ///< the logits and loss forward (last stage only, else 0)
  double logits_backward = 0;    ///< their backward
  double params = 0;             ///< parameters on one GPU of the stage
  double optimizer = 0;          ///< seconds of the optimizer step on that GPU
  /// Ring attention's steps in one layer's forward and backward, in order (none without cp):
  /// their blocks are part of layer_forward and layer_backward above, and the step model charges
  /// each step's send beyond its block as exposed cp time.
  std::vector<RingStep> ring_forward, ring_backward;
};

/// One step, in seconds, by where the time goes; the parts add up to `seconds`.
struct StepTime {
  double compute = 0;     ///< busiest stage's GEMMs, attention, memory-bound ops, m micro-batches
  double exposed_tp = 0;  ///< tensor-parallel collectives on NVLink (not overlapped)
  double exposed_cp = 0;  ///< ring attention's sends that one block's compute does not hide
  double bubble = 0;      ///< pipeline fill and drain: (other stages' time) / v
  double p2p = 0;         ///< pipeline sends between stages
  double exposed_dp = 0;  ///< data-parallel collectives not hidden behind the backward
  double optimizer = 0;   ///< the optimizer step on this GPU's parameters
  double seconds = 0;     ///< sum of the above
  std::int64_t micro_batches = 0;   ///< m = B / (b dp)
  double params = 0;                ///< parameters of the model
  double model_flops = 0;           ///< forward + backward FLOPs of the step (no recompute)
  double hardware_flops = 0;        ///< model_flops plus what recompute runs again
  double paper_flops = 0;           ///< 96 B s L h^2 (1 + s/6h + V/16Lh) (Narayanan et al. 2021)
  double tflops_per_gpu = 0;        ///< hardware_flops / (seconds GPUs) / 1e12
  double paper_tflops_per_gpu = 0;  ///< paper_flops / (seconds GPUs) / 1e12
  double mfu = 0;                   ///< model_flops / (seconds GPUs peak)
  double hfu = 0;                   ///< hardware_flops / (seconds GPUs peak)
  double layer_forward = 0;         ///< one layer, one micro-batch, forward (with its tp comms)
  double layer_backward = 0;        ///< the same layer's backward (with recompute and comms)
  std::vector<StageTime> stages;    ///< every pipeline stage, first to last
  double p2p_bytes = 0;             ///< one pipeline send of one GPU (its 1/t of b s/c h bf16)
  /// Bytes one GPU sends per step, by group, counted here from the step's own operations: the
  /// tp and cp bytes of the stage with the most layers, the pp bytes of the busiest sender (a
  /// middle stage), the dp bytes of the stage holding the most parameters. The memory report
  /// (plan/model.hpp) counts the same bytes through the chapter functions.
  double tp_bytes = 0, pp_bytes = 0, cp_bytes = 0, dp_bytes = 0;
};

/// Checks the run and prices one step on `hw`. Throws UsageError for a layout that does not fit
/// the model (heads or kv heads not divisible by tp, B not divisible by b dp, layers not
/// matching stages, seq not divisible by 2 cp, m not a multiple of pp when interleaved).
StepTime step_time(const RunModel& model, const RunLayout& layout, const Hardware& hw);

}  // namespace mgpu::planner
