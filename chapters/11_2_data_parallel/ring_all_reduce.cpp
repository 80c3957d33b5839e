// 11.2 Ring all-reduce over point-to-point messages: your implementation.
// Reduce-scatter leaves each rank with one fully summed chunk; all-gather passes the summed
// chunks around the ring so every rank ends with all of them.
#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

Chunk ring_chunk(std::size_t length, int ranks, int index) {
  if (ranks < 1) throw std::invalid_argument("ring_chunk: ranks = " + std::to_string(ranks) + " must be at least 1");
  if (index < 0 || index >= ranks) {
    throw std::invalid_argument("ring_chunk: index " + std::to_string(index) + " is outside [0, " +
                                std::to_string(ranks) + ")");
  }
  const auto n = static_cast<std::size_t>(ranks), i = static_cast<std::size_t>(index);
  const std::size_t base = length / n, extra = length % n;
  return Chunk{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

namespace {

// One body for float and bf16: write it once as a template.
template <class T>
void ring(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  const int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // Chunk c of the buffer, for any integer c (taken modulo n, so r - s - 1 works too).
  auto chunk = [&](int index) { return ring_chunk(data.size(), n, ((index % n) + n) % n); };
  auto part = [&](Chunk c) { return data.subspan(c.offset, c.count); };
  Buffer<T> staging(ledger, Category::comm, chunk(0).count, "ring_all_reduce staging");

  // TODO(11.2 ring_all_reduce): reduce-scatter, N-1 steps. In step s, send part(chunk(r - s))
  //   to `right` (comm.isend returns a Request; wait() it at the end of the step), receive the
  //   chunk r - s - 1 from `left` into staging.span().first(count), and add it into your copy.
  //   Add as static_cast<T>(static_cast<float>(a) + static_cast<float>(b)) so bf16 sums in float.
  // TODO(11.2 ring_all_reduce): all-gather, N-1 steps. Which chunk is complete on rank r now?
  //   Send it on, and receive the next finished chunk straight into place (no addition).
  (void)right;
  (void)left;
  (void)part;
  throw NotImplemented("11.2 ring_all_reduce");
}

}  // namespace

void ring_all_reduce(Comm& comm, std::span<float> data, MemoryLedger& ledger) { ring(comm, data, ledger); }

void ring_all_reduce(Comm& comm, std::span<bf16> data, MemoryLedger& ledger) { ring(comm, data, ledger); }

}  // namespace mgpu::data_parallel
