// Lab tp_ffn: your tensor-parallel FFN on t GPUs, checked against the float64 reference and
// timed against the unsplit FFN and the bare cuBLAS GEMMs on one GPU. Prints one RESULT line.
#include "common/lab_main.hpp"
#include "common/report.hpp"
#include "tp_ffn/lab.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

using namespace mgpu::gpu;

int main(int argc, char** argv) {
  CLI::App app{"tp_ffn: y = GELU(x W1) W2 split over t GPUs (W1 by columns, W2 by rows)"};
  CommonOptions common;
  FfnShape check{256, 256, 1024};
  FfnShape perf{8192, 4096, 16384};
  int warmup = 3, iters = 10;
  double tol = 2e-2;
  bool baselines = true;
  app.add_option("--ranks", common.ranks, "ranks (0: one per visible GPU)");
  app.add_option("--backend", common.backend, "auto, nccl or emulated");
  app.add_option("--tokens", perf.tokens, "timing shape: rows of x (batch x sequence)");
  app.add_option("--d", perf.d, "timing shape: model width");
  app.add_option("--f", perf.f, "timing shape: hidden width");
  app.add_option("--check-tokens", check.tokens, "check shape: rows of x");
  app.add_option("--check-d", check.d, "check shape: model width");
  app.add_option("--check-f", check.f, "check shape: hidden width");
  app.add_option("--warmup", warmup, "untimed steps");
  app.add_option("--iters", iters, "timed steps");
  app.add_option("--tol", tol, "largest accepted max-relative error (bf16 operands and outputs)");
  app.add_flag("!--no-baselines", baselines, "skip the single-GPU FFN and GEMM baselines");
  CLI11_PARSE(app, argc, argv);

  return guarded_main("tp_ffn", [&] {
    DeviceCluster cluster(common.cluster());
    const int t = cluster.ranks();
    validate_shape(check, t, "check");
    validate_shape(perf, t, "timing");
    const FfnProblem problem = make_problem(check, 42);
    std::vector<FfnRankResult> results(static_cast<std::size_t>(t));
    std::mutex mu;
    cluster.run([&](DeviceComm& comm) {
      FfnRankResult r = tp_ffn_rank(comm, problem, perf, warmup, iters);
      std::lock_guard lock(mu);
      results[static_cast<std::size_t>(comm.rank())] = r;
    });
    if (!cluster.prints()) return static_cast<int>(lab_pass);

    double err = 0, err_norm = 0, ms = 0;
    for (const FfnRankResult& r : results) {
      err = std::max(err, r.err);
      err_norm = std::max(err_norm, r.err_norm);
      ms = std::max(ms, r.ms);  // a step is done when its slowest rank is
    }
    const bool pass = err <= tol;
    const double tflops = ffn_step_flops(perf, t) / (ms * 1e-3) / 1e12;
    std::printf("# tp_ffn: %d ranks, backend %s\n", t, backend_name(cluster.backend()));
    std::printf("check  tokens=%d d=%d f=%d vs float64 reference: max rel err %.3e, norm rel err %.3e (tol %.1e): %s\n",
                check.tokens, check.d, check.f, err, err_norm, tol, pass ? "pass" : "FAIL");
    std::printf("timing tokens=%d d=%d f=%d: forward+backward %.3f ms, %.1f TFLOP/s per GPU\n", perf.tokens, perf.d,
                perf.f, ms, tflops);
    std::printf("memory rank 0 (peak): %s\n", results[0].memory.c_str());
    ResultLine line("tp_ffn");
    line.add("impl", built_impl()).add_int("ranks", t).add("backend", backend_name(cluster.backend()));
    line.add("check", pass ? "pass" : "fail").add("err", err).add("ms", ms).add("tflops", tflops);
    if (baselines && std::getenv("MGPU_WORLD_SIZE") == nullptr) {
      const FfnBaseline base = ffn_baselines(perf, warmup, iters);
      const double flops1 = ffn_step_flops(perf, 1);
      const double ffn_tf = flops1 / (base.ffn_ms * 1e-3) / 1e12, gemm_tf = flops1 / (base.gemm_ms * 1e-3) / 1e12;
      std::printf("unsplit FFN on 1 GPU: %.3f ms, %.1f TFLOP/s; tp per-GPU rate / unsplit %.2f, speed-up %.2fx\n",
                  base.ffn_ms, ffn_tf, tflops / ffn_tf, base.ffn_ms / ms);
      std::printf("bare cuBLAS GEMMs, same shapes, 1 GPU: %.3f ms, %.1f TFLOP/s; tp per-GPU rate / GEMM %.2f\n",
                  base.gemm_ms, gemm_tf, tflops / gemm_tf);
      if (t == 1) {
        std::printf("goal at t=1: FFN >= 0.8x the GEMM rate: %s (%.2f)\n", tflops / gemm_tf >= 0.8 ? "met" : "not met",
                    tflops / gemm_tf);
      }
      line.add("vs_unsplit", tflops / ffn_tf).add("vs_gemm", tflops / gemm_tf);
    }
    if (const std::string note = timing_note(cluster); !note.empty()) std::printf("%s\n", note.c_str());
    std::printf("%s\n", line.str().c_str());
    return static_cast<int>(pass ? lab_pass : lab_fail);
  });
}
