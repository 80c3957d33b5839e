// The wrapper, options and report lines every lab main uses; see lab_main.hpp.
#include "common/lab_main.hpp"

#include "common/timer.hpp"

#include <mgpu/not_implemented.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#ifndef MGPU_IMPL_NAME
#define MGPU_IMPL_NAME "unknown"
#endif

namespace mgpu::gpu {

const char* built_impl() { return MGPU_IMPL_NAME; }

int guarded_main(const std::string& lab, const std::function<int()>& body) {
  // Line-buffered even into a file or a pipe: a lab that crashes or is killed by a timeout
  // still leaves every line it printed in its log.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return body();
  } catch (const mgpu::NotImplemented& e) {
    std::printf("%s\n%s\n", e.what(),
                ResultLine(lab).add("impl", built_impl()).add("check", "not_implemented").add("note", e.what()).str().c_str());
    return lab_not_implemented;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::printf("%s\n", ResultLine(lab).add("impl", built_impl()).add("check", "error").str().c_str());
    return lab_fail;
  }
}

void CommonOptions::add_to(CLI::App& app) {
  app.add_option("--ranks", ranks, "ranks (0: one per visible GPU)");
  app.add_option("--backend", backend, "auto, nccl or emulated");
}

void StepOptions::add_to(CLI::App& app) {
  app.add_option("--warmup", warmup, "untimed steps");
  app.add_option("--iters", iters, "timed steps");
}

void add_shape_option(CLI::App& app, const std::string& name, int& timing, int& check, const std::string& what) {
  app.add_option("--" + name, timing, "timing shape: " + what);
  app.add_option("--check-" + name, check, "check shape: " + what);
}

double time_rank_steps(DeviceComm& comm, int warmup, int iters, const std::function<void()>& step) {
  return time_per_call(comm.stream(), warmup, iters, step, [&] { comm.barrier(); }, [&] { comm.synchronize(); });
}

std::string lab_header(const std::string& lab, const DeviceCluster& cluster) {
  return "# " + lab + ": " + std::to_string(cluster.ranks()) + " ranks, backend " + backend_name(cluster.backend());
}

ResultLine lab_result(const std::string& lab, const DeviceCluster& cluster) {
  ResultLine line(lab);
  line.add("impl", built_impl()).add_int("ranks", cluster.ranks()).add("backend", backend_name(cluster.backend()));
  return line;
}

void print_timing_note(const DeviceCluster& cluster) {
  if (cluster.timing_representative()) return;
  std::printf("note: %d ranks emulated on one GPU: results are checked, but timings are not representative\n",
              cluster.ranks());
}

}  // namespace mgpu::gpu
