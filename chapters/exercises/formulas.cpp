// Module 11 exercises, skeleton: build each answer from the chapter formulas you wrote (call
// them, do not type the number in). The contract is in formulas.hpp; fill in each TODO.
#include "exercises/formulas.hpp"

#include <stdexcept>
#include <string>

#include "11_1_memory/formulas.hpp"
#include "11_3_zero/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "mgpu/not_implemented.hpp"

namespace mgpu::exercises {

double zero3_state_gb_per_gpu(double params, std::int64_t gpus) {
  // TODO(exercises): zero::zero_state_bytes_per_gpu with memory::kBf16MixedAdam, in GB.
  throw NotImplemented("exercises zero3_state_gb_per_gpu");
}

double bubble_fraction(std::int64_t stages, std::int64_t micro_batches) {
  // TODO(exercises): section 11.5's formula, through your pipeline chapter.
  throw NotImplemented("exercises bubble_fraction");
}

double zero1_state_gb_per_gpu(double params, std::int64_t gpus) {
  // TODO(exercises): as apply 1, at stage 1.
  throw NotImplemented("exercises zero1_state_gb_per_gpu");
}

Effect training_state_effect(Technique technique) {
  // TODO(exercises): one case per technique. Ask: as GPUs are added, does any GPU stop holding
  // some of the weights, gradients or optimizer state?
  throw NotImplemented("exercises training_state_effect");
}

bool communication_on_critical_path(Technique technique) {
  // TODO(exercises): one case per technique. Ask: can useful computation run while this
  // communication is in flight?
  throw NotImplemented("exercises communication_on_critical_path");
}

TensorParallelLinkComparison tensor_parallel_link_comparison(
    std::int64_t seq, std::int64_t micro_batch, std::int64_t hidden, std::int64_t t,
    double bytes_per_element, const data_parallel::LinkModel& intra_node,
    const data_parallel::LinkModel& inter_node) {
  // TODO(exercises): validate (t >= 2, sizes >= 1, bytes_per_element > 0); the payload is one
  // block activation; time it with data_parallel::ring_all_reduce_seconds on each link.
  throw NotImplemented("exercises tensor_parallel_link_comparison");
}

}  // namespace mgpu::exercises
