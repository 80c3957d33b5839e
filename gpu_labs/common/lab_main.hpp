// What every lab program does around its body: the options all labs take, running one body per
// rank and collecting the results, the header and RESULT line every lab prints, and turning
// "not implemented" and errors into a RESULT line that gpu_labs/check.sh can read.
#pragma once

#include "common/comm.hpp"
#include "common/report.hpp"

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace CLI {
class App;
}

namespace mgpu::gpu {

/// Exit status of a lab program: 0 pass, 1 failed check or error, 2 exercise not implemented.
enum LabExit { lab_pass = 0, lab_fail = 1, lab_not_implemented = 2 };

/// Runs `body` (which prints its own RESULT line and returns a LabExit), with stdout
/// line-buffered so a log keeps every finished line even if the program dies. If it throws
/// mgpu::NotImplemented, prints `RESULT lab=<lab> impl=... check=not_implemented ...` and returns
/// 2; any other exception: the message on stderr, `check=error`, and 1.
int guarded_main(const std::string& lab, const std::function<int()>& body);

/// "solution" or "student": the MGPU_IMPL this program was built with.
const char* built_impl();

/// The two options every lab takes.
struct CommonOptions {
  int ranks = 0;                 ///< --ranks: 0 means one per visible GPU
  std::string backend = "auto";  ///< --backend auto|nccl|emulated
  /// The ClusterOptions these options describe.
  ClusterOptions cluster() const { return {ranks, parse_backend(backend)}; }
  /// Registers --ranks and --backend on `app`, bound to these fields.
  void add_to(CLI::App& app);
};

/// How long the labs that time training steps run them.
struct StepOptions {
  int warmup = 3;  ///< --warmup: untimed steps first
  int iters = 10;  ///< --iters: timed steps, averaged
  /// Registers --warmup and --iters on `app`, bound to these fields.
  void add_to(CLI::App& app);
};

/// Registers one dimension of the two shapes a lab runs: `--<name>` sets it in the timing shape
/// (`timing`), `--check-<name>` in the small shape checked against the reference (`check`).
void add_shape_option(CLI::App& app, const std::string& name, int& timing, int& check, const std::string& what);

/// Runs `body(comm)` on each of this process's ranks and returns what each returned, indexed by
/// rank. Slots of ranks driven by other processes (multi-process launch) keep a default value.
template <class Body>
auto run_ranks(DeviceCluster& cluster, Body&& body) -> std::vector<std::invoke_result_t<Body&, DeviceComm&>> {
  using Result = std::invoke_result_t<Body&, DeviceComm&>;
  std::vector<Result> results(static_cast<std::size_t>(cluster.ranks()));
  std::mutex mu;
  cluster.run([&](DeviceComm& comm) {
    Result r = body(comm);
    std::lock_guard lock(mu);
    results[static_cast<std::size_t>(comm.rank())] = std::move(r);
  });
  return results;
}

/// Mean milliseconds of one `step` on this rank: `warmup` untimed steps, a barrier so all ranks
/// start together, `iters` timed steps on comm.stream(), and an abort-aware wait for them.
double time_rank_steps(DeviceComm& comm, int warmup, int iters, const std::function<void()>& step);

/// The first line every lab prints: "# <lab>: <n> ranks, backend <name>".
std::string lab_header(const std::string& lab, const DeviceCluster& cluster);

/// A RESULT line for `lab` that already holds impl, ranks and backend; the lab adds the rest.
ResultLine lab_result(const std::string& lab, const DeviceCluster& cluster);

/// Under emulation prints, on its own line, that the timings say nothing about real scaling.
void print_timing_note(const DeviceCluster& cluster);

}  // namespace mgpu::gpu
