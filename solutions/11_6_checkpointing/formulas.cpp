// 11.6 reference solution: peak activations with a checkpoint every k layers, the best k, and
// the compute recomputation adds. Implements chapters/11_6_checkpointing/formulas.hpp.
#include "11_6_checkpointing/formulas.hpp"
#include "11_6_checkpointing/checks.hpp"  // check_interval (given)

#include "mgpu/check_args.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::checkpointing {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

namespace {

std::int64_t segments(std::int64_t layers, std::int64_t k) { return (layers + k - 1) / k; }

}  // namespace

std::int64_t checkpointed_peak_units(std::int64_t layers, std::int64_t k) {
  check_interval("checkpointed_peak_units", layers, k);
  // Every segment's input stays stored; one segment at a time is rebuilt in full.
  return segments(layers, k) + k;
}

std::int64_t no_checkpoint_peak_units(std::int64_t layers) {
  check_count("no_checkpoint_peak_units", "layers", layers);
  return layers;
}

double checkpointed_peak_bytes(std::int64_t layers, std::int64_t k, double checkpoint_bytes,
                               double layer_bytes) {
  const char* where = "checkpointed_peak_bytes";
  check_interval(where, layers, k);
  check_non_negative(where, "checkpoint_bytes", checkpoint_bytes);
  check_non_negative(where, "layer_bytes", layer_bytes);
  return static_cast<double>(segments(layers, k)) * checkpoint_bytes +
         static_cast<double>(k) * layer_bytes;
}

std::int64_t best_checkpoint_interval(std::int64_t layers) {
  check_count("best_checkpoint_interval", "layers", layers);
  // A peak is at least k, so once k passes the best peak so far no larger k can win: the scan
  // stops near 2*sqrt(L).
  std::int64_t best = 1;
  std::int64_t best_units = checkpointed_peak_units(layers, 1);
  for (std::int64_t k = 2; k <= layers && k < best_units; ++k) {
    const std::int64_t units = checkpointed_peak_units(layers, k);
    if (units < best_units) {
      best = k;
      best_units = units;
    }
  }
  return best;
}

std::int64_t best_checkpoint_interval_bytes(std::int64_t layers, double checkpoint_bytes,
                                            double layer_bytes) {
  const char* where = "best_checkpoint_interval_bytes";
  check_count(where, "layers", layers);
  check_non_negative(where, "checkpoint_bytes", checkpoint_bytes);
  check_non_negative(where, "layer_bytes", layer_bytes);
  if (layer_bytes == 0) return checkpoint_bytes > 0 ? layers : 1;  // only checkpoints cost
  // Same bound as above: the peak is at least k * layer_bytes.
  std::int64_t best = 1;
  double best_bytes = checkpointed_peak_bytes(layers, 1, checkpoint_bytes, layer_bytes);
  for (std::int64_t k = 2; k <= layers && static_cast<double>(k) * layer_bytes < best_bytes; ++k) {
    const double bytes = checkpointed_peak_bytes(layers, k, checkpoint_bytes, layer_bytes);
    if (bytes < best_bytes) {
      best = k;
      best_bytes = bytes;
    }
  }
  return best;
}

double recompute_extra_flops_fraction(std::int64_t recomputed_layers, std::int64_t layers,
                                      double backward_over_forward) {
  const char* where = "recompute_extra_flops_fraction";
  check_count(where, "layers", layers);
  if (recomputed_layers < 0 || recomputed_layers > layers)
    fail(where, "recomputed_layers", std::to_string(recomputed_layers),
         "is outside [0, " + std::to_string(layers) + "]");
  check_non_negative(where, "backward_over_forward", backward_over_forward);
  // Rerunning a layer's forward costs 1 of the 1 + ratio units that layer costs per step.
  const double share = static_cast<double>(recomputed_layers) / static_cast<double>(layers);
  return share / (1.0 + backward_over_forward);
}

}  // namespace mgpu::checkpointing
