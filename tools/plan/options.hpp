// The inputs of `mgpu plan`: a model, a cluster and a parallel layout, plus their checks.
// Options is plain data so that tests and the CLI build it the same way; validate() is the one
// place that decides whether a layout makes sense, and its messages say how to fix it.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

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

/// The model as the activation estimate sees it, needed only for activation memory and
/// tensor/pipeline traffic: the chapters' transformer shape and the two per-layer choices of
/// 11.1's memory::ActivationOptions (its third, the tensor-parallel degree, is Options::tp).
struct ModelShape {
  TransformerShape transformer;           ///< s, b, h, a and L, every one given
  Recompute recompute = Recompute::none;  ///< activation checkpointing policy
  bool sequence_parallel = false;         ///< shard the non-tensor-parallel activations over tp too
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
  std::int64_t gpus_per_node = 8;             ///< GPUs sharing one server's fast links
  std::optional<ModelShape> shape;            ///< absent: activations are not estimated
  std::optional<double> tokens;               ///< training tokens D, for FLOPs = 6 Psi D
  std::optional<double> gpu_flops;            ///< sustained (or, with mfu, peak) FLOP/s of one GPU
  double mfu = 1.0;                           ///< fraction of gpu_flops actually achieved, (0, 1]
};

/// Largest GPU count (and tp, pp degree) the planner accepts: far beyond any cluster, and small
/// enough that products of degrees stay exact.
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 31;

/// Checks every constraint between the options; throws UsageError on the first violation.
/// Checks: positive counts and sizes, a known precision preset, zero stage in 0..3, tp*cp*pp
/// divides gpus, tp divides gpus_per_node, and with a shape: layers divisible by pp, heads by tp,
/// hidden by heads, and with cp > 1 seq divisible by 2 cp (the zig-zag split of 11.7).
void validate(const Options& o);

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
