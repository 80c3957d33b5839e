// Data kernels of the built-in collectives: rank-ordered reductions and block copies.
// They run outside the global lock, on slices claimed by whichever member is waiting.
#pragma once

#include "mgpu/types.hpp"

#include <cstddef>

namespace mgpu::detail {

/// For j in [0, len): v = reduce_{r=0..n-1} ins[r][j] in rank order (accumulating in the element
/// type's Accum), divided by n for avg; then outs[k][j] = v for every k < nouts. `ins` and `outs`
/// are byte pointers already offset to the slice; an out may alias an in (in-place all_reduce).
void reduce_slice(DType dtype, ReduceOp op, const unsigned char* const* ins, int n,
                  unsigned char* const* outs, int nouts, std::size_t len);

}  // namespace mgpu::detail
