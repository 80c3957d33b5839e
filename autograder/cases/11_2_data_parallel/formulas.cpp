// Graded cases of 11.2's formulas: ring all-reduce volume, messages and time, bus bandwidth,
// and the gradient all-reduce of a data-parallel step. (The ring itself and data-parallel
// training have their own case files beside this one.)
#include "11_2_data_parallel/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace dp = mgpu::data_parallel;

MGPU_CASE("11_2.ring_bytes_and_messages") {
  double buffer = std::round(ctx.log_uniform(1e3, 1e10));
  std::vector<double> bytes, messages;
  for (std::int64_t n : {1, 2, 3, 4, 7, 8, 16, 64}) {
    bytes.push_back(dp::ring_all_reduce_bytes_per_rank(n, buffer));
    messages.push_back(static_cast<double>(dp::ring_all_reduce_messages_per_rank(n)));
  }
  std::int64_t n = ctx.uniform_int(1, 1024);
  bytes.push_back(dp::ring_all_reduce_bytes_per_rank(n, buffer));
  messages.push_back(static_cast<double>(dp::ring_all_reduce_messages_per_rank(n)));
  ctx.emit("bytes_per_rank", bytes);
  ctx.emit("messages_per_rank", messages);
  ctx.emit_rejects("rejects_zero_ranks", [&] { dp::ring_all_reduce_bytes_per_rank(0, buffer); });
}

MGPU_CASE("11_2.ring_seconds") {
  dp::LinkModel link{ctx.log_uniform(1e-7, 1e-4), ctx.log_uniform(1e9, 1e12)};
  std::vector<double> s;
  for (int i = 0; i < 4; ++i)
    s.push_back(
        dp::ring_all_reduce_seconds(ctx.uniform_int(1, 512), ctx.log_uniform(1e3, 1e10), link));
  ctx.emit("seconds", s);
  // Fixed points on an NVLink-like link: one rank (0 s), two ranks (where one latency per phase
  // and one per step agree), and 8 and 64 ranks on a small, latency-bound buffer and a large one.
  const dp::LinkModel nvlink{2e-6, 450e9};
  std::vector<double> edges;
  for (std::int64_t n : {1, 2, 8, 64})
    for (double bytes : {4096.0, 1e9})
      edges.push_back(dp::ring_all_reduce_seconds(n, bytes, nvlink));
  ctx.emit("edges", edges);
  ctx.emit_rejects("rejects_zero_ranks", [&] { dp::ring_all_reduce_seconds(0, 1e6, nvlink); });
  ctx.emit_rejects("rejects_negative_latency", [] {
    dp::ring_all_reduce_seconds(4, 1e6, dp::LinkModel{-1e-6, 450e9});
  });
  ctx.emit_rejects("rejects_zero_bandwidth", [] {
    dp::ring_all_reduce_seconds(4, 1e6, dp::LinkModel{2e-6, 0});
  });
}

MGPU_CASE("11_2.bus_bandwidth") {
  std::vector<double> b;
  for (int i = 0; i < 4; ++i)
    b.push_back(dp::all_reduce_bus_bandwidth(ctx.uniform_int(1, 256), ctx.log_uniform(1e9, 1e12)));
  ctx.emit("bus_bytes_per_second", b);
  // Fixed ranks at 100 GB/s: one rank carries nothing (0), two carry exactly the algorithm
  // bandwidth, and 3 and 8 ranks 4/3 and 7/4 of it.
  std::vector<double> edges;
  for (std::int64_t n : {1, 2, 3, 8}) edges.push_back(dp::all_reduce_bus_bandwidth(n, 100e9));
  ctx.emit("edges", edges);
  ctx.emit_rejects("rejects_zero_ranks", [] { dp::all_reduce_bus_bandwidth(0, 100e9); });
  ctx.emit_rejects("rejects_negative_bandwidth", [] { dp::all_reduce_bus_bandwidth(4, -1); });
}

MGPU_CASE("11_2.gradient_all_reduce_bytes") {
  std::int64_t n = ctx.uniform_int(1, 4096);
  double params = std::round(ctx.log_uniform(1e6, 1e12));
  ctx.emit("bytes_per_rank",
           dp::gradient_all_reduce_bytes_per_rank(n, params, ctx.pick<double>({2, 4})));
  // Fixed points with both gradient widths (the draw above picks one): 7e9 bf16 gradients on 8
  // ranks, 70e9 fp32 gradients on 64, and 1 and 2 ranks (nothing sent; exactly the buffer).
  ctx.emit("fixed", std::vector<double>{dp::gradient_all_reduce_bytes_per_rank(8, 7e9, 2),
                                        dp::gradient_all_reduce_bytes_per_rank(64, 70e9, 4),
                                        dp::gradient_all_reduce_bytes_per_rank(1, 1e9, 4),
                                        dp::gradient_all_reduce_bytes_per_rank(2, 1e9, 4)});
  ctx.emit_rejects("rejects_zero_ranks", [] { dp::gradient_all_reduce_bytes_per_rank(0, 1e9, 2); });
}
