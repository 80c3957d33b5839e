// 11.2 Data parallelism: what a ring all-reduce costs.
// Bytes each rank sends, messages each rank sends, and the time under a latency + bandwidth
// link model. The running code of this chapter is measured against these functions.
#pragma once

#include <cstdint>

/// Section 11.2: data parallelism and the cost of its gradient all-reduce.
namespace mgpu::data_parallel {

/// A point-to-point link as the cost model sees it: a message of n bytes takes
/// alpha + n / beta = latency_seconds + n / bandwidth_bytes_per_second (the runtime's
/// ClusterConfig describes its links with the same two numbers and units).
struct LinkModel {
  double latency_seconds = 0;             ///< alpha: seconds per message, 0 or more
  double bandwidth_bytes_per_second = 1;  ///< beta: bytes per second, positive
};

/// Bytes one rank sends in a ring all-reduce of a buffer of `buffer_bytes` bytes over `ranks`
/// ranks: 2 * (N - 1) / N * S.
///
/// The ring does a reduce-scatter (N - 1 steps, each sending one chunk of S/N bytes) and then
/// an all-gather (N - 1 more steps), so each rank sends 2(N - 1) chunks. The total stays below
/// 2S however many ranks there are, which is why data parallelism scales. Each rank receives the
/// same amount. N = 1 sends nothing. S need not be divisible by N (the formula is the average
/// over uneven chunks).
/// @throws std::invalid_argument when ranks is below 1 or buffer_bytes is negative or not finite.
double ring_all_reduce_bytes_per_rank(std::int64_t ranks, double buffer_bytes);

/// Messages one rank sends in a ring all-reduce over `ranks` ranks: 2 * (N - 1) (0 for N = 1).
/// This is what the latency term multiplies.
/// @throws std::invalid_argument when ranks is below 1.
std::int64_t ring_all_reduce_messages_per_rank(std::int64_t ranks);

/// Time of a ring all-reduce of `buffer_bytes` over `ranks` ranks joined by `link`:
/// 2 * (N - 1) * (latency + S / (N * bandwidth)) seconds.
///
/// The 2(N - 1) steps run one after another and each moves one chunk of S/N bytes over every
/// link of the ring at once. N = 1 takes 0 seconds. For large S the time tends to
/// 2 (N - 1)/N * S / bandwidth, nearly independent of N; for small S the latency term dominates.
/// @throws std::invalid_argument when ranks is below 1, buffer_bytes is negative, the latency
///         is negative, or the bandwidth is not positive (each check names the value).
double ring_all_reduce_seconds(std::int64_t ranks, double buffer_bytes, const LinkModel& link);

/// Bus bandwidth of an all-reduce, as nccl-tests reports it: the algorithm bandwidth
/// (buffer bytes / seconds) times 2 * (N - 1) / N. It is the rate each link actually carries,
/// comparable with the link's peak whatever N is. N = 1 gives 0.
/// @throws std::invalid_argument when ranks is below 1 or algorithm_bytes_per_second is
///         negative or not finite.
double all_reduce_bus_bandwidth(std::int64_t ranks, double algorithm_bytes_per_second);

/// Bytes each data-parallel rank sends per training step to average the gradients of `params`
/// parameters stored at `bytes_per_grad` bytes each with one ring all-reduce:
/// ring_all_reduce_bytes_per_rank(ranks, params * bytes_per_grad).
/// Splitting the gradients into buckets (to overlap with backward) does not change the total.
/// @throws std::invalid_argument when ranks is below 1 or params or bytes_per_grad is negative.
double gradient_all_reduce_bytes_per_rank(std::int64_t ranks, double params, double bytes_per_grad);

}  // namespace mgpu::data_parallel
