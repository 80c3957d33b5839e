// Lab allreduce_bw: NCCL's all_reduce, all_gather and reduce_scatter, and your ring all-reduce,
// over a sweep of sizes; prints the nccl-tests style table and one RESULT line.
#include "allreduce_bw/bench.hpp"
#include "common/lab_main.hpp"
#include "common/report.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

using namespace mgpu::gpu;

int main(int argc, char** argv) {
  CLI::App app{
      "allreduce_bw: NCCL collectives and a ring all-reduce on send/recv, timed and checked"};
  CommonOptions common;
  SweepOptions sweep;
  common.add_to(app);
  app.add_option("--min-bytes", sweep.min_bytes, "smallest size in bytes");
  app.add_option("--max-bytes", sweep.max_bytes, "largest size in bytes");
  app.add_option("--factor", sweep.factor, "size growth between rows");
  app.add_option("--iters", sweep.iters, "timed calls per size");
  CLI11_PARSE(app, argc, argv);

  return guarded_main("allreduce_bw", common.result_fd, [&](GradedValues& graded) {
    DeviceCluster cluster(common.cluster());
    const std::vector<std::vector<BwRow>> per_rank =
        run_ranks(cluster, [&](DeviceComm& comm) { return run_sweep(comm, sweep); });
    if (!cluster.prints()) {
      // One rank of a multi-process job checks what it measured itself (#wrong is summed over
      // ranks, so any rank's wrong element fails every rank).
      unsigned long long wrong = 0;
      bool done = true;
      for (const BwRow& r : per_rank[static_cast<std::size_t>(cluster.first_rank())]) {
        wrong += r.wrong;
        done = done && r.implemented;
      }
      std::printf("rank %d: #wrong %llu%s\n", cluster.first_rank(), wrong,
                  done ? "" : ", ring not implemented");
      return static_cast<int>(wrong > 0 ? lab_fail : (done ? lab_pass : lab_not_implemented));
    }
    const std::vector<BwRow>& rows = per_rank[0];  // identical on every rank

    std::printf("%s, float sum\n%s\n", lab_header("allreduce_bw", cluster).c_str(),
                format_header().c_str());
    unsigned long long wrong = 0, elements = 0;
    bool ring_done = true;
    const BwRow* nccl_big = nullptr;
    const BwRow* ring_big = nullptr;
    for (const BwRow& r : rows) {
      std::printf("%s\n", format_row(r).c_str());
      wrong += r.wrong;
      elements += r.count;
      if (!r.implemented) ring_done = false;
      if (r.op == "all_reduce") nccl_big = &r;
      if (r.op == "ring_all_reduce" && r.implemented) ring_big = &r;
    }
    // For the grader: each ring result's samples, every rank's one after the other.
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].op != "ring_all_reduce" || !rows[i].implemented) continue;
      std::vector<double> samples;
      for (const std::vector<BwRow>& mine : per_rank)
        if (i < mine.size())
          samples.insert(samples.end(), mine[i].sample.begin(), mine[i].sample.end());
      graded.add("ring_" + std::to_string(rows[i].bytes), samples);
    }
    print_timing_note(cluster);
    const char* check = wrong > 0 ? "fail" : (ring_done ? "pass" : "not_implemented");
    if (!ring_done) graded.set_not_implemented("gpu allreduce_bw ring_reduce_scatter");
    ResultLine line = lab_result("allreduce_bw", cluster);
    line.add("check", check)
        .add("err", static_cast<double>(wrong) / static_cast<double>(elements ? elements : 1));
    if (nccl_big != nullptr) {
      line.add_int("bytes", static_cast<long long>(nccl_big->bytes))
          .add("ms", nccl_big->us / 1000.0)
          .add("busbw", nccl_big->busbw);
    }
    if (ring_big != nullptr && nccl_big != nullptr && nccl_big->busbw > 0) {
      line.add("ring_busbw", ring_big->busbw)
          .add("ring_vs_nccl", ring_big->busbw / nccl_big->busbw);
    }
    std::printf("%s\n", line.str().c_str());
    if (wrong > 0) return static_cast<int>(lab_fail);
    return static_cast<int>(ring_done ? lab_pass : lab_not_implemented);
  });
}
