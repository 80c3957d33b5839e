// What the planner model's three sources share, and nothing the rest of the planner needs:
// model.cpp computes the plan, advice.cpp the changes suggested for a layout that does not fit,
// explain.cpp the factors --explain and the JSON show. The interface is plan/model.hpp.
#pragma once

#include <vector>

#include "11_1_memory/formulas.hpp"
#include "11_7_3d_and_experts/formulas.hpp"
#include "plan/model.hpp"
#include "plan/options.hpp"

namespace mgpu::planner::detail {

inline constexpr double kActivationElementBytes = 2;  // bf16 activations, as in Korthikanti et al.
inline constexpr double kChapterCpElementBytes = 4;   // 11.7's context-parallel formulas count fp32

/// The 11.1 activation options of this layout (tp, sequence parallelism, recompute); needs a shape.
memory::ActivationOptions activation_options(const Options& o);

/// Activations one layer keeps for one micro-batch on one GPU of this layout: 11.1's
/// activation_bytes_per_layer (Korthikanti et al.'s GPT) with the shape's grouped-query
/// attention, FFN width and gating and fused attention counted in place of the GPT's, divided
/// over the cp ranks (cp_activation_share); needs a shape.
double layer_activation_bytes(const Options& o);

/// Micro-batches whose activations pipeline stage `stage` holds at its peak, in whole stages'
/// worth: 11.5's in_flight_micro_batches for 1F1B, min(m, p - stage); with interleave v > 1,
/// schedule_in_flight of 11.5's interleaved_one_f_one_b_schedule (chunks of 1/v of the stage)
/// over v.
double in_flight_micro_batches(const Options& o, std::int64_t stage);

/// V h, the parameters of the embedding (and of the output layer again); 0 without --vocab.
double embedding_params(const Options& o);

/// The chapter 11.7 description of pipeline stage `stage` of this layout: per_gpu_memory and
/// per_gpu_traffic, which give every GPU Psi / (tp pp) parameters, L / pp layers and min(m, pp)
/// micro-batches in flight, are asked about a pipeline whose every stage is like this one (its
/// share of the parameters, its layers, its activations in flight). Without a model shape,
/// activations are zero and the shape is a placeholder with one layer per stage (so pp divides
/// it); callers then ignore the tensor and pipeline traffic, which would describe that
/// placeholder.
layout::LayoutModel layout_model_of_stage(const Options& o, std::int64_t stage);

/// The stage holding the most layers (the first of them): the one whose tensor-parallel and
/// ring-attention traffic the report shows.
std::int64_t stage_with_most_layers(const Options& o);

/// layout_model_of_stage of the stage with the most layers.
layout::LayoutModel layout_model(const Options& o);

/// A part of a computed structure as a row of its own, pending while the whole is.
template <class S, class T>
Row<T> part(const Row<S>& whole, T S::*field) {
  if (whole.has_value()) return Row<T>((*whole).*field);
  return whole.is_pending() ? Row<T>::pending(whole.missing()) : Row<T>();
}

/// The suggestions for a plan whose memory is computed and does not fit (advice.cpp).
std::vector<Advice> evaluate_advice(const Plan& p);

/// Appends to p.factors every multiplier behind the memory, traffic and bubble rows (explain.cpp).
void add_factors(Plan& p, const PrecisionRecipe& recipe);

}  // namespace mgpu::planner::detail
