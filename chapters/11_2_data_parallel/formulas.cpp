// 11.2 skeleton: the cost of a ring all-reduce (bytes, messages, time, bus bandwidth).
// The contract and the formulas are in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_2 <id>` gives hints for it.
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
  // TODO(11.2 ring_all_reduce_bytes_per_rank): what one rank sends in a whole ring all-reduce
  // of `buffer_bytes`: 0 for one rank, just under twice the buffer for many. Bad input throws
  // (check_count, check_non_negative).
  throw NotImplemented("11.2 ring_all_reduce_bytes_per_rank");
}

std::int64_t ring_all_reduce_messages_per_rank(std::int64_t ranks) {
  // TODO(11.2 ring_all_reduce_messages_per_rank): the messages one rank sends in that ring; one
  // rank sends none.
  throw NotImplemented("11.2 ring_all_reduce_messages_per_rank");
}

double ring_all_reduce_seconds(std::int64_t ranks, double buffer_bytes, const LinkModel& link) {
  // TODO(11.2 ring_all_reduce_seconds): the ring's time on `link`: exactly latency_seconds
  // more per message when the latency grows, 0 for one rank, and close to bytes sent over the
  // bandwidth for large buffers. A negative latency or a bandwidth that is not positive throws.
  throw NotImplemented("11.2 ring_all_reduce_seconds");
}

double all_reduce_bus_bandwidth(std::int64_t ranks, double algorithm_bytes_per_second) {
  // TODO(11.2 all_reduce_bus_bandwidth): the bus bandwidth nccl-tests reports for an all-reduce
  // that ran at `algorithm_bytes_per_second` (README, "The formulas").
  throw NotImplemented("11.2 all_reduce_bus_bandwidth");
}

double gradient_all_reduce_bytes_per_rank(std::int64_t ranks, double params,
                                          double bytes_per_grad) {
  // TODO(11.2 gradient_all_reduce_bytes_per_rank): the bytes one rank sends to all-reduce a
  // gradient of `params` values of `bytes_per_grad` bytes each; bad input throws.
  throw NotImplemented("11.2 gradient_all_reduce_bytes_per_rank");
}

}  // namespace mgpu::data_parallel
