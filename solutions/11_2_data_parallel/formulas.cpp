// 11.2 reference solution: bytes, messages and time of a ring all-reduce.
// Implements chapters/11_2_data_parallel/formulas.hpp.
#include "11_2_data_parallel/formulas.hpp"

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

double ring_all_reduce_bytes_per_rank(std::int64_t ranks, double buffer_bytes) {
  check_count("ring_all_reduce_bytes_per_rank", "ranks", ranks);
  check_non_negative("ring_all_reduce_bytes_per_rank", "buffer_bytes", buffer_bytes);
  const double n = static_cast<double>(ranks);
  // Reduce-scatter then all-gather: N - 1 chunks of S/N each, twice.
  return 2.0 * (n - 1.0) / n * buffer_bytes;
}

std::int64_t ring_all_reduce_messages_per_rank(std::int64_t ranks) {
  check_count("ring_all_reduce_messages_per_rank", "ranks", ranks);
  return 2 * (ranks - 1);
}

double ring_all_reduce_seconds(std::int64_t ranks, double buffer_bytes, const LinkModel& link) {
  const char* where = "ring_all_reduce_seconds";
  check_count(where, "ranks", ranks);
  check_non_negative(where, "buffer_bytes", buffer_bytes);
  check_non_negative(where, "latency_seconds", link.latency_seconds);
  check_positive(where, "bandwidth_bytes_per_second", link.bandwidth_bytes_per_second);
  const double n = static_cast<double>(ranks);
  // Every step moves one chunk over every link at once, so steps cost one chunk each.
  const double step = link.latency_seconds + buffer_bytes / (n * link.bandwidth_bytes_per_second);
  return static_cast<double>(ring_all_reduce_messages_per_rank(ranks)) * step;
}

double all_reduce_bus_bandwidth(std::int64_t ranks, double algorithm_bytes_per_second) {
  check_count("all_reduce_bus_bandwidth", "ranks", ranks);
  check_non_negative("all_reduce_bus_bandwidth", "algorithm_bytes_per_second",
                     algorithm_bytes_per_second);
  const double n = static_cast<double>(ranks);
  return algorithm_bytes_per_second * 2.0 * (n - 1.0) / n;
}

double gradient_all_reduce_bytes_per_rank(std::int64_t ranks, double params,
                                          double bytes_per_grad) {
  check_non_negative("gradient_all_reduce_bytes_per_rank", "params", params);
  check_non_negative("gradient_all_reduce_bytes_per_rank", "bytes_per_grad", bytes_per_grad);
  return ring_all_reduce_bytes_per_rank(ranks, params * bytes_per_grad);
}

}  // namespace mgpu::data_parallel
