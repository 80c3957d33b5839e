// Graded cases of 11.2's formulas: ring all-reduce volume, messages and time, bus bandwidth,
// and the gradient all-reduce of a data-parallel step. (The ring itself and data-parallel
// training have their own case files under cases/11_2_data_parallel/.)
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
}

MGPU_CASE("11_2.bus_bandwidth") {
  std::vector<double> b;
  for (int i = 0; i < 4; ++i)
    b.push_back(dp::all_reduce_bus_bandwidth(ctx.uniform_int(1, 256), ctx.log_uniform(1e9, 1e12)));
  ctx.emit("bus_bytes_per_second", b);
}

MGPU_CASE("11_2.gradient_all_reduce_bytes") {
  std::int64_t n = ctx.uniform_int(1, 4096);
  double params = std::round(ctx.log_uniform(1e6, 1e12));
  ctx.emit("bytes_per_rank",
           dp::gradient_all_reduce_bytes_per_rank(n, params, ctx.pick<double>({2, 4})));
}
