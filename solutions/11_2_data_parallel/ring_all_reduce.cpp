// 11.2 Ring all-reduce over point-to-point messages (reference solution).
// Reduce-scatter leaves each rank with one fully summed chunk; all-gather passes the summed
// chunks around the ring so every rank ends with all of them.
#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <stdexcept>
#include <string>

namespace mgpu::data_parallel {

namespace {

template <class T>
void ring(Comm& comm, std::span<T> data, MemoryLedger& ledger) {
  const int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  const std::size_t length = data.size();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  constexpr int tag = 112;  // one tag for the whole call: per-pair order keeps the steps apart
  auto chunk = [&](int index) { return ring_chunk(length, n, ((index % n) + n) % n); };
  auto part = [&](Chunk c) { return data.subspan(c.offset, c.count); };
  Buffer<T> staging(ledger, Category::comm, chunk(0).count, "ring_all_reduce staging");

  // Reduce-scatter: in step s rank r passes on chunk r - s (its own at s = 0, then the partial
  // sum it just received) and adds its values into chunk r - s - 1. After N-1 steps chunk r + 1
  // has passed every rank once and holds the full sum.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk(r - s), in = chunk(r - s - 1);
    Request sent = comm.isend(part(out), right, tag);
    auto incoming = staging.span().first(in.count);
    comm.recv(incoming, left, tag);
    auto mine = part(in);
    for (std::size_t i = 0; i < in.count; ++i) {
      // bf16 adds in float and rounds once per step; float adds in float.
      mine[i] = static_cast<T>(static_cast<float>(mine[i]) + static_cast<float>(incoming[i]));
    }
    sent.wait();
  }
  // All-gather: rank r starts with its summed chunk r + 1 and forwards what it receives, so in
  // step s it sends chunk r + 1 - s and receives the finished chunk r - s straight into place.
  for (int s = 0; s < n - 1; ++s) {
    Request sent = comm.isend(part(chunk(r + 1 - s)), right, tag);
    comm.recv(part(chunk(r - s)), left, tag);
    sent.wait();
  }
}

}  // namespace

void ring_all_reduce(Comm& comm, std::span<float> data, MemoryLedger& ledger) {
  ring(comm, data, ledger);
}

void ring_all_reduce(Comm& comm, std::span<bf16> data, MemoryLedger& ledger) {
  ring(comm, data, ledger);
}

}  // namespace mgpu::data_parallel
