// The rank code of 11.2's ring cases (ring_all_reduce.host.cpp): each rank gets its own buffer,
// runs the student's ring on it and publishes what the case compares.
#include <span>
#include <vector>

#include "11_2_data_parallel/ring_all_reduce.hpp"
#include "mgpu/bf16.hpp"
#include "rank_code.hpp"

namespace dp = mgpu::data_parallel;

namespace {

template <class T>
void all_reduce_and_publish(mgpu::Rank& rank, std::vector<T> data) {
  dp::ring_all_reduce(rank.world(), std::span<T>(data), rank.memory());
  rank.publish("sum", data);
}

}  // namespace

MGPU_RANK_BODY("11_2.ring_all_reduce.fp32", std::vector<float>) {
  all_reduce_and_publish(rank, in);
}

MGPU_RANK_BODY("11_2.ring_all_reduce.bf16", std::vector<mgpu::bf16>) {
  all_reduce_and_publish(rank, in);
}

// The contract fixes what each rank owns after the reduce-scatter: chunk (r + 1) % N.
MGPU_RANK_BODY("11_2.ring_reduce_scatter", std::vector<float>) {
  std::vector<float> data = in;
  dp::ring_reduce_scatter(rank.world(), std::span<float>(data), rank.memory());
  const int n = rank.world_size();
  const mgpu::Chunk c = mgpu::ring_chunk(data.size(), n, (rank.id() + 1) % n);
  rank.publish("owned", std::span<const float>(data).subspan(c.offset, c.count));
}
