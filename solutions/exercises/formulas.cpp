// Module 11 exercises, reference solution: each answer is computed from the chapter formulas,
// not typed in. Implements chapters/exercises/formulas.hpp.
#include "exercises/formulas.hpp"

#include <stdexcept>
#include <string>

#include "11_3_zero/formulas.hpp"
#include "11_5_pipeline/formulas.hpp"
#include "mgpu/course.hpp"  // kBf16MixedAdam

namespace mgpu::exercises {

double zero3_state_gb_per_gpu(double params, std::int64_t gpus) {
  return zero::zero_state_bytes_per_gpu(params, kBf16MixedAdam, 3, gpus) / kBytesPerGB;
}

double bubble_fraction(std::int64_t stages, std::int64_t micro_batches) {
  return pipeline::gpipe_bubble_fraction(stages, micro_batches);
}

double zero1_state_gb_per_gpu(double params, std::int64_t gpus) {
  return zero::zero_state_bytes_per_gpu(params, kBf16MixedAdam, 1, gpus) / kBytesPerGB;
}

Effect training_state_effect(Technique technique) {
  switch (technique) {
    case Technique::data_parallel:
      return Effect::only_raises_throughput;  // full copy everywhere
    case Technique::zero:
      return Effect::reduces_memory_per_gpu;  // shards the state
    case Technique::tensor_parallel:
      return Effect::reduces_memory_per_gpu;  // splits each matrix
    case Technique::pipeline_parallel:
      return Effect::reduces_memory_per_gpu;  // splits the layers
  }
  throw std::invalid_argument(
      "training_state_effect: technique=" + std::to_string(static_cast<int>(technique)) +
      " is not a Technique value");
}

bool communication_on_critical_path(Technique technique) {
  switch (technique) {
    case Technique::tensor_parallel:
      return true;                      // the next matmul needs the summed output
    case Technique::data_parallel:      // buckets overlap with the backward
    case Technique::zero:               // gathers are prefetched a layer ahead
    case Technique::pipeline_parallel:  // other micro-batches fill the wait
      return false;
  }
  throw std::invalid_argument(
      "communication_on_critical_path: technique=" + std::to_string(static_cast<int>(technique)) +
      " is not a Technique value");
}

TensorParallelLinkComparison tensor_parallel_link_comparison(
    std::int64_t seq, std::int64_t micro_batch, std::int64_t hidden, std::int64_t t,
    double bytes_per_element, const data_parallel::LinkModel& intra_node,
    const data_parallel::LinkModel& inter_node) {
  const char* where = "tensor_parallel_link_comparison";
  auto at_least = [&](const char* name, std::int64_t value, std::int64_t low) {
    if (value < low)
      throw std::invalid_argument(std::string(where) + ": " + name + "=" + std::to_string(value) +
                                  " is below " + std::to_string(low) + ": use " +
                                  std::to_string(low) + " or more");
  };
  at_least("seq", seq, 1);
  at_least("micro_batch", micro_batch, 1);
  at_least("hidden", hidden, 1);
  at_least("t", t, 2);  // one rank has nothing to all-reduce, so nothing to compare
  if (!(bytes_per_element > 0))
    throw std::invalid_argument(std::string(where) + ": bytes_per_element=" +
                                std::to_string(bytes_per_element) + " is not positive: use e.g. 2");
  TensorParallelLinkComparison c;
  c.payload_bytes = static_cast<double>(seq) * static_cast<double>(micro_batch) *
                    static_cast<double>(hidden) * bytes_per_element;
  c.intra_node_seconds = data_parallel::ring_all_reduce_seconds(t, c.payload_bytes, intra_node);
  c.inter_node_seconds = data_parallel::ring_all_reduce_seconds(t, c.payload_bytes, inter_node);
  c.slowdown = c.inter_node_seconds / c.intra_node_seconds;
  return c;
}

}  // namespace mgpu::exercises
