// Ring-model durations of the built-in collectives.
#include "cost.hpp"

namespace mgpu::detail {

double collective_seconds(OpKind kind, int n, double alpha, double beta, double bytes) {
  if (n <= 1) return 0.0;
  const double steps = n - 1;
  switch (kind) {
    case OpKind::all_reduce:  // reduce-scatter then all-gather, 2(n-1) steps of S/n each
      return bytes == 0 ? 0.0 : 2.0 * steps * (alpha + bytes / (n * beta));
    case OpKind::reduce_scatter:
    case OpKind::all_gather:  // n-1 steps of S/n each
      return bytes == 0 ? 0.0 : steps * (alpha + bytes / (n * beta));
    case OpKind::broadcast:  // pipelined chain from the root: fill latency, then S streams once
      return bytes == 0 ? 0.0 : steps * alpha + bytes / beta;
    case OpKind::all_to_all:
    case OpKind::all_to_all_v:  // n-1 pairwise exchanges; the busiest member sets the pace
      return bytes == 0 ? 0.0 : steps * alpha + bytes / beta;
    case OpKind::barrier:  // an all_reduce of nothing: latency only
      return 2.0 * steps * alpha;
    case OpKind::send:
    case OpKind::recv:
    case OpKind::split:
      return 0.0;
  }
  return 0.0;
}

}  // namespace mgpu::detail
