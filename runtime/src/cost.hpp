// The ring cost model of the built-in collectives: virtual duration and per-rank traffic.
// Written once here so the runtime, its tests and the README agree (see runtime/README.md).
#pragma once

#include "mgpu/traffic.hpp"

#include <cstddef>

namespace mgpu::detail {

/// Virtual seconds a collective takes on a group of n ranks whose slowest link has latency
/// `alpha` and bandwidth `beta`. `bytes` is S: the full buffer (all_reduce, broadcast), the
/// full gathered/scattered buffer (n * per-rank part) for all_gather/reduce_scatter, or for
/// all_to_all(_v) the largest number of bytes any member sends or receives to/from others.
double collective_seconds(OpKind kind, int n, double alpha, double beta, double bytes);

}  // namespace mgpu::detail
