// The planner's model: every number `mgpu plan` shows, computed from Options through the
// chapters' formula functions (11.1 to 11.7). The renderers (text, JSON, SVG) only format a Plan,
// so what the terminal, the JSON file and the figure say can never disagree.
// Each number is a Row: computed, or waiting for the chapter function that teaches it, so a
// student who has finished the first chapters sees every row those chapters can answer.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mgpu/not_implemented.hpp>

#include "11_7_3d_and_experts/formulas.hpp"  // layout::GpuMemory: one GPU's memory by category
#include "plan/options.hpp"

namespace mgpu::planner {

/// One number of the report in one of three states: computed; pending, because the chapter
/// function that computes it still throws mgpu::NotImplemented (a student build on a chapter not
/// done yet); or not asked for (the training time without --tokens, say), which shows nothing.
template <class T>
class Row {
 public:
  /// Not asked for.
  Row() = default;
  /// Computed.
  Row(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// Waiting for `function`, as a NotImplemented message names it ("11.7 per_gpu_memory").
  static Row pending(std::string function) {
    Row r;
    r.missing_ = std::move(function);
    return r;
  }
  /// True when computed.
  bool has_value() const { return value_.has_value(); }
  /// True when a chapter function is still to be written for it.
  bool is_pending() const { return !missing_.empty(); }
  /// True when the report shows it, computed or pending.
  bool shown() const { return has_value() || is_pending(); }
  /// The function it waits for, e.g. "11.7 per_gpu_memory"; empty unless pending.
  const std::string& missing() const { return missing_; }
  /// The value. Without one it throws: mgpu::NotImplemented naming the function again when
  /// pending (what a test on the student build reports), std::logic_error when not asked for;
  /// so a view can never print a made-up number for a row it forgot to check.
  const T& operator*() const {
    if (is_pending()) throw mgpu::NotImplemented(missing_);
    if (!value_) throw std::logic_error("planner: a row that was not asked for was read");
    return *value_;
  }
  /// Member access to the value; throws as operator*.
  const T* operator->() const { return &**this; }

 private:
  std::optional<T> value_;
  std::string missing_;
};

/// The section and function a NotImplemented message names: "not implemented: 11.3 x" -> "11.3 x".
std::string missing_function(const mgpu::NotImplemented& e);

/// Runs `compute`; its result as a Row, or a pending Row naming the chapter function that threw
/// NotImplemented. Every other exception passes through.
template <class F>
auto compute_row(F&& compute) -> Row<std::decay_t<std::invoke_result_t<F>>> {
  using T = std::decay_t<std::invoke_result_t<F>>;
  try {
    return Row<T>(compute());
  } catch (const mgpu::NotImplemented& e) {
    return Row<T>::pending(missing_function(e));
  }
}

/// The one test of "fits" that the verdict, the fewest-GPUs search and every suggestion use:
/// the busiest GPU needs at most the capacity (--gpu-memory). No headroom is kept back; a count
/// that fills a GPU to exactly 100% fits, and the report prints the percentage beside it.
inline bool fits_capacity(const layout::GpuMemory& m, const Options& o) {
  return m.total_bytes() <= o.gpu_memory_bytes;
}

/// One kind of communication, bytes sent by one GPU in one training step.
struct Traffic {
  std::string kind;   ///< stable key, e.g. "dp_all_reduce", "zero_all_gather", "tp_all_reduce"
  std::string label;  ///< human wording, e.g. "data-parallel gradient all-reduce"
  std::string group;  ///< which ranks talk: "dp", "tp", "pp", "cp"
  Row<double> bytes;  ///< bytes sent per GPU per step
};

/// One multiplier behind the numbers, with the formula and the chapter function it came from.
struct Factor {
  std::string name;     ///< what it multiplies, e.g. "master bytes per parameter"
  Row<double> value;    ///< its value for this plan
  std::string formula;  ///< e.g. "12 Psi / N_d" or "(p-1)/(m+p-1)"
  std::string source;   ///< e.g. "mgpu::zero::state_bytes_per_gpu (11.3)"
};

/// The fewest GPUs that fit, with the same tp and pp.
struct FewestGpus {
  std::optional<std::int64_t> gpus;  ///< empty: no count up to kMaxSearchGpus fits
  layout::GpuMemory memory;          ///< one GPU's memory at that count (when there is one)
};

/// A change of one option that the report suggests for a layout that does not fit, evaluated
/// before it is printed: same GPU count, everything else unchanged.
struct Advice {
  std::string change;             ///< the flag and value to use, e.g. "--zero 3" or "--pp 8"
  Row<layout::GpuMemory> memory;  ///< one GPU's memory with the change
  bool fits = false;              ///< fits_capacity(memory) (false while pending)
  /// When it does not fit on this count: the fewest GPUs (whole nodes) that fit with the change;
  /// empty when none does. Not asked for when it fits.
  Row<std::optional<std::int64_t>> fits_from;
};

/// Everything the planner reports for one layout.
struct Plan {
  Options options;              ///< the validated inputs
  std::int64_t dp = 1;          ///< data-parallel degree, gpus / (tp * cp * pp)
  std::int64_t grad_group = 1;  ///< ranks reducing gradients together, dp * cp = gpus/(tp pp)
  double params_per_gpu = 0;    ///< parameters of the GPU holding the most, Psi/(tp pp) even
  std::vector<std::int64_t> stage_layers;  ///< layers of each pipeline stage (0s without a shape)
  std::vector<double> stage_params;        ///< parameters one GPU of each stage holds
  std::int64_t memory_stage = 0;           ///< the stage whose GPUs need the most memory
  Row<double> in_flight;  ///< micro-batches (whole stages' worth) memory_stage holds, with a shape
  Row<layout::GpuMemory> memory;    ///< one GPU's memory at options.gpus
  std::string memory_source;        ///< the chapter function the memory rows come from
  Row<bool> fits;                   ///< fits_capacity(memory)
  Row<FewestGpus> min_gpus;         ///< fewest GPUs (same tp, pp, whole nodes) that fit
  Row<FewestGpus> min_gpus_any;     ///< the same allowing a partial node (any multiple of tp*pp)
  std::vector<Advice> advice;       ///< evaluated changes, when the layout does not fit
  std::vector<Traffic> traffic;     ///< per-GPU bytes per step, by kind
  Row<double> dp_traffic_vs_plain;  ///< data-parallel bytes / stage-0 bytes (dp > 1)
  Row<double> bubble;   ///< idle fraction of a pipeline step: 1F1B, interleaved, uneven stages
  Row<double> flops;    ///< training FLOPs, with --tokens
  Row<double> seconds;  ///< wall-clock training time with recompute and bubble
  Row<double> seconds_ideal;            ///< 6 Psi D / (G x rate x mfu): perfect scaling, no bubble
  double recompute_extra_fraction = 0;  ///< extra compute of full recompute (0 otherwise)
  std::vector<Factor> factors;          ///< every multiplier, for --explain and the JSON
  std::vector<std::string> notes;       ///< warnings about the layout, e.g. ZeRO >= 2 with pp > 1

