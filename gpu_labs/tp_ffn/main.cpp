// Lab tp_ffn: your tensor-parallel FFN on t GPUs, checked against the float64 reference and
// timed against the unsplit FFN and the bare cuBLAS GEMMs on one GPU. Prints one RESULT line.
#include "common/lab_main.hpp"
#include "common/report.hpp"
#include "tp_ffn/lab.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace mgpu::gpu;

int main(int argc, char** argv) {
  CLI::App app{"tp_ffn: y = GELU(x W1) W2 split over t GPUs (W1 by columns, W2 by rows)"};
  CommonOptions common;
  FfnShape check{256, 256, 1024};
  FfnShape perf{8192, 4096, 16384};
  StepOptions steps{3, 10};
  double tol = 2e-2;
  bool baselines = true;
  common.add_to(app);
  add_shape_option(app, "tokens", perf.tokens, check.tokens, "rows of x (batch x sequence)");
  add_shape_option(app, "d", perf.d, check.d, "model width");
  add_shape_option(app, "f", perf.f, check.f, "hidden width");
  steps.add_to(app);
  app.add_option("--tol", tol, "largest accepted max-relative error (bf16 operands and outputs)");
  app.add_flag("!--no-baselines", baselines, "skip the single-GPU FFN and GEMM baselines");
  CLI11_PARSE(app, argc, argv);

  return guarded_main("tp_ffn", [&] {
    DeviceCluster cluster(common.cluster());
    const int t = cluster.ranks();
    validate_shape(check, t, "check");
    validate_shape(perf, t, "timing");
    const FfnProblem problem = make_problem(check, 42);
    const std::vector<FfnRankResult> results =
        run_ranks(cluster, [&](DeviceComm& comm) { return tp_ffn_rank(comm, problem, perf, steps.warmup, steps.iters); });
    if (!cluster.prints()) return static_cast<int>(lab_pass);

    double err = 0, err_norm = 0, ms = 0;
    for (const FfnRankResult& r : results) {
      err = std::max(err, r.err);
      err_norm = std::max(err_norm, r.err_norm);
      ms = std::max(ms, r.ms);  // a step is done when its slowest rank is
    }
    const bool pass = err <= tol;
    const double tflops = ffn_step_flops(perf, t) / (ms * 1e-3) / 1e12;
    std::printf("%s\n", lab_header("tp_ffn", cluster).c_str());
    std::printf("check  tokens=%d d=%d f=%d vs float64 reference: max rel err %.3e, norm rel err %.3e (tol %.1e): %s\n",
                check.tokens, check.d, check.f, err, err_norm, tol, pass ? "pass" : "FAIL");
    std::printf("timing tokens=%d d=%d f=%d: forward+backward %.3f ms, %.1f TFLOP/s per GPU\n", perf.tokens, perf.d,
                perf.f, ms, tflops);
    std::printf("memory per GPU, timing shape, peak bytes by category on rank 0:\n%s", peak_table(results[0].memory).c_str());
    ResultLine line = lab_result("tp_ffn", cluster);
    line.add("check", pass ? "pass" : "fail").add("err", err).add("ms", ms).add("tflops", tflops);
    if (baselines && std::getenv("MGPU_WORLD_SIZE") == nullptr) {
      const FfnBaseline base = ffn_baselines(perf, steps.warmup, steps.iters);
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
    print_timing_note(cluster);
    std::printf("%s\n", line.str().c_str());
    return static_cast<int>(pass ? lab_pass : lab_fail);
  });
}
