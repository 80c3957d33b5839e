// The inputs of `mgpu plan`: a model, a cluster and a parallel layout, plus their checks.
// Options is plain data so that tests and the CLI build it the same way; validate() is the one
// place that decides whether a layout makes sense, and its messages say how to fix it.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "11_1_memory/formulas.hpp"
#include "errors.hpp"

namespace mgpu::planner {

/// A flag value the planner cannot use, e.g. "--tp 3 does not divide --gpus-per-node 8: use --tp
/// 1, 2, 4 or 8" (tools/errors.hpp).
using UsageError = tools::UsageError;

/// What is recomputed in the backward pass (section 11.6): the 11.1 chapter's policy.
using Recompute = mgpu::Recompute;

/// "none", "selective" or "full".
const char* to_string(Recompute r);

/// Parses "none", "selective" or "full"; anything else throws UsageError naming the choices.
Recompute parse_recompute(const std::string& text);

/// The model as both halves of the planner see it, memory and step time alike: the chapters'
/// transformer shape, the two per-layer choices of 11.1's memory::ActivationOptions (its third,
/// the tensor-parallel degree, is Options::tp), and what a modern decoder adds to the course's
/// GPT: grouped-query attention, the FFN's width and gating, fused attention, uneven first and
/// last pipeline stages and the vocabulary. Every field feeds the memory, the traffic and the
/// step time, so a flag can never mean one thing to one half and nothing to the other.
struct ModelShape {
  TransformerShape transformer;           ///< s, b, h, a and L, every one given
  Recompute recompute = Recompute::none;  ///< activation checkpointing policy
  bool sequence_parallel = false;         ///< shard the non-tensor-parallel activations over tp too
  std::int64_t kv_heads = 0;              ///< key/value heads (grouped-query attention); 0: = heads
  std::int64_t ffn = 0;                   ///< FFN inner size; 0: 4 h
  bool swiglu = false;                    ///< gated FFN: three h x ffn matrices instead of two
  bool flash_attention = false;           ///< fused attention: no s x s scores kept or written
  /// Layers on the first and on the last pipeline stage when they differ from the others
  /// (0: as the others); the stages between share the rest evenly (stage_layers()).
  std::int64_t first_stage_layers = 0, last_stage_layers = 0;
  /// Vocabulary V; 0: unknown, and the embedding and output layer are left out of the stages'
  /// parameters (Psi is then shared by the layers alone).
  std::int64_t vocab = 0;

  /// Key/value heads, heads when not given.
  [[nodiscard]] std::int64_t kv() const { return kv_heads > 0 ? kv_heads : transformer.heads; }
  /// FFN inner size, 4 h when not given.
  [[nodiscard]] std::int64_t ffn_size() const { return ffn > 0 ? ffn : 4 * transformer.hidden; }
};

/// Everything `mgpu plan` is asked about. Counts are whole numbers; sizes are bytes, rates FLOP/s.
struct Options {
  double params = 0;                          ///< parameters Psi of the whole model
  std::int64_t gpus = 0;                      ///< total GPUs, = tp * cp * pp * dp
  double gpu_memory_bytes = 80e9;             ///< capacity of one GPU, bytes
  std::string precision = "bf16-mixed-adam";  ///< a name from mgpu::kPrecisionPresets
  int zero_stage = 0;                         ///< ZeRO stage 0 (plain data parallel) to 3
  std::int64_t tp = 1;                        ///< tensor-parallel degree t
  std::int64_t pp = 1;                        ///< pipeline stages p
  std::int64_t cp = 1;                        ///< context-parallel degree c (ring attention)
  std::int64_t micro_batches = 1;             ///< micro-batches per step m
  std::int64_t interleave = 1;      ///< model chunks per pipeline stage v (interleaved 1F1B)
  std::int64_t gpus_per_node = 8;   ///< GPUs sharing one server's fast links
  std::optional<ModelShape> shape;  ///< absent: activations are not estimated
  std::optional<double> tokens;     ///< training tokens D, for FLOPs = 6 Psi D
  std::optional<double> gpu_flops;  ///< sustained (or, with mfu, peak) FLOP/s of one GPU
  double mfu = 1.0;                 ///< fraction of gpu_flops actually achieved, (0, 1]
};

/// Largest GPU count (and tp, pp degree) the planner accepts: far beyond any cluster, and small
/// enough that products of degrees stay exact.
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 31;

/// Largest --layers the planner accepts: it prices every pipeline stage, and pp <= layers.
inline constexpr std::int64_t kMaxLayers = 1'000'000;

/// Checks every constraint between the options; throws UsageError on the first violation.
/// Checks: positive counts and sizes, a known precision preset, zero stage in 0..3, tp*cp*pp
/// divides gpus, tp divides gpus_per_node, interleave v > 1 only with pp > 1 and m a multiple of
/// pp (Megatron's interleaved schedule), and with a shape: the layers split over the stages
/// (stage_layers), heads by tp, hidden by heads, kv heads dividing the heads and divisible by
/// tp, the FFN by tp, the embedding within Psi, and with cp > 1 seq divisible by 2 cp (the
/// zig-zag split of 11.7).
void validate(const Options& o);

/// Layers on each of the pp stages, first to last: layers/pp each, or, when `first` or `last` is
/// positive, that many on the first or last stage and the rest shared evenly by the others (the
/// embedding and the output layer sit on those two stages, so they are given fewer layers).
/// Throws UsageError naming the flags and a split that works, e.g. "--layers 126 does not split
/// into --pp 16 equal stages: ... or give the end stages fewer: --first-stage-layers 7
/// --last-stage-layers 7".
std::vector<std::int64_t> stage_layers(std::int64_t layers, std::int64_t pp, std::int64_t first,
                                       std::int64_t last);

/// stage_layers of the options' shape; empty without a shape.
std::vector<std::int64_t> stage_layers(const Options& o);

/// Parameters one GPU of each stage holds: Psi = `params` less the embedding (`embedding` =
/// V h, 0 when the vocabulary is unknown) shared by the stages in proportion to their layers,
/// plus V h on the first stage (the input embedding) and V h on the last (the output layer, a
/// tied copy or its own weights; once when there is one stage), all of it split over tp.
/// Even stages without a vocabulary give Psi / (tp pp) each, the course's share.
std::vector<double> stage_params_per_gpu(double params, const std::vector<std::int64_t>& layers,
                                         double embedding, std::int64_t tp);

/// Point-to-point sends of one micro-batch's activations or gradients that the busiest pipeline
/// stage makes per step: none with one stage; with two, stage 0 sends forward from each of its
/// v chunks and backward from all but its first: 2v - 1; a middle stage of more sends forward and
/// backward from each chunk: 2v. (11.5's boundary_bytes_sent_per_stage is the v = 1 count.)
double pipeline_sends_per_micro_batch(std::int64_t pp, std::int64_t interleave);

/// Data-parallel degree dp = gpus / (tp * cp * pp); call after validate().
std::int64_t data_parallel_degree(const Options& o);

/// The ranks that hold the same weights and so reduce (and, under ZeRO, shard) their gradients
/// together: the dp replicas times the cp ranks that share a sequence, gpus / (tp * pp). Equal
/// to data_parallel_degree when cp = 1. Call after validate().
std::int64_t gradient_group(const Options& o);

/// Where a context-parallel group sits. Ranks are numbered tp fastest, then cp, so one cp group
/// spans tp * cp consecutive GPUs: inside one server when tp * cp divides gpus_per_node (its
/// keys and values travel on the server's fast links), across servers otherwise.
bool cp_within_server(const Options& o);

}  // namespace mgpu::planner