  /// Sum of traffic bytes over all kinds; pending while any kind is.
  Row<double> traffic_total() const;
  /// Every chapter function a row of the text report waits for, in order of first appearance,
  /// without repeats; the --explain factors too when `with_factors`.
  std::vector<std::string> pending_functions(bool with_factors) const;
};

/// Width of the keys (or the values) one tensor-parallel rank holds: kv_heads/tp heads of
/// head_dim = hidden/heads each; hidden/tp without grouped-query attention.
std::int64_t kv_width_per_rank(const ModelShape& s, std::int64_t tp);

/// Tensor-parallel collectives per layer per micro-batch, in all-reduce equivalents (bytes of
/// one all-reduce of the layer's activation): 2 forward + 2 backward, + 2 when full recompute
/// reruns the forward, + 1 with sequence parallelism (the backward all-gathers the two input
/// shards it saved). So 4, 6, 5 or 7.
double tp_all_reduces_per_layer(Recompute recompute, bool sequence_parallel);

/// How many times a step runs ZeRO's per-step collectives: once at stages 0 and 1 (gradients are
/// accumulated whole, then reduced once), m (micro_batches) at stages 2 and 3 (the gradient
/// reduce-scatter after every micro-batch's backward; at stage 3 also the weight all-gathers
/// before every forward and backward).
std::int64_t zero_repeats(const Options& o);

/// Extra compute of selective recompute as a fraction of a step without it: the attention
/// core's forward, 4 b s^2 h FLOPs, again per layer, over 3 (24 b s h^2 + 4 b s^2 h):
/// 4 s / (3 (24 h + 4 s)).
double selective_recompute_extra_fraction(const TransformerShape& s);

/// A parameter or token count the way the text writes it: 70e9 -> "70B", 1.5e12 -> "1.5T".
std::string format_count(double n);

/// Largest GPU count the fewest-GPUs search tries before it answers "never fits".
/// The same bound as the options accept, so a count that fits is always found.
inline constexpr std::int64_t kMaxSearchGpus = kMaxGpus;

/// Validates the options and computes the plan through the chapter functions. A row whose
/// chapter function throws mgpu::NotImplemented is left pending; the rest are computed.
/// Throws UsageError for bad options.
Plan make_plan(const Options& o);

/// One GPU's memory, and the pipeline stage it is on.
struct StageMemory {
  layout::GpuMemory memory;  ///< that GPU's memory by category
  std::int64_t stage = 0;    ///< its pipeline stage, 0 = first
};

/// The busiest GPU's memory for these options (no validation, no search): the quantity the
/// search and the bar chart are built on. Without a model shape it is the training state alone,
/// from 11.1 (nothing sharded: ZeRO stage 0, or one data-parallel GPU) or 11.3 (ZeRO stage 1 to
/// 3) on the GPU's share Psi / (tp pp); with a shape, from 11.7's per_gpu_memory for each stage
/// that can be the busiest (its share of Psi by layers, the embedding on the end stages with
/// --vocab, its layers, its micro-batches in flight), activations included, the largest.
/// Throws mgpu::NotImplemented when a chapter function it needs is not written yet.
StageMemory busiest_stage_memory(const Options& o);

/// busiest_stage_memory's memory.
layout::GpuMemory memory_per_gpu(const Options& o);

/// Which chapter function memory_per_gpu uses for these options, e.g.
/// "mgpu::zero::zero_state_per_gpu (11.3)".
std::string memory_source(const Options& o);

/// Activations one rank keeps per layer with context parallelism, as a fraction of the unsplit
/// layer's: 11.7's cp_saved_activation_bytes_per_rank at c = o.cp over the same at c = 1 (every
/// activation belongs to one token, and each rank keeps its s/c tokens), 1 when cp = 1. Throws
/// mgpu::NotImplemented while that chapter function is a skeleton.
double cp_activation_share(const Options& o);

/// Bytes one GPU sends per step in ring attention (11.7 cp_forward_bytes_per_rank and
/// cp_backward_bytes_per_rank, b sequences): what travels round the ring is each rank's keys and
/// values, so the width is theirs, kv_heads/tp heads of head_dim = h/heads (h/tp without
/// grouped-query attention); per layer and micro-batch, times the layers of the stage holding
/// the most and m, with the forward counted twice under full recompute. The chapter counts fp32
/// elements; the planner sends bf16 activations, so the bytes are scaled from 4 to 2 per
/// element. 0 when cp = 1 or without a shape.
double cp_ring_bytes_per_step(const Options& o);

/// Fewest GPUs with the same tp and pp at which memory_per_gpu fits the capacity, up to
/// kMaxSearchGpus; empty when even the largest count does not fit (e.g. ZeRO stage 0: nothing is
/// sharded, so adding GPUs never helps). Counts step by tp*cp*pp; with `whole_nodes`, counts above
/// one node must also fill whole nodes of gpus_per_node (how clusters are allocated: 70e9 at
/// stage 3 in 80 GB needs 14 GPUs, or 16 in whole 8-GPU nodes). Relies on memory per GPU never
/// growing with dp, which holds for every ZeRO stage. Throws as memory_per_gpu.
std::optional<std::int64_t> min_gpus_that_fit(const Options& o, bool whole_nodes);

}  // namespace mgpu::planner
