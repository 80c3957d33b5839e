// Program gpu_measure_hardware: what the planner's hardware presets assume, measured on this
// server (GEMM time by size with cuBLAS, NCCL all-reduce time by size), written as the
// measurements file `mgpu plan --calibrate BASE MEASURED.json OUT.json` reads.
#pragma once

#include "allreduce_bw/bench.hpp"
#include "common/comm.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mgpu::gpu {

/// One timed GEMM: C(m, n) = A(m, k) B(k, n) in bf16 with fp32 accumulation.
struct GemmTiming {
  int m = 0;             ///< rows of A and C
  int n = 0;             ///< columns of B and C
  int k = 0;             ///< the inner dimension
  double seconds = 0.0;  ///< mean time of one call
};

/// Square GEMM sizes min_dim, 2 min_dim, ... up to and including max_dim (both > 0, min <= max).
/// Throws std::invalid_argument otherwise.
std::vector<int> gemm_dims(int min_dim, int max_dim);

/// Times one square GEMM per size on this rank's device and stream: `warmup` untimed calls,
/// then the mean of `iters`. Every rank may call it at once (each on its own GPU), as a server
/// does while it trains.
std::vector<GemmTiming> gemm_sweep(DeviceComm& comm, const std::vector<int>& dims, int warmup,
                                   int iters);

/// The measurements file: {"source": source, "gemm": [{"flops": 2 m n k, "seconds", "m", "n",
/// "k"}, ...], "all_reduce": [{"bytes", "ranks", "seconds"}, ...]}. Only the rows of `bw` whose op
/// is "all_reduce" are kept (times from microseconds to seconds), and none when `ranks` < 2 or
/// `emulated` (one device's copies say nothing about the links).
nlohmann::ordered_json measurements_json(const std::string& source,
                                         const std::vector<GemmTiming>& gemm,
                                         const std::vector<BwRow>& bw, int ranks, bool emulated);

}  // namespace mgpu::gpu
