// The planner's model: every number `mgpu plan` shows, computed from Options through the
// chapters' formula functions (11.1 to 11.7). The renderers (text, JSON, SVG) only format a Plan,
// so what the terminal, the JSON file and the figure say can never disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/options.hpp"

namespace mgpu::planner {

/// One GPU's memory by category, bytes (the categories of the runtime's memory ledger).
struct MemoryBytes {
  double weights = 0;      ///< bf16 weights this GPU holds
  double grads = 0;        ///< bf16 gradients
  double master = 0;       ///< fp32 master copy of the weights
  double optimizer = 0;    ///< fp32 Adam moments
  double activations = 0;  ///< activations kept for the backward pass (0 without a model shape)
  /// Sum of the five categories.
  double total() const { return weights + grads + master + optimizer + activations; }
};

/// One kind of communication, bytes sent by one GPU in one training step.
struct Traffic {
  std::string kind;   ///< stable key, e.g. "dp_all_reduce", "zero_all_gather", "tp_all_reduce"
  std::string label;  ///< human wording, e.g. "data-parallel gradient all-reduce"
  std::string group;  ///< which ranks talk: "dp", "tp", "pp"
  double bytes = 0;   ///< bytes sent per GPU per step
};

/// One multiplier behind the numbers, with the formula and the chapter function it came from.
struct Factor {
  std::string name;     ///< what it multiplies, e.g. "master bytes per parameter"
  double value = 0;     ///< its value for this plan
  std::string formula;  ///< e.g. "12 Psi / N_d" or "(p-1)/(m+p-1)"
  std::string source;   ///< e.g. "mgpu::zero::state_bytes_per_gpu (11.3)"
};

/// Everything the planner reports for one layout.
struct Plan {
  Options options;            ///< the validated inputs
  std::int64_t dp = 1;        ///< data-parallel degree, gpus / (tp * pp)
  double params_per_gpu = 0;  ///< parameters one GPU computes with, Psi / (tp * pp)
  MemoryBytes memory;         ///< one GPU's memory at options.gpus
  bool fits = false;          ///< memory.total() <= capacity
  std::optional<std::int64_t>
      min_gpus;               ///< fewest GPUs (same tp, pp, whole nodes) that fit; empty: none
  MemoryBytes memory_at_min;  ///< one GPU's memory at min_gpus (when it exists)
  std::optional<std::int64_t>
      min_gpus_any;               ///< the same allowing a partial node (any multiple of tp*pp)
  MemoryBytes memory_at_min_any;  ///< one GPU's memory at min_gpus_any (when it exists)
  std::vector<Traffic> traffic;   ///< per-GPU bytes per step, by kind
  std::optional<double> dp_traffic_vs_plain;  ///< data-parallel bytes / stage-0 bytes (dp > 1)
  double bubble = 0;                          ///< idle fraction of a pipeline step, GPipe/1F1B
  std::optional<double> flops;                ///< training FLOPs, with --tokens
  std::optional<double> seconds;        ///< wall-clock training time with recompute and bubble
  std::optional<double> seconds_ideal;  ///< 6 Psi D / (G x rate x mfu): perfect scaling, no bubble
  double recompute_extra_fraction = 0;  ///< extra compute of full recompute (0 otherwise)
  std::vector<Factor> factors;          ///< every multiplier, for --explain and the JSON

  /// Sum of traffic bytes over all kinds.
  double traffic_total() const;
};

/// A parameter or token count the way the text writes it: 70e9 -> "70B", 1.5e12 -> "1.5T".
std::string format_count(double n);

/// Largest GPU count the fewest-GPUs search tries before it answers "never fits".
/// The same bound as the options accept, so a count that fits is always found.
inline constexpr std::int64_t kMaxSearchGpus = kMaxGpus;

/// Validates the options and computes the plan through the chapter functions.
/// Throws UsageError for bad options; lets mgpu::NotImplemented from a student skeleton through.
Plan make_plan(const Options& o);

/// One GPU's memory for these options (no validation, no search): the quantity the search and
/// the bar chart are built on.
MemoryBytes memory_per_gpu(const Options& o);

/// Fewest GPUs with the same tp and pp at which memory_per_gpu fits the capacity, up to
/// kMaxSearchGpus; empty when even the largest count does not fit (e.g. ZeRO stage 0: nothing is
/// sharded, so adding GPUs never helps). Counts step by tp*pp; with `whole_nodes`, counts above
/// one node must also fill whole nodes of gpus_per_node (how clusters are allocated: 70e9 at
/// stage 3 in 80 GB needs 14 GPUs, or 16 in whole 8-GPU nodes). Relies on memory per GPU never
/// growing with dp, which holds for every ZeRO stage.
std::optional<std::int64_t> min_gpus_that_fit(const Options& o, bool whole_nodes);

}  // namespace mgpu::planner
