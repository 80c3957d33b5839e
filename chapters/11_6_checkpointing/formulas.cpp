// 11.6 skeleton: peak activations with a checkpoint every k layers, the best k, and the compute
// that recomputation adds. The contract is in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_6 <id>` gives hints for it.
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
  // TODO(11.6 checkpointed_peak_units): the peak in layer-activation units with a checkpoint
  // every k layers (README, "The idea"), in exact integer arithmetic; L = 96, k = 8 gives 20.
  // check_interval (checks.hpp) rejects k outside [1, L].
  throw NotImplemented("11.6 checkpointed_peak_units");
}

std::int64_t no_checkpoint_peak_units(std::int64_t layers) {
  // TODO(11.6 no_checkpoint_peak_units): the same peak when nothing is recomputed; layers below 1
  // throw.
  throw NotImplemented("11.6 no_checkpoint_peak_units");
}

double checkpointed_peak_bytes(std::int64_t layers, std::int64_t k, double checkpoint_bytes,
                               double layer_bytes) {
  // TODO(11.6 checkpointed_peak_bytes): the same peak in bytes, where a checkpoint and a layer's
  // activations differ in size; with both sizes 1 it equals checkpointed_peak_units.
  throw NotImplemented("11.6 checkpointed_peak_bytes");
}

std::int64_t best_checkpoint_interval(std::int64_t layers) {
  // TODO(11.6 best_checkpoint_interval): the k in [1, L] with the lowest checkpointed peak, the
  // smallest k on a tie (96 layers: 8). If you stop the scan early, no k you skip may beat the
  // answer.
  throw NotImplemented("11.6 best_checkpoint_interval");
}

std::int64_t best_checkpoint_interval_bytes(std::int64_t layers, double checkpoint_bytes,
                                            double layer_bytes) {
  // TODO(11.6 best_checkpoint_interval_bytes): the same search over checkpointed_peak_bytes,
  // including the header's answer when layer_bytes is 0.
  throw NotImplemented("11.6 best_checkpoint_interval_bytes");
}

double recompute_extra_flops_fraction(std::int64_t recomputed_layers, std::int64_t layers,
                                      double backward_over_forward) {
  // TODO(11.6 recompute_extra_flops_fraction): the extra compute, as a fraction of a plain step,
  // of rerunning the forward of `recomputed_layers` of `layers`; 1/3 when every layer is rerun
  // and backward costs twice the forward. Bad counts or a negative ratio throw.
  throw NotImplemented("11.6 recompute_extra_flops_fraction");
}

}  // namespace mgpu::checkpointing
