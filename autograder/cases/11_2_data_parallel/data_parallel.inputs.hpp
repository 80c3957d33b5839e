// What each rank of 11.2's training cases is given (data_parallel.host.cpp makes it,
// data_parallel.cpp's rank bodies read it): the model, the data and the steps, the same on every
// rank.
#pragma once

#include <cstdint>
#include <vector>

#include "11_2_data_parallel/data_parallel.hpp"
#include "rank_code.hpp"

namespace mgpu::data_parallel {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Bucket, offset, count, ready_unit)
}  // namespace mgpu::data_parallel

namespace mgpu::grade {

struct TrainInput {
  mgpu::model::ModelConfig config;
  int steps = 0;
  std::int64_t sequences = 0;  // in the global batch
  std::uint64_t seed = 0;      // of the weights; the batches use seed + 100 + step
  mgpu::data_parallel::GradAverager averager = mgpu::data_parallel::GradAverager::runtime;
  bool overlapped = false;  // data_parallel_step_overlapped with buckets
  std::vector<mgpu::data_parallel::Bucket> buckets;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrainInput, config, steps, sequences, seed, averager, overlapped,
                                   buckets)

}  // namespace mgpu::grade
