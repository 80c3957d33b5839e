// The named clusters that chapter tests share, beside the model shapes of model_configs.hpp that
// they run: each defined once, so "the overlap cluster" is the same machine wherever it is used.
#pragma once

#include "mgpu/cluster.hpp"

namespace mgpu_test::configs {

/// The cluster of the overlap tests (model configs::overlap and its kin): `ranks` slow GPUs
/// (3e10 FLOP/s) on a slow link (5e8 bytes/s), so that a unit's collective takes about as long as
/// its compute and each bucket's time is mostly bandwidth, not per-message latency.
inline mgpu::ClusterConfig overlap_cluster(int ranks) {
  mgpu::ClusterConfig cc;
  cc.world_size = ranks;
  cc.flops_per_second = 3e10;
  cc.intra_node_bytes_per_second = 5e8;
  return cc;
}

}  // namespace mgpu_test::configs
