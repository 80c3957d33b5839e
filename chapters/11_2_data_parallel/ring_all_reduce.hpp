// 11.2 Data parallelism: the ring all-reduce, written by hand over point-to-point messages.
// This is the algorithm behind the runtime's Comm::all_reduce (and NCCL's ring): a reduce-scatter
// followed by an all-gather, each N-1 steps around the ring.
#pragma once

#include "mgpu/cluster.hpp"  // not mgpu.hpp: Eigen/Dense is not needed here and costs compile time
#include "mgpu/not_implemented.hpp"
#include "mgpu/traffic.hpp"  // Chunk and ring_chunk (given)

#include <cstddef>
#include <span>

namespace mgpu::data_parallel {

// The ring's chunks come from the runtime's ring_chunk (mgpu/traffic.hpp, given, not an
// exercise): length 10 over 4 ranks gives chunks of 3, 3, 2 and 2 elements, in order.

/// In place, every member's `data` becomes the element-wise sum over all members of `comm`.
///
/// TODO 6 of 11.2 (after the five formulas). Use only comm.send / comm.recv (or isend / irecv),
/// never comm.all_reduce.
/// Algorithm, for N = comm.size() ranks and chunks c = ring_chunk(data.size(), N, c):
///  - reduce-scatter, N-1 steps: in step s, rank r sends one chunk to rank (r+1) % N and receives
///    one from rank (r-1+N) % N, adding the received values into its own copy of that chunk.
///    Choose the chunk indices so that after the last step each rank holds one chunk fully summed.
///  - all-gather, N-1 more steps around the same ring: each rank forwards the fully-summed chunk
///    it received last (starting with its own), overwriting its copy, until all N chunks are
///    complete.
///
/// Contract the tests check:
///  - any N >= 1 and any length, 0 included (not only multiples of N);
///  - N = 1 sends nothing and leaves `data` as it is;
///  - for N > 1 each rank sends exactly 2(N-1) messages, even when some chunks are empty, and
///    their sizes add up to all chunks but one, twice: 2(N-1)/N of the buffer on average over
///    ranks;
///  - every rank ends with bitwise identical values (the all-gather copies, never re-adds).
///
/// Receive each chunk into a staging buffer of ring_chunk(data.size(), N, 0).count elements
/// allocated from `ledger` under Category::comm, so the ledger sees the ring's extra memory.
/// Sends are buffered (the data is copied when posted), so "send, then receive" cannot deadlock.
/// Use one tag for the whole call; messages between two ranks with one tag arrive in order.
void ring_all_reduce(Comm& comm, std::span<float> data, MemoryLedger& ledger);

/// The same ring on bf16 data. Each step converts the received chunk and the local chunk to
/// float, adds them in float, and rounds the sum to bf16 once (what NCCL does for bf16 sums), so
/// the result is within a few bf16 ulps of the exact sum, and still identical on every rank.
void ring_all_reduce(Comm& comm, std::span<bf16> data, MemoryLedger& ledger);

}  // namespace mgpu::data_parallel
