// The wrapper, options and report lines every lab main uses; see lab_main.hpp.
#include "common/lab_main.hpp"

#include "common/job_link.hpp"
#include "common/timer.hpp"

#include <mgpu/not_implemented.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <exception>

#ifndef MGPU_IMPL_NAME
#define MGPU_IMPL_NAME "unknown"
#endif

namespace mgpu::gpu {

const char* built_impl() { return MGPU_IMPL_NAME; }

void GradedValues::add(const std::string& name, std::span<const double> values) {
  values_[name].assign(values.begin(), values.end());
}

namespace {

// A number as the grader's JSON reads it: NaN and infinities as text, which JSON has no numbers
// for.
nlohmann::json encode(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

void write_result(int fd, const nlohmann::json& doc) {
  if (fd < 0) return;
  const std::string text = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the grader went away: nothing left to tell it
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// A graded run exits 0 once its result is written: the verdict is the grader's, and any other
// status tells it that something went wrong after the result. One rank of a multi-process job
// exits with the job's worst status, so that rank 0's report never hides another rank's failure.
int graded_exit(int result_fd, int code) { return result_fd >= 0 ? 0 : agree_exit_status(code); }

}  // namespace

int guarded_main(const std::string& lab, int result_fd,
                 const std::function<int(GradedValues&)>& body) {
  // Line-buffered even into a file or a pipe: a lab that crashes or is killed by a timeout
  // still leaves every line it printed in its log.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    GradedValues values;
    const int code = body(values);
    nlohmann::json doc = {{"status", "ok"}, {"values", nlohmann::json::object()}};
    for (const auto& [name, vs] : values.all()) {
      nlohmann::json& arr = doc["values"][name] = nlohmann::json::array();
      for (double v : vs) arr.push_back(encode(v));
    }
    if (!values.not_implemented().empty())
      doc = {{"status", "not-implemented"}, {"message", values.not_implemented()}};
    std::fflush(nullptr);
    write_result(result_fd, doc);
    return graded_exit(result_fd, code);
  } catch (const mgpu::NotImplemented& e) {
    std::printf("%s\n%s\n", e.what(),
                ResultLine(lab)
                    .add("impl", built_impl())
                    .add("check", "not_implemented")
                    .add("note", e.what())
                    .str()
                    .c_str());
    write_result(result_fd, {{"status", "not-implemented"}, {"message", e.what()}});
    return graded_exit(result_fd, lab_not_implemented);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::printf("%s\n",
                ResultLine(lab).add("impl", built_impl()).add("check", "error").str().c_str());
    write_result(result_fd, {{"status", "exception"}, {"message", e.what()}});
    return graded_exit(result_fd, lab_fail);
  }
}

void CommonOptions::add_to(CLI::App& app) {
  app.add_option("--ranks", ranks, "ranks (0: one per visible GPU)");
  app.add_option("--backend", backend, "auto, nccl or emulated");
  app.add_option("--result-fd", result_fd,
                 "write the graded values as JSON to this open descriptor (the grader's)");
}

void StepOptions::add_to(CLI::App& app) {
  app.add_option("--warmup", warmup, "untimed steps");
  app.add_option("--iters", iters, "timed steps");
}

void add_shape_option(CLI::App& app, const std::string& name, int& timing, int& check,
                      const std::string& what) {
  app.add_option("--" + name, timing, "timing shape: " + what);
  app.add_option("--check-" + name, check, "check shape: " + what);
}

double time_rank_steps(DeviceComm& comm, int warmup, int iters, const std::function<void()>& step) {
  return time_per_call(
      comm.stream(), warmup, iters, step, [&] { comm.barrier(); }, [&] { comm.synchronize(); });
}

std::string lab_header(const std::string& lab, const DeviceCluster& cluster) {
  return "# " + lab + ": " + std::to_string(cluster.ranks()) + " ranks, backend " +
         backend_name(cluster.backend());
}

ResultLine lab_result(const std::string& lab, const DeviceCluster& cluster) {
  ResultLine line(lab);
  line.add("impl", built_impl())
      .add_int("ranks", cluster.ranks())
      .add("backend", backend_name(cluster.backend()));
  return line;
}

void print_timing_note(const DeviceCluster& cluster) {
  if (cluster.timing_representative()) return;
  std::printf(
      "note: %d ranks emulated on one GPU: results are checked, but timings are not "
      "representative\n",
      cluster.ranks());
}

}  // namespace mgpu::gpu
