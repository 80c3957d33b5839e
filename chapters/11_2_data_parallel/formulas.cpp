// 11.2 skeleton: the cost of a ring all-reduce (bytes, messages, time, bus bandwidth).
// The contract and the formulas are in formulas.hpp; fill in each TODO.
#include "11_2_data_parallel/formulas.hpp"

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::data_parallel {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

double ring_all_reduce_bytes_per_rank(std::int64_t ranks, double buffer_bytes) {
  // TODO(11.2): validate. Picture the ring: the buffer is cut into N chunks; how many chunks
  // does one rank send during the reduce-scatter, and how many during the all-gather?
  throw NotImplemented("11.2 ring_all_reduce_bytes_per_rank");
}

std::int64_t ring_all_reduce_messages_per_rank(std::int64_t ranks) {
  // TODO(11.2): one message per ring step.
  throw NotImplemented("11.2 ring_all_reduce_messages_per_rank");
}

double ring_all_reduce_seconds(std::int64_t ranks, double buffer_bytes, const LinkModel& link) {
  // TODO(11.2): validate (latency >= 0, bandwidth > 0). Steps run one after another; each step
  // pays the latency once and moves one chunk over its link.
  throw NotImplemented("11.2 ring_all_reduce_seconds");
}

double all_reduce_bus_bandwidth(std::int64_t ranks, double algorithm_bytes_per_second) {
  // TODO(11.2): nccl-tests' correction factor for all-reduce.
  throw NotImplemented("11.2 all_reduce_bus_bandwidth");
}

double gradient_all_reduce_bytes_per_rank(std::int64_t ranks, double params, double bytes_per_grad) {
  // TODO(11.2): the gradient is one buffer; reuse the function above.
  throw NotImplemented("11.2 gradient_all_reduce_bytes_per_rank");
}

}  // namespace mgpu::data_parallel
