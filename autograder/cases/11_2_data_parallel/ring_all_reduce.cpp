// Graded cases of 11.2's hand-written ring all-reduce: the summed vectors on every rank for
// world sizes and awkward lengths drawn from the seed, in fp32 and bf16, and the bytes and
// messages each rank sent (budgets: no more than the reference's ring).
#include <algorithm>
#include <cmath>
#include <vector>

#include "11_2_data_parallel/ring_all_reduce.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace dp = mgpu::data_parallel;

namespace {

// A length that does not split evenly over n ranks (or a tiny one), at most 600 elements, so that
// every rank's result (at most 8 x 600 values) can be emitted and compared in full.
std::size_t awkward_length(Ctx& ctx, int n, bool tiny_allowed) {
  const int kind = ctx.uniform_int(tiny_allowed ? 0 : 1, 3);
  if (kind == 0) return static_cast<std::size_t>(ctx.uniform_int(0, n + 1));  // empty chunks
  if (kind == 1) return static_cast<std::size_t>(n * ctx.uniform_int(1, 70) + ctx.uniform_int(1, std::max(1, n - 1)));
  return static_cast<std::size_t>(ctx.uniform_int(1, 600));
}

// Costs summed over the runs of one case: mean bytes sent per rank (the same for every correct
// ring, however the chunks are assigned) and the most messages any rank sent.
// Also whether everything went over send/recv, as the exercise demands (a call of the runtime's
// all_reduce would otherwise pass with the same bytes and messages).
struct Costs {
  double bytes_per_rank = 0;
  double messages_per_rank = 0;
  double point_to_point_only = 1;
  void add(const mgpu::Cluster& cluster) {
    double total = 0, most = 0;
    for (const mgpu::RankReport& rep : cluster.reports()) {
      // Every op kind: a ring built on the runtime's collectives is charged too.
      total += static_cast<double>(rep.traffic.total().bytes_sent);
      most = std::max(most, static_cast<double>(rep.traffic.total().messages_sent));
      if (rep.traffic.total().bytes_sent != rep.traffic.op(mgpu::OpKind::send).bytes_sent ||
          rep.traffic.total().messages_sent != rep.traffic.op(mgpu::OpKind::send).messages_sent)
        point_to_point_only = 0;
    }
    bytes_per_rank += total / cluster.world_size();
    messages_per_rank += most;
  }
};

// Runs the ring on `inputs` (one vector per rank) and returns every rank's result, concatenated.
template <class T>
std::vector<double> run_ring(const std::vector<std::vector<T>>& inputs, Costs& costs, double& identical) {
  const int n = static_cast<int>(inputs.size());
  std::vector<std::vector<T>> out(inputs.size());
  mgpu::Cluster cluster(n);
  cluster.run([&](mgpu::Rank& r) {
    std::vector<T> data = inputs[static_cast<std::size_t>(r.id())];
    dp::ring_all_reduce(r.world(), std::span<T>(data), r.memory());
    out[static_cast<std::size_t>(r.id())] = data;
  });
  costs.add(cluster);
  std::vector<double> flat;
  for (const auto& v : out) {
    for (T x : v) flat.push_back(static_cast<double>(static_cast<float>(x)));
    // Compared as the float values: the all-gather copies, so every rank has the same numbers.
    if (v.size() != out[0].size()) identical = 0;
    for (std::size_t i = 0; i < v.size() && i < out[0].size(); ++i)
      if (static_cast<float>(v[i]) != static_cast<float>(out[0][i])) identical = 0;
  }
  return flat;
}

// Rank inputs of N(0, 1) floats.
std::vector<std::vector<float>> normal_inputs(Ctx& ctx, int n, std::size_t length) {
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n));
  for (auto& v : in)
    for (double x : ctx.normal_vector(length)) v.push_back(static_cast<float>(x));
  return in;
}

// The world sizes of one case: any size 1..8, and one of 3..8, where a scheme that sends whole
// buffers costs more bytes than the ring (at N = 2 the ring also sends one whole buffer).
std::vector<int> world_sizes(Ctx& ctx) { return {ctx.uniform_int(1, 8), ctx.uniform_int(3, 8)}; }

}  // namespace

MGPU_CASE("11_2.ring_all_reduce_fp32") {
  Costs costs;
  double identical = 1;
  int run = 0;
  for (int n : world_sizes(ctx)) {
    const std::size_t length = awkward_length(ctx, n, run == 0);  // the second run is never tiny
    const std::string tag = "run" + std::to_string(run++);
    ctx.emit(tag + "_ranks", n);
    ctx.emit(tag + "_length", static_cast<double>(length));
    ctx.emit(tag + "_result", run_ring(normal_inputs(ctx, n, length), costs, identical), Dtype::fp32);
  }
  ctx.emit("identical_on_every_rank", identical);
  ctx.emit("point_to_point_only", costs.point_to_point_only);
  ctx.measure("bytes_sent_per_rank", costs.bytes_per_rank);
  ctx.measure("messages_per_rank", costs.messages_per_rank);
}

MGPU_CASE("11_2.ring_all_reduce_bf16") {
  Costs costs;
  double identical = 1;
  int run = 0;
  for (int n : world_sizes(ctx)) {
    const std::size_t length = awkward_length(ctx, n, run == 0);  // the second run is never tiny
    const std::string tag = "run" + std::to_string(run++);
    // Integers in [-16, 16]: every partial sum (at most 128 in size) is exact in bf16, so any ring
    // schedule gives the reference's values exactly.
    std::vector<std::vector<mgpu::bf16>> ints(static_cast<std::size_t>(n)), normals(static_cast<std::size_t>(n));
    for (auto& v : ints)
      for (std::size_t i = 0; i < length; ++i) v.push_back(mgpu::bf16(static_cast<float>(ctx.uniform_int(-16, 16))));
    // N(0, 1) values: rounded once per step, so a different schedule may differ by a few bf16 ulps
    // of the summed magnitude (the rubric's tolerance for these values allows for that).
    for (auto& v : normals)
      for (double x : ctx.normal_vector(length)) v.push_back(mgpu::bf16(static_cast<float>(x)));
    ctx.emit(tag + "_ranks", n);
    ctx.emit(tag + "_length", static_cast<double>(length));
    ctx.emit(tag + "_integers", run_ring(ints, costs, identical), Dtype::bf16);
    ctx.emit(tag + "_normal", run_ring(normals, costs, identical), Dtype::bf16);
  }
  ctx.emit("identical_on_every_rank", identical);
  ctx.emit("point_to_point_only", costs.point_to_point_only);
  ctx.measure("bytes_sent_per_rank", costs.bytes_per_rank);
  ctx.measure("messages_per_rank", costs.messages_per_rank);
}
