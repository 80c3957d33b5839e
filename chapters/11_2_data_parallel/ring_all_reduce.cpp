// 11.2 Ring all-reduce over point-to-point messages: your implementation.
// Reduce-scatter leaves each rank with one fully summed chunk; all-gather passes the summed
// chunks around the ring so every rank ends with all of them.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_2 <id>` gives hints for it.
#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

namespace {

// Given: one tag for every message of a call; messages between two ranks with one tag arrive in
// order, which keeps the steps apart.
constexpr int kRingTag = 112;

// Given: rank r's place on the ring over `data`, and the buffer's chunks.
template <class T>
struct RingView {
  RingView(Comm& comm, std::span<T> buffer)
      : n(comm.size()), r(comm.rank()), right((r + 1) % n), left((r + n - 1) % n), data(buffer) {}
  int n, r;         // ranks on the ring, and this rank
  int right, left;  // the neighbours this rank sends to and receives from
  std::span<T> data;
  // Chunk `index` for any integer index, taken modulo n: index arithmetic may go negative.
  [[nodiscard]] Chunk chunk(int index) const {
    return ring_chunk(data.size(), n, ((index % n) + n) % n);
  }
  // The elements of chunk c in `data`.
  [[nodiscard]] std::span<T> part(Chunk c) const { return data.subspan(c.offset, c.count); }
};

// One body for float and bf16: each half is written once, as a template.
template <class T>
void reduce_scatter(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  const RingView<T> ring(comm, data);
  const int n = ring.n, r = ring.r;
  if (n == 1) return;
  Buffer<T> staging(ledger, Category::comm, ring.chunk(0).count, "ring_reduce_scatter staging");

  // TODO(11.2 ring_reduce_scatter): done when chunk r + 1 holds the full sum on rank r (the
  //   header's contract) after each rank has sent N-1 messages of one chunk each to ring.right,
  //   and received as many from ring.left through `staging`. Which chunk moves in which step is
  //   the puzzle. Calls: comm.isend (its Request waited before the next message), comm.recv,
  //   ring.chunk, ring.part. Sums go through float (static_cast<float> each side), so that bf16
  //   adds in float and rounds once per message.
  (void)r;
  throw NotImplemented("11.2 ring_reduce_scatter");
}

template <class T>
void all_reduce(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  ring_reduce_scatter(comm, data, ledger);
  const RingView<T> ring(comm, data);
  const int n = ring.n, r = ring.r;
  if (n == 1) return;
  // TODO(11.2 ring_all_gather): N-1 more steps on the same ring, after which every rank holds
  //   every complete chunk, bitwise equal on all ranks. Every rank sends 2(N-1) messages in
  //   all, even when some chunks are empty.
  (void)r;
  throw NotImplemented("11.2 ring_all_gather");
}

}  // namespace

void ring_reduce_scatter(Comm& comm, std::span<float> data, MemoryLedger& ledger) {
  reduce_scatter(comm, data, ledger);
}

void ring_reduce_scatter(Comm& comm, std::span<bf16> data, MemoryLedger& ledger) {
  reduce_scatter(comm, data, ledger);
}

void ring_all_reduce(Comm& comm, std::span<float> data, MemoryLedger& ledger) {
  all_reduce(comm, data, ledger);
}

void ring_all_reduce(Comm& comm, std::span<bf16> data, MemoryLedger& ledger) {
  all_reduce(comm, data, ledger);
}

}  // namespace mgpu::data_parallel
