// What every lab program does around its body: the options all labs take, running one body per
// rank and collecting the results, the header and RESULT line every lab prints, turning
// "not implemented" and errors into a RESULT line that gpu_labs/check.sh can read, and the values
// a graded run writes to the descriptor the grader opened (--result-fd).
#pragma once

#include "common/comm.hpp"
#include "common/report.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace CLI {
class App;
}

namespace mgpu::gpu {

/// Exit status of a lab program: 0 pass, 1 failed check or error, 2 exercise not implemented.
enum LabExit { lab_pass = 0, lab_fail = 1, lab_not_implemented = 2 };

/// The lab's outputs on its check problem, by name, for the grader. Not a verdict: the grader
/// compares them with what the reference lab wrote for the same arguments, so printing
/// "check=pass" (or writing one) earns nothing.
class GradedValues {
 public:
  /// Records one output; a name given twice keeps the last values.
  void add(const std::string& name, std::span<const double> values);
  /// Every output recorded so far.
  const std::map<std::string, std::vector<double>>& all() const { return values_; }
  /// For a lab that caught NotImplemented itself and carried on: the grader is told the exercise
  /// `what` is not implemented, whatever was recorded.
  void set_not_implemented(const std::string& what) { not_implemented_ = what; }
  /// What set_not_implemented() named, "" if nothing.
  const std::string& not_implemented() const { return not_implemented_; }

 private:
  std::map<std::string, std::vector<double>> values_;
  std::string not_implemented_;
};

/// Runs `body` (which prints its own RESULT line, fills `values` and returns a LabExit), with
/// stdout line-buffered so a log keeps every finished line even if the program dies. If it throws
/// mgpu::NotImplemented, prints `RESULT lab=<lab> impl=... check=not_implemented ...` and returns
/// 2; any other exception: the message on stderr, `check=error`, and 1. When result_fd >= 0 it
/// then writes one JSON document there, closes it and returns 0 (the verdict is the grader's):
/// {"status": "ok", "values": {...}}, or status "not-implemented" / "exception" with a "message".
int guarded_main(const std::string& lab, int result_fd,
                 const std::function<int(GradedValues& values)>& body);

/// "solution" or "student": the MGPU_IMPL this program was built with.
const char* built_impl();

/// The options every lab takes.
struct CommonOptions {
  int ranks = 0;                 ///< --ranks: 0 means one per visible GPU
  std::string backend = "auto";  ///< --backend auto|nccl|emulated
  int result_fd = -1;            ///< --result-fd: where the grader reads the graded values
  /// The ClusterOptions these options describe.
  ClusterOptions cluster() const { return {ranks, parse_backend(backend)}; }
  /// Registers --ranks, --backend and --result-fd on `app`, bound to these fields.
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
void add_shape_option(CLI::App& app, const std::string& name, int& timing, int& check,
                      const std::string& what);

/// Runs `body(comm)` on each of this process's ranks and returns what each returned, indexed by
/// rank. Slots of ranks driven by other processes (multi-process launch) keep a default value.
template <class Body>
auto run_ranks(DeviceCluster& cluster, Body&& body)
    -> std::vector<std::invoke_result_t<Body&, DeviceComm&>> {
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
