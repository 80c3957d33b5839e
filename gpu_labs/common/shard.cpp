// Chunk and shard index maths, busbw factors and the 16-bytes-per-parameter formula. Ring
// chunks and bus-bandwidth factors are the runtime's (mgpu/traffic.hpp), so the labs, the
// simulated cluster and the benchmarks cut buffers and scale bandwidths the same way.
#include "common/shard.hpp"

#include "mgpu/traffic.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mgpu::gpu {

namespace {
void check_split(int parts, int index) {
  if (parts < 1)
    throw std::invalid_argument("split into " + std::to_string(parts) + " parts: use at least 1");
  if (index < 0 || index >= parts) {
    throw std::out_of_range("shard index " + std::to_string(index) + " outside [0, " +
                            std::to_string(parts) + ")");
  }
}
}  // namespace

Chunk chunk_range(std::size_t total, int parts, int index) {
  check_split(parts, index);  // the labs' own exceptions, before the runtime's
  return mgpu::ring_chunk(total, parts, index);
}

std::size_t padded_shard(std::size_t total, int parts) {
  check_split(parts, 0);
  const std::size_t p = static_cast<std::size_t>(parts);
  return (total + p - 1) / p;
}

Chunk padded_shard_range(std::size_t total, int parts, int index) {
  check_split(parts, index);
  const std::size_t s = padded_shard(total, parts);
  const std::size_t begin = s * static_cast<std::size_t>(index);
  if (begin >= total) return {total, 0};
  return {begin, begin + s <= total ? s : total - begin};
}

double busbw_factor(const char* collective, int n) {
  std::string_view c(collective);
  // The labs' names for what the runtime calls all_reduce and send.
  if (c == "ring_all_reduce") c = "all_reduce";
  if (c == "sendrecv") c = "send";
  const std::optional<mgpu::OpKind> kind = mgpu::op_kind_named(c);
  if (!kind) {
    throw std::invalid_argument(std::string("busbw_factor: unknown collective '") + collective +
                                "': use a collective of the runtime (all_reduce, all_gather, "
                                "reduce_scatter, ...), ring_all_reduce or sendrecv");
  }
  return mgpu::bus_bandwidth_factor(*kind, n);
}

double zero3_state_bytes(double params, int n) { return 16.0 * params / n; }

}  // namespace mgpu::gpu
