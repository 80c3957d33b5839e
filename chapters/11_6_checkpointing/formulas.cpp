// 11.6 skeleton: peak activations with a checkpoint every k layers, the best k, and the compute
// that recomputation adds. The contract is in formulas.hpp; fill in each TODO.
#include "11_6_checkpointing/formulas.hpp"
#include "11_6_checkpointing/checks.hpp"  // check_interval (given)

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::checkpointing {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

std::int64_t checkpointed_peak_units(std::int64_t layers, std::int64_t k) {
  // TODO(11.6): check_interval. Number of segments (integer ceiling, no floating point) plus
  // the longest segment, rebuilt during its backward.
  throw NotImplemented("11.6 checkpointed_peak_units");
}

std::int64_t no_checkpoint_peak_units(std::int64_t layers) {
  // TODO(11.6): every layer's activations are kept.
  throw NotImplemented("11.6 no_checkpoint_peak_units");
}

double checkpointed_peak_bytes(std::int64_t layers, std::int64_t k, double checkpoint_bytes,
                               double layer_bytes) {
  // TODO(11.6): the same count as checkpointed_peak_units, each part weighted by its size.
  throw NotImplemented("11.6 checkpointed_peak_bytes");
}

std::int64_t best_checkpoint_interval(std::int64_t layers) {
  // TODO(11.6): try k = 1, 2, ... and keep the first best. The peak is at least k, so you may
  // stop once k reaches the best peak found (the scan then ends near 2*sqrt(L)).
  throw NotImplemented("11.6 best_checkpoint_interval");
}

std::int64_t best_checkpoint_interval_bytes(std::int64_t layers, double checkpoint_bytes,
                                            double layer_bytes) {
  // TODO(11.6): as above with checkpointed_peak_bytes; mind layer_bytes == 0 (see the header).
  throw NotImplemented("11.6 best_checkpoint_interval_bytes");
}

double recompute_extra_flops_fraction(std::int64_t recomputed_layers, std::int64_t layers,
                                      double backward_over_forward) {
  // TODO(11.6): validate. A layer costs 1 forward + ratio forwards of backward per step;
  // recomputing it adds one more forward.
  throw NotImplemented("11.6 recompute_extra_flops_fraction");
}

}  // namespace mgpu::checkpointing
