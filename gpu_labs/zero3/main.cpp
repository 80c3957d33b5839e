// Lab zero3: your ZeRO-3 training step on N GPUs, checked against a one-GPU reference after
// several Adam steps, with bytes per GPU by category beside 16 Psi / N, and timed against plain
// data parallelism on the same model. Prints one RESULT line.
#include "common/lab_main.hpp"
#include "common/report.hpp"
#include "common/shard.hpp"
#include "common/timer.hpp"
#include "zero3/lab.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

using namespace mgpu::gpu;
using mgpu::Category;
using mgpu::MemoryLedger;

namespace {

struct RankOut {
  std::vector<float> master;                        // check: weights after the check steps (rank 0)
  double ms_plain = 0, ms_prefetch = 0, ms_dp = 0;  // timing, per step
  MemoryLedger zero3_memory;                        // ZeRO-3 ledger after the timing shape ran
  MemoryLedger dp_memory;                           // the same for data parallelism
  std::size_t ledger_setup = 0;                     // ZeRO-3 ledger total right after its setup
  long long device_setup = 0;                       // device memory the setup took (cudaMemGetInfo)
  long long device_steps = 0;  // ... and after the timed steps (adds workspaces)
};

// Free device memory as the device reports it. The ranks meet before and after each reading, so
// no rank allocates while another reads: under emulation, where all ranks share one GPU, the
// difference of two readings is every rank's allocations together.
long long device_free(DeviceComm& comm) {
  comm.barrier();
  std::size_t free = 0, total = 0;
  MGPU_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  comm.barrier();
  return static_cast<long long>(free);
}

std::string signed_bytes(long long bytes) {
  return bytes < 0 ? "-" + format_bytes(static_cast<double>(-bytes))
                   : format_bytes(static_cast<double>(bytes));
}

// Peak bytes of the training state: weights + grads + master + optimizer (16 Psi in total).
std::size_t state_bytes(const MemoryLedger& led) {
  std::size_t sum = 0;
  for (Category c : {Category::weights, Category::grads, Category::master, Category::optimizer})
    sum += led.peak(c);
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zero3: ZeRO-3 training of a stack of linear layers, checked, measured and timed"};
  CommonOptions common;
  Zero3Shape check{4, 512, 256}, perf{8, 4096, 4096};
  int check_steps = 3;
  StepOptions steps{2, 5};
  double tol = 5e-2;
  AdamConfig adam;
  // Adam's first step is lr * sign(g) for every |g| >> eps, so a gradient near zero whose sign
  // flips under a different bf16 reduction order changes its update by 2 lr: a correct ZeRO-3
  // over NCCL could then look wrong. With eps of the order of the gradients the update is a
  // smooth function of g, and the check measures the sharding, not that discontinuity.
  double check_eps = 1e-2;
  common.add_to(app);
  add_shape_option(app, "layers", perf.layers, check.layers, "layers");
  add_shape_option(app, "d", perf.d, check.d, "width");
  add_shape_option(app, "tokens", perf.tokens, check.tokens, "rows per rank");
  app.add_option("--check-steps", check_steps, "Adam steps compared with the reference");
  steps.add_to(app);
  app.add_option("--lr", adam.lr, "Adam learning rate");
  app.add_option("--check-eps", check_eps, "Adam eps for the check (the timing uses 1e-8)");
  app.add_option("--tol", tol, "largest accepted relative error of the weight updates");
  CLI11_PARSE(app, argc, argv);

  return guarded_main("zero3", common.result_fd, [&](GradedValues& graded) {
    DeviceCluster cluster(common.cluster());
    const int n = cluster.ranks();
    const HostModel model = make_host_model(check, n, 42);
    AdamConfig check_adam = adam;
    check_adam.eps = static_cast<float>(check_eps);

    // The reference: one GPU, the whole batch as n micro-batches, plain Adam on full replicas.
    // Made by every process, so that each rank of a multi-process job checks its own weights.
    std::vector<float> ref_master;
    std::vector<double> ref_loss(static_cast<std::size_t>(check_steps), 0.0);
    DeviceCluster({1, Backend::emulated}).run([&](DeviceComm& comm) {
      MemoryLedger led;
      CublasHandle cublas(comm.stream());
      DpRank ref = make_dp_rank(comm, led, check, n, &model, 0);
      for (int k = 1; k <= check_steps; ++k) {
        dp_train_step(comm, cublas.get(), ref, check_adam, k, n * check.tokens,
                      &ref_loss[static_cast<std::size_t>(k - 1)]);
      }
      comm.synchronize();
      ref_master = ref.master.download(comm.stream());
    });

    const std::vector<RankOut> outs = run_ranks(cluster, [&](DeviceComm& comm) {
      RankOut out;
      int step = 0;  // Adam's step counter, continued across the timed runs
      auto time_steps = [&](const std::function<void(int)>& one) {
        return time_rank_steps(comm, steps.warmup, steps.iters, [&] { one(++step); });
      };
      CublasHandle cublas(comm.stream());
      {
        MemoryLedger led;
        Zero3Setup z(comm, led, check, &model);
        for (int k = 1; k <= check_steps; ++k)
          zero3_train_step(comm, cublas.get(), z.p, true, check_adam, k);
        out.master = gather_master(comm, z.p);
      }
      {
        MemoryLedger led;
        const long long before = device_free(comm);
        Zero3Setup z(comm, led, perf, nullptr);
        out.device_setup = before - device_free(comm);
        out.ledger_setup = led.current_total();
        out.ms_plain =
            time_steps([&](int k) { zero3_train_step(comm, cublas.get(), z.p, false, adam, k); });
        out.ms_prefetch =
            time_steps([&](int k) { zero3_train_step(comm, cublas.get(), z.p, true, adam, k); });
        out.device_steps = before - device_free(comm);
        out.zero3_memory = led;
      }
      {
        MemoryLedger led;
        DpRank dp = make_dp_rank(comm, led, perf, 1, nullptr, comm.rank() * perf.tokens);
        step = 0;
        out.ms_dp = time_steps([&](int k) {
          dp_train_step(comm, cublas.get(), dp, adam, k, n * perf.tokens, nullptr);
        });
        out.dp_memory = led;
      }
      return out;
    });
    // Compare what the steps changed, not the weights themselves: the updates are small next to
    // the initial weights, so an error in them would hide in a weights-relative measure.
    const RankOut& r0 = outs[static_cast<std::size_t>(cluster.first_rank())];
    std::vector<double> got, want;
    for (std::size_t i = 0; i < ref_master.size(); ++i) {
      got.push_back(static_cast<double>(r0.master[i]) - model.weights[i]);
      want.push_back(static_cast<double>(ref_master[i]) - model.weights[i]);
    }
    const double err = norm_rel_error(got, want), err_max = scaled_max_error(got, want);
    const bool pass = within_tolerance(err, tol);
    if (!cluster.prints()) {
      // One rank of a multi-process job: its own gathered weights; the job's status is the worst.
      std::printf("rank %d: update rel err %.3e (tol %.1e): %s\n", cluster.first_rank(), err, tol,
                  pass ? "pass" : "FAIL");
      return static_cast<int>(pass ? lab_pass : lab_fail);
    }
    graded.add("update", got);  // for the grader: what the check steps changed, every weight
    double ms_plain = 0, ms_pre = 0, ms_dp = 0;
    for (const RankOut& o : outs) {
      ms_plain = std::max(ms_plain, o.ms_plain);
      ms_pre = std::max(ms_pre, o.ms_prefetch);
      ms_dp = std::max(ms_dp, o.ms_dp);
    }
    const double psi = zero3_params(perf);
    const std::size_t state = state_bytes(r0.zero3_memory);
    const double tflops = zero3_step_flops(perf) / (ms_pre * 1e-3) / 1e12;

    std::printf("%s\n", lab_header("zero3", cluster).c_str());
    std::printf(
        "check  layers=%d d=%d tokens/rank=%d, %d Adam steps vs one-GPU reference: update rel err "
        "%.3e "
        "(max %.3e, tol %.1e): %s\n",
        check.layers, check.d, check.tokens, check_steps, err, err_max, tol,
        pass ? "pass" : "FAIL");
    std::printf("reference loss per step:");
    for (double l : ref_loss) std::printf(" %.5f", l);
    std::printf(
        "\nmemory per GPU, layers=%d d=%d (Psi = %.3g params), N = %d, peak bytes by category on "
        "rank 0:\n",
        perf.layers, perf.d, psi, n);
    std::printf("  %-12s %12s %14s %12s %12s\n", "category", "zero3", "formula", "=", "data par.");
    // Mixed-precision Adam per parameter: bf16 weights 2, bf16 grads 2, fp32 master 4, Adam m and
    // v 8.
    const std::pair<Category, double> per_param[] = {{Category::weights, 2},
                                                     {Category::grads, 2},
                                                     {Category::master, 4},
                                                     {Category::optimizer, 8}};
    for (const auto& [category, bytes] : per_param) {
      const std::string formula = std::to_string(static_cast<int>(bytes)) + " Psi / N";
      std::printf("  %-12s %12s %14s %12s %12s\n", std::string(mgpu::to_string(category)).c_str(),
                  format_bytes(static_cast<double>(r0.zero3_memory.peak(category))).c_str(),
                  formula.c_str(), format_bytes(bytes * psi / n).c_str(),
                  format_bytes(static_cast<double>(r0.dp_memory.peak(category))).c_str());
    }
    for (Category category : {Category::activations, Category::comm}) {
      std::printf("  %-12s %12s %14s %12s %12s\n", std::string(mgpu::to_string(category)).c_str(),
                  format_bytes(static_cast<double>(r0.zero3_memory.peak(category))).c_str(), "-",
                  "-", format_bytes(static_cast<double>(r0.dp_memory.peak(category))).c_str());
    }
    std::printf("  %-12s %12s %14s %12s %12s\n", "state",
                format_bytes(static_cast<double>(state)).c_str(), "16 Psi / N",
                format_bytes(zero3_state_bytes(psi, n)).c_str(),
                format_bytes(static_cast<double>(state_bytes(r0.dp_memory))).c_str());
    std::printf("  %-12s %12s %14s %12s %12s\n", "peak total",
                format_bytes(static_cast<double>(r0.zero3_memory.peak_total())).c_str(), "", "",
                format_bytes(static_cast<double>(r0.dp_memory.peak_total())).c_str());
    // The device's own count beside the ledger's. Emulated ranks share one GPU, so there the
    // device difference is compared with every rank's ledger together.
    std::size_t ledger_setup = r0.ledger_setup;
    if (!cluster.timing_representative()) {
      ledger_setup = 0;
      for (const RankOut& o : outs) ledger_setup += o.ledger_setup;
    }
    std::printf(
        "device memory (cudaMemGetInfo) taken by the ZeRO-3 setup%s: %s; ledger: %s (ratio %.3f); "
        "after the "
        "timed steps: %s (adds cuBLAS and NCCL workspaces and allocator rounding)\n",
        cluster.timing_representative() ? " on rank 0's GPU" : ", all emulated ranks on GPU 0",
        signed_bytes(r0.device_setup).c_str(),
        format_bytes(static_cast<double>(ledger_setup)).c_str(),
        ledger_setup > 0 ? static_cast<double>(r0.device_setup) / static_cast<double>(ledger_setup)
                         : 0.0,
        signed_bytes(r0.device_steps).c_str());
    std::printf(
        "timing tokens/rank=%d: zero3 step %.3f ms (no prefetch %.3f ms), data-parallel step %.3f "
        "ms, "
        "ratio %.2f (goal <= 1.3); %.1f TFLOP/s per GPU\n",
        perf.tokens, ms_pre, ms_plain, ms_dp, ms_pre / ms_dp, tflops);
    print_timing_note(cluster);
    ResultLine line = lab_result("zero3", cluster);
    line.add("check", pass ? "pass" : "fail")
        .add("err", err)
        .add("ms", ms_pre)
        .add("tflops", tflops);
    line.add("dp_ms", ms_dp)
        .add("vs_dp", ms_pre / ms_dp)
        .add("state_bytes", static_cast<double>(state));
    line.add("formula_bytes", zero3_state_bytes(psi, n))
        .add("device_bytes", static_cast<double>(r0.device_setup));
    line.add("ledger_bytes", static_cast<double>(ledger_setup));
    std::printf("%s\n", line.str().c_str());
    return static_cast<int>(pass ? lab_pass : lab_fail);
  });
}
