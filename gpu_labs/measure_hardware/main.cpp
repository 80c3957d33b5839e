// gpu_measure_hardware: a GEMM sweep with cuBLAS and NCCL's all-reduce by size on this server,
// written as the measurements file the planner turns into a hardware preset:
//   gpu_measure_hardware --out measured.json --source "our DGX, 2026-12-01"
//   ./mgpu plan --calibrate a100-80gb measured.json my-server.json
#include "common/gemm.hpp"
#include "common/lab_main.hpp"
#include "measure_hardware/measurements.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace mgpu::gpu;

int main(int argc, char** argv) {
  CLI::App app{"gpu_measure_hardware: GEMM and all-reduce timings for `mgpu plan --calibrate`"};
  CommonOptions common;
  SweepOptions sweep;
  sweep.ring = false;  // NCCL's all-reduce only: the planner prices the library, not the lab
  sweep.max_bytes = 256u << 20;
  int min_dim = 256, max_dim = 8192, warmup = 3, iters = 10;
  std::string out_path, source;
  common.add_to(app);
  app.add_option("--out", out_path, "measurements file to write")->required();
  app.add_option("--source", source, "who measured, on what, when (kept in the file)")->required();
  app.add_option("--min-dim", min_dim, "smallest square GEMM side")->capture_default_str();
  app.add_option("--max-dim", max_dim, "largest square GEMM side")->capture_default_str();
  app.add_option("--max-bytes", sweep.max_bytes, "largest all-reduce in bytes")
      ->capture_default_str();
  app.add_option("--iters", iters, "timed calls per size")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return guarded_main("measure_hardware", common.result_fd, [&](GradedValues&) {
    DeviceCluster cluster(common.cluster());
    const std::vector<int> dims = gemm_dims(min_dim, max_dim);
    struct Measured {
      std::vector<BwRow> bw;
      std::vector<GemmTiming> gemm;
    };
    const std::vector<Measured> per_rank = run_ranks(cluster, [&](DeviceComm& comm) {
      Measured m;
      if (comm.size() > 1) m.bw = run_sweep(comm, sweep);
      m.gemm = gemm_sweep(comm, dims, warmup, iters);  // every GPU busy, as in training
      return m;
    });
    if (!cluster.prints()) return static_cast<int>(lab_pass);
    const bool emulated = cluster.backend() == Backend::emulated;
    const auto j =
        measurements_json(source, per_rank[0].gemm, per_rank[0].bw, cluster.ranks(), emulated);
    std::ofstream(out_path) << j.dump(2) << '\n';
    std::printf("%s\n", lab_header("measure_hardware", cluster).c_str());
    for (const GemmTiming& g : per_rank[0].gemm)
      std::printf("gemm %5d^3  %9.3f ms  %7.1f TFLOP/s\n", g.m, g.seconds * 1e3,
                  gemm_flops(g.m, g.n, g.k) / g.seconds / 1e12);
    std::printf("%zu all-reduce sizes%s; wrote %s\n", j["all_reduce"].size(),
                emulated ? " (none kept: emulated ranks share one GPU)" : "", out_path.c_str());
    return static_cast<int>(lab_pass);
  });
}
