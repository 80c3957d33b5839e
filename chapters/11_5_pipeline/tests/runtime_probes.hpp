// What the 11.5 visible tests, graded cases and pipeline figure measure with the runtime alone (no
// chapter code): a cluster whose links cost nothing, and the bytes each unit of the course model
// leaves saved between its forward and its backward for one micro-batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"

namespace pipeline_probes {

/// p ranks of 1 GFLOP/s whose links cost nothing: the clock sees compute and waiting only.
inline mgpu::ClusterConfig free_links(int p) {
  mgpu::ClusterConfig cc;
  cc.world_size = p;
  cc.flops_per_second = 1e9;
  cc.intra_node_latency_seconds = 0;
  cc.inter_node_latency_seconds = 0;
  cc.intra_node_bytes_per_second = 1e18;
  cc.inter_node_bytes_per_second = 1e18;
  return cc;
}

/// Bytes one micro-batch leaves saved by each unit (index = unit) between its forward and its
/// backward, from the runtime's own unit_forward on one rank with weights seeded `weight_seed`.
inline std::vector<std::size_t> saved_bytes_per_unit(const mgpu::model::Model& net,
                                                     const mgpu::model::Batch& micro,
                                                     std::uint64_t weight_seed) {
  std::vector<std::size_t> bytes;
  mgpu::Cluster cluster(1);
  cluster.run([&](mgpu::Rank& r) {
    const mgpu::model::Replica replica = net.make_replica(r.memory(), weight_seed);
    mgpu::Buffer<float> x = net.input(r, micro);
    for (int u = 0; u < net.num_units(); ++u) {
      mgpu::model::UnitCache cache;
      x = net.unit_forward(r, u, net.unit_view(replica.params.span(), u), std::move(x),
                           micro.tokens(), &cache);
      bytes.push_back(cache.bytes());
    }
  });
  return bytes;
}

}  // namespace pipeline_probes
