// Chunk and shard index maths, busbw factors and the 16-bytes-per-parameter formula.
#include "common/shard.hpp"

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

Range chunk_range(std::size_t total, int parts, int index) {
  check_split(parts, index);
  const std::size_t p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(index);
  const std::size_t base = total / p, extra = total % p;
  // The first `extra` chunks take one element more, so sizes differ by at most one.
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

std::size_t padded_shard(std::size_t total, int parts) {
  check_split(parts, 0);
  const std::size_t p = static_cast<std::size_t>(parts);
  return (total + p - 1) / p;
}

Range padded_shard_range(std::size_t total, int parts, int index) {
  check_split(parts, index);
  const std::size_t s = padded_shard(total, parts);
  const std::size_t begin = s * static_cast<std::size_t>(index);
  if (begin >= total) return {total, 0};
  return {begin, begin + s <= total ? s : total - begin};
}

double busbw_factor(const char* collective, int n) {
  const std::string_view c(collective);
  const double dn = n;
  if (c == "all_reduce" || c == "ring_all_reduce") return 2.0 * (dn - 1.0) / dn;
  if (c == "all_gather" || c == "reduce_scatter") return (dn - 1.0) / dn;
  if (c == "sendrecv") return 1.0;
  throw std::invalid_argument(
      std::string("busbw_factor: unknown collective '") + collective +
      "': use all_reduce, ring_all_reduce, all_gather, reduce_scatter or sendrecv");
}

double zero3_state_bytes(double params, int n) { return 16.0 * params / n; }

}  // namespace mgpu::gpu
