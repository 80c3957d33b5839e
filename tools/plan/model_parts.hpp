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

/// The chapter 11.7 description of this layout. Without a model shape, activations are zero and
/// the shape is a placeholder with one layer per stage (so pp divides it); callers then ignore
/// the tensor and pipeline traffic, which would describe that placeholder.
layout::LayoutModel layout_model(const Options& o);

/// A part of a computed structure as a row of its own, pending while the whole is.
template <class S>
Row<double> part(const Row<S>& whole, double S::*field) {
  if (whole.has_value()) return Row<double>((*whole).*field);
  return whole.is_pending() ? Row<double>::pending(whole.missing()) : Row<double>();
}

/// The suggestions for a plan whose memory is computed and does not fit (advice.cpp).
std::vector<Advice> evaluate_advice(const Plan& p);

/// Appends to p.factors every multiplier behind the memory, traffic and bubble rows (explain.cpp).
void add_factors(Plan& p, const PrecisionRecipe& recipe);

}  // namespace mgpu::planner::detail
