// Module 11 exercises, skeleton: build each answer from the chapter formulas you wrote (call
// them, do not type the number in). The contract is in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint exercises <id>` gives hints.
#include "exercises/formulas.hpp"

#include <stdexcept>
#include <string>

#include "11_3_zero/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "mgpu/course.hpp"  // kBf16MixedAdam
#include "mgpu/not_implemented.hpp"

namespace mgpu::exercises {

double zero3_state_gb_per_gpu(double params, std::int64_t gpus) {
  // TODO(exercises zero3_state_gb_per_gpu): the answer in decimal GB (kBytesPerGB), computed by
  // your 11.3 formulas (zero::zero_state_bytes_per_gpu) with the 16-byte recipe, never typed in.
  throw NotImplemented("exercises zero3_state_gb_per_gpu");
}

double bubble_fraction(std::int64_t stages, std::int64_t micro_batches) {
  // TODO(exercises bubble_fraction): the answer computed by your 11.5 formulas.
  throw NotImplemented("exercises bubble_fraction");
}

double zero1_state_gb_per_gpu(double params, std::int64_t gpus) {
  // TODO(exercises zero1_state_gb_per_gpu): the answer in decimal GB, through your 11.3 formulas.
  // Write the formula on paper first and check that the function agrees with it.
  throw NotImplemented("exercises zero1_state_gb_per_gpu");
}

Effect training_state_effect(Technique technique) {
  // TODO(exercises training_state_effect): one answer per Technique, each one you can justify
  // by what that technique splits; a value outside the enum throws.
  throw NotImplemented("exercises training_state_effect");
}

bool communication_on_critical_path(Technique technique) {
  // TODO(exercises communication_on_critical_path): one answer per Technique, following the
  // header's definition of the critical path; a value outside the enum throws.
  throw NotImplemented("exercises communication_on_critical_path");
}

TensorParallelLinkComparison tensor_parallel_link_comparison(
    std::int64_t seq, std::int64_t micro_batch, std::int64_t hidden, std::int64_t t,
    double bytes_per_element, const data_parallel::LinkModel& intra_node,
    const data_parallel::LinkModel& inter_node) {
  // TODO(exercises tensor_parallel_link_comparison): every field of the result, the times from
  // your 11.2 data_parallel::ring_all_reduce_seconds; the header's bad inputs throw, naming
  // the value.
  throw NotImplemented("exercises tensor_parallel_link_comparison");
}

}  // namespace mgpu::exercises
