// Lab tp_ffn: your tensor-parallel FFN on t GPUs, checked against the float64 reference and
// timed against the unsplit FFN and the bare cuBLAS GEMMs on one GPU. Prints one RESULT line.
#include "common/lab_main.hpp"
#include "common/report.hpp"
#include "tp_ffn/lab.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace mgpu::gpu;

namespace {

// For the grader: y and dx of every rank one after the other, and dW1 and dW2 whole, each rank's
// block where its shard of W1 (columns) and W2 (rows) sits.
void add_graded_outputs(GradedValues& graded, const FfnShape& check,
                        const std::vector<FfnRankResult>& results) {
  const int t = static_cast<int>(results.size()), fl = check.f / t;
  std::vector<double> y, dx;
  MatD dw1 = MatD::Zero(check.d, check.f), dw2 = MatD::Zero(check.f, check.d);
  for (int r = 0; r < t; ++r) {
    const FfnRankResult& res = results[static_cast<std::size_t>(r)];
    y.insert(y.end(), res.y.data(), res.y.data() + res.y.size());
    dx.insert(dx.end(), res.dx.data(), res.dx.data() + res.dx.size());
    if (res.dw1.rows() == check.d && res.dw1.cols() == fl) dw1.middleCols(r * fl, fl) = res.dw1;
    if (res.dw2.rows() == fl && res.dw2.cols() == check.d) dw2.middleRows(r * fl, fl) = res.dw2;
  }
  graded.add("y", y);
  graded.add("dx", dx);
  graded.add("dw1", {dw1.data(), static_cast<std::size_t>(dw1.size())});
  graded.add("dw2", {dw2.data(), static_cast<std::size_t>(dw2.size())});
}

}  // namespace

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

  return guarded_main("tp_ffn", common.result_fd, [&](GradedValues& graded) {
    DeviceCluster cluster(common.cluster());
    const int t = cluster.ranks();
    // A default f that the rank count does not divide (3 ranks, say) is moved down to one it
    // does; an f given on the command line is taken as it is, and validate_shape says if it fails.
    auto fit_default = [&](FfnShape& shape, const char* option) {
      if (app.get_option(option)->count() > 0 || shape.f % t == 0) return;
      const int f = fit_hidden_to_ranks(shape.f, t);
      std::printf(
          "note: %s default %d is not divisible by %d ranks; using %d (pass %s to choose)\n",
          option, shape.f, t, f, option);
      shape.f = f;
    };
    fit_default(check, "--check-f");
    fit_default(perf, "--f");
    validate_shape(check, t, "check");
    validate_shape(perf, t, "timing");
    const FfnProblem problem = make_problem(check, 42);
    const std::vector<FfnRankResult> results = run_ranks(cluster, [&](DeviceComm& comm) {
      return tp_ffn_rank(comm, problem, perf, steps.warmup, steps.iters);
    });
    if (!cluster.prints()) {
      // One rank of a multi-process job: it checks its own outputs; the job's exit status is the
      // worst over ranks (guarded_main).
      const FfnRankResult& mine = results[static_cast<std::size_t>(cluster.first_rank())];
      const bool ok = within_tolerance(mine.err, tol);
      std::printf("rank %d: check max rel err %.3e (tol %.1e): %s\n", cluster.first_rank(),
                  mine.err, tol, ok ? "pass" : "FAIL");
      return static_cast<int>(ok ? lab_pass : lab_fail);
    }

    double err = 0, err_norm = 0, ms = 0;
    for (const FfnRankResult& r : results) {
      err = worse_error(err, r.err);
      err_norm = worse_error(err_norm, r.err_norm);
      ms = std::max(ms, r.ms);  // a step is done when its slowest rank is
    }
    const bool pass = within_tolerance(err, tol);
    add_graded_outputs(graded, check, results);
    const double tflops = ffn_step_flops(perf, t) / (ms * 1e-3) / 1e12;
    std::printf("%s\n", lab_header("tp_ffn", cluster).c_str());
    std::printf(
        "check  tokens=%d d=%d f=%d vs float64 reference: max rel err %.3e, norm rel err %.3e (tol "
        "%.1e): %s\n",
        check.tokens, check.d, check.f, err, err_norm, tol, pass ? "pass" : "FAIL");
    std::printf(
        "timing tokens=%d d=%d f=%d (f/t=%d per GPU), forward+backward, slowest rank, %.3g TFLOP "
        "per GPU per step:\n",
        perf.tokens, perf.d, perf.f, perf.f / t, ffn_step_flops(perf, t) / 1e12);
    std::printf("  %-44s %10s %14s %10s\n", "what", "ms", "TFLOP/s/GPU", "vs GEMMs");
    ResultLine line = lab_result("tp_ffn", cluster);
    line.add("check", pass ? "pass" : "fail").add("err", err).add("ms", ms).add("tflops", tflops);
    if (baselines && !cluster.launch().multi_process()) {
      const FfnBaseline base = ffn_baselines(perf, t, steps.warmup, steps.iters);
      const double gemm_tf = ffn_step_flops(perf, t) / (base.gemm_ms * 1e-3) / 1e12;
      const double ffn_tf = ffn_step_flops(perf, 1) / (base.ffn_ms * 1e-3) / 1e12;
      const std::string mine =
          "tp_ffn on " + std::to_string(t) + " rank(s), " + backend_name(cluster.backend());
      std::printf("  %-44s %10.3f %14.1f %10.2f\n", mine.c_str(), ms, tflops, tflops / gemm_tf);
      std::printf("  %-44s %10.3f %14.1f %10.2f\n", "bare cuBLAS GEMMs of one rank's shapes, 1 GPU",
                  base.gemm_ms, gemm_tf, 1.0);
      // Its own GEMMs have the full f: comparable with the row above only at t = 1.
      char unsplit_vs[32] = "-";
      if (t == 1) std::snprintf(unsplit_vs, sizeof unsplit_vs, "%.2f", ffn_tf / gemm_tf);
      std::printf("  %-44s %10.3f %14.1f %10s\n", "unsplit FFN (t=1, full f), 1 GPU", base.ffn_ms,
                  ffn_tf, unsplit_vs);
      std::printf(
          "tp per-GPU rate / unsplit FFN rate %.2f; speed-up over the unsplit FFN %.2fx on %d "
          "GPU(s)\n",
          tflops / ffn_tf, base.ffn_ms / ms, t);
      if (t == 1) {
        std::printf("goal at t=1: FFN >= 0.8x the bare GEMM rate: %s (%.2f)\n",
                    tflops / gemm_tf >= 0.8 ? "met" : "not met", tflops / gemm_tf);
      }
      line.add("gemm_tflops", gemm_tf)
          .add("vs_unsplit", tflops / ffn_tf)
          .add("vs_gemm", tflops / gemm_tf);
    } else {
      std::printf("  %-44s %10.3f %14.1f %10s\n", "tp_ffn", ms, tflops, "-");
    }
    std::printf("memory per GPU, timing shape, peak bytes by category on rank 0:\n%s",
                peak_table(results[0].memory).c_str());
    print_timing_note(cluster);
    std::printf("%s\n", line.str().c_str());
    return static_cast<int>(pass ? lab_pass : lab_fail);
  });
}
