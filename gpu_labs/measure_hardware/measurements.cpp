// The GEMM sweep (device) and the measurements file (host).
#include "measure_hardware/measurements.hpp"

#include "common/device_buffer.hpp"
#include "common/gemm.hpp"
#include "common/kernels.hpp"
#include "common/timer.hpp"

#include <stdexcept>

namespace mgpu::gpu {

std::vector<int> gemm_dims(int min_dim, int max_dim) {
  if (min_dim <= 0 || max_dim < min_dim)
    throw std::invalid_argument("gemm_dims: need 0 < min_dim <= max_dim, got " +
                                std::to_string(min_dim) + " and " + std::to_string(max_dim));
  std::vector<int> dims;
  for (long long d = min_dim; d <= max_dim; d *= 2) dims.push_back(static_cast<int>(d));
  if (dims.back() != max_dim) dims.push_back(max_dim);
  return dims;
}

std::vector<GemmTiming> gemm_sweep(DeviceComm& comm, const std::vector<int>& dims, int warmup,
                                   int iters) {
  std::vector<GemmTiming> out;
  if (dims.empty()) return out;
  const auto largest =
      static_cast<std::size_t>(dims.back()) * static_cast<std::size_t>(dims.back());
  MemoryLedger& led = comm.ledger();
  cudaStream_t s = comm.stream();
  DeviceBuffer<bf16> a(led, Category::activations, largest), b(led, Category::activations, largest),
      c(led, Category::activations, largest);
  // Random operands: all-zero inputs draw less power and can run faster than real training.
  fill_uniform(a.data(), largest, 1.0f, 1u, s);
  fill_uniform(b.data(), largest, 1.0f, 2u, s);
  CublasHandle handle(s);
  for (int d : dims) {
    const double ms = time_per_call(s, warmup, iters, [&] {
      gemm(handle.get(), Trans::no, Trans::no, d, d, d, a.data(), b.data(), c.data(), DType::bf16);
    });
    out.push_back({d, d, d, ms / 1000.0});
  }
  comm.synchronize();
  return out;
}

nlohmann::ordered_json measurements_json(const std::string& source,
                                         const std::vector<GemmTiming>& gemm,
                                         const std::vector<BwRow>& bw, int ranks, bool emulated) {
  nlohmann::ordered_json j;
  j["source"] = source;
  j["gemm"] = nlohmann::ordered_json::array();
  for (const GemmTiming& g : gemm)
    j["gemm"].push_back({{"flops", gemm_flops(g.m, g.n, g.k)},
                         {"seconds", g.seconds},
                         {"m", g.m},
                         {"n", g.n},
                         {"k", g.k}});
  j["all_reduce"] = nlohmann::ordered_json::array();
  if (ranks >= 2 && !emulated)
    for (const BwRow& r : bw)
      if (r.op == "all_reduce")
        j["all_reduce"].push_back({{"bytes", r.bytes}, {"ranks", ranks}, {"seconds", r.us * 1e-6}});
  return j;
}

}  // namespace mgpu::gpu
