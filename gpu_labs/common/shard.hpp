// Index maths shared by the labs: which slice of a buffer a rank owns, for ring chunks
// (balanced, any length) and for ZeRO shards (equal, padded). Host code, tested on any machine.
#pragma once

#include <cstddef>

#include "mgpu/traffic.hpp"  // mgpu::Chunk, elements [offset, offset + count)

namespace mgpu::gpu {

/// Chunk `index` of `total` elements split into `parts` nearly equal chunks (sizes differ by at
/// most one, larger chunks first): the runtime's mgpu::ring_chunk. Chunks tile [0, total) in
/// order. Throws std::invalid_argument on parts < 1, std::out_of_range on an index outside
/// [0, parts).
Chunk chunk_range(std::size_t total, int parts, int index);

/// Elements per rank when `total` is split into `parts` equal shards, padding the last: ceil.
/// The padded buffer holds parts * padded_shard(total, parts) >= total elements.
std::size_t padded_shard(std::size_t total, int parts);

/// The real (unpadded) elements of shard `index` of a padded split: may be shorter, or empty.
Chunk padded_shard_range(std::size_t total, int parts, int index);

/// Bus-bandwidth factor of a collective over n ranks, as nccl-tests defines it: the runtime's
/// mgpu::bus_bandwidth_factor for the collective of that name (all_reduce 2(n-1)/n, all_gather
/// and reduce_scatter (n-1)/n, ...); ring_all_reduce counts as all_reduce, sendrecv as send (1).
/// Throws std::invalid_argument for any other name.
double busbw_factor(const char* collective, int n);

/// Bytes of training state per rank for mixed-precision Adam under ZeRO-3: 16 * params / n
/// (2 bf16 weights + 2 bf16 grads + 4 fp32 master + 8 fp32 Adam moments per parameter).
double zero3_state_bytes(double params, int n);

}  // namespace mgpu::gpu
