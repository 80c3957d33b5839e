// 11.2 Data parallelism: the ring all-reduce, written by hand over point-to-point messages.
// This is the algorithm behind the runtime's Comm::all_reduce (and NCCL's ring): a reduce-scatter
// followed by an all-gather, each N-1 steps around the ring.
#pragma once

#include "mgpu/bf16.hpp"     // the bf16 overloads reduce bf16 values
#include "mgpu/cluster.hpp"  // not mgpu.hpp: no tensor views here
#include "mgpu/not_implemented.hpp"
#include "mgpu/traffic.hpp"  // Chunk and ring_chunk (given)

#include <cstddef>
#include <span>

namespace mgpu::data_parallel {

// The ring's chunks come from the runtime's ring_chunk (mgpu/traffic.hpp, given, not an
// exercise): length 10 over 4 ranks gives chunks of 3, 3, 2 and 2 elements, in order. Chunk c
// below always means ring_chunk(data.size(), N, c), and rank r's neighbours on the ring are
// r + 1 and r - 1 (mod N).

/// The ring's first half, in place: a reduce-scatter over point-to-point messages.
///
/// TODO(11.2 ring_reduce_scatter), the ring's first half. Use only comm.send / comm.recv (or isend
/// / irecv), never the runtime's collectives.
///
/// Contract the tests check:
///  - when it returns, chunk (r + 1) % N of rank r's `data` holds the element-wise sum over all
///    members of that chunk, so every chunk is complete on exactly one rank; what the other
///    chunks hold is unspecified (partial sums);
///  - any N >= 1 and any length, 0 included; N = 1 sends nothing and leaves `data` as it is;
///  - for N > 1 each rank sends exactly N-1 messages to rank r + 1, each one chunk, even when
///    that chunk is empty: (N-1)/N of the buffer on average over ranks;
///  - the received values are staged in one buffer of ring_chunk(data.size(), N, 0).count
///    elements allocated from `ledger` under Category::comm (so the ledger sees the ring's extra
///    memory), released before it returns.
/// Sends are buffered (the data is copied when posted), so posting a send before the matching
/// receive cannot deadlock. Messages between two ranks with one tag arrive in order.
void ring_reduce_scatter(Comm& comm, std::span<float> data, MemoryLedger& ledger);

/// ring_reduce_scatter on bf16 data: each received partial sum is added in float and the result
/// rounded to bf16, so a sum is rounded once per hop, as NCCL's ring does for bf16.
void ring_reduce_scatter(Comm& comm, std::span<bf16> data, MemoryLedger& ledger);

/// In place, every member's `data` becomes the element-wise sum over all members of `comm`:
/// ring_reduce_scatter followed by an all-gather around the same ring.
///
/// TODO(11.2 ring_all_gather), the ring's second half, once ring_reduce_scatter passes its test.
/// Use only point-to-point messages, as above.
///
/// Contract the tests check:
///  - any N >= 1 and any length, 0 included (not only multiples of N);
///  - N = 1 sends nothing and leaves `data` as it is;
///  - for N > 1 each rank sends exactly 2(N-1) messages, even when some chunks are empty, and
///    their sizes add up to all chunks but one, twice: 2(N-1)/N of the buffer on average over
///    ranks;
///  - every rank ends with bitwise identical values;
///  - the ledger's Category::comm peak is the reduce-scatter's staging buffer, nothing more.
void ring_all_reduce(Comm& comm, std::span<float> data, MemoryLedger& ledger);

/// The same ring on bf16 data. The partial sums are rounded to bf16 at every hop of the
/// reduce-scatter (as in NCCL's ring; the runtime's own Comm::all_reduce instead sums in fp32 and
/// rounds once), so the result is within a few bf16 ulps of the exact sum, and still identical
/// on every rank.
void ring_all_reduce(Comm& comm, std::span<bf16> data, MemoryLedger& ledger);

}  // namespace mgpu::data_parallel
