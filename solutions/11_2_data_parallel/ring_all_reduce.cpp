// 11.2 Ring all-reduce over point-to-point messages (reference solution).
// Reduce-scatter leaves each rank with one fully summed chunk; all-gather passes the summed
// chunks around the ring so every rank ends with all of them.
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

template <class T>
void reduce_scatter(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  const RingView<T> ring(comm, data);
  const int n = ring.n, r = ring.r;
  if (n == 1) return;
  Buffer<T> staging(ledger, Category::comm, ring.chunk(0).count, "ring_reduce_scatter staging");

  // In step s rank r passes on chunk r - s (its own at s = 0, then the partial sum it just
  // received) and adds its values into chunk r - s - 1. After N-1 steps chunk r + 1 has passed
  // every rank once and holds the full sum.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = ring.chunk(r - s), in = ring.chunk(r - s - 1);
    Request sent = comm.isend(ring.part(out), ring.right, kRingTag);
    auto incoming = staging.span().first(in.count);
    comm.recv(incoming, ring.left, kRingTag);
    auto mine = ring.part(in);
    for (std::size_t i = 0; i < in.count; ++i) {
      // bf16 adds in float and rounds once per step; float adds in float.
      mine[i] = static_cast<T>(static_cast<float>(mine[i]) + static_cast<float>(incoming[i]));
    }
    sent.wait();
  }
}

template <class T>
void all_reduce(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  ring_reduce_scatter(comm, data, ledger);
  const RingView<T> ring(comm, data);
  const int n = ring.n, r = ring.r;
  if (n == 1) return;
  // All-gather: rank r starts with its summed chunk r + 1 and forwards what it receives, so in
  // step s it sends chunk r + 1 - s and receives the finished chunk r - s straight into place.
  for (int s = 0; s < n - 1; ++s) {
    Request sent = comm.isend(ring.part(ring.chunk(r + 1 - s)), ring.right, kRingTag);
    comm.recv(ring.part(ring.chunk(r - s)), ring.left, kRingTag);
    sent.wait();
  }
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
