// 11.2 Ring all-reduce over point-to-point messages: your implementation.
// Reduce-scatter leaves each rank with one fully summed chunk; all-gather passes the summed
// chunks around the ring so every rank ends with all of them.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_2 <id>` gives hints for it.
#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

namespace {

// One body for float and bf16: write it once as a template.
template <class T>
void ring(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  const int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // Chunk c of the buffer for any integer c, taken modulo n: index arithmetic may go negative.
  auto chunk = [&](int index) { return ring_chunk(data.size(), n, ((index % n) + n) % n); };
  auto part = [&](Chunk c) { return data.subspan(c.offset, c.count); };
  Buffer<T> staging(ledger, Category::comm, chunk(0).count, "ring_all_reduce staging");

  // TODO(11.2 ring_reduce_scatter): N-1 steps, each sending one chunk to `right` and receiving
  //   one from `left` into `staging`, then adding it into this rank's copy of that chunk. Done
  //   when every rank holds the complete sum of exactly one chunk and no two ranks hold the same
  //   one. Which chunk moves in which step is the puzzle. Calls: comm.isend (wait its Request
  //   before the step ends), comm.recv. Add through float (static_cast<float> each side) so that
  //   bf16 sums in float and rounds once per step.
  // TODO(11.2 ring_all_gather): N-1 more steps on the same ring, after which every rank holds
  //   every complete chunk, bitwise equal on all ranks: finished chunks are copied, never added
  //   again. Every rank sends 2(N-1) messages in all, even when some chunks are empty.
  (void)right;
  (void)left;
  (void)part;
  throw NotImplemented("11.2 ring_all_reduce");
}

}  // namespace

void ring_all_reduce(Comm& comm, std::span<float> data, MemoryLedger& ledger) {
  ring(comm, data, ledger);
}

void ring_all_reduce(Comm& comm, std::span<bf16> data, MemoryLedger& ledger) {
  ring(comm, data, ledger);
}

}  // namespace mgpu::data_parallel
