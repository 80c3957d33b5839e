// mgpu-bench: wall-clock speed of the simulated cluster's collectives, in the style of nccl-tests
// (size, count, type, time, algbw, busbw), next to this machine's memcpy bandwidth, and the time
// per call divided by the ranks, which shows whether the runtime's cost per rank grows with the
// ranks. It measures the host running the simulation, not a GPU: virtual time is the cost
// model's business.
#include "mgpu/mgpu.hpp"

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// Bytes / second of one std::memcpy of `bytes` between two already-touched buffers: the best of
/// `reps` copies (the copy least disturbed by other work on the host).
double memcpy_bandwidth(std::size_t bytes, int reps) {
  std::vector<unsigned char> a(bytes, 1), b(bytes, 2);
  std::memcpy(b.data(), a.data(), bytes);
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    a[static_cast<std::size_t>(i) % bytes] = static_cast<unsigned char>(i);
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return double(bytes) / best;
}

struct Row {
  std::string op;
  int ranks;
  std::size_t bytes;  // S as nccl-tests reports it
  std::size_t count;  // elements of S
  double seconds;     // wall time per call
  double per_rank;    // seconds / ranks: what a call costs each member
  double algbw;       // bytes / s
  double busbw;       // bytes / s
};

/// One member's buffers for a call with a full buffer S of `full.size()` floats.
struct Buffers {
  std::vector<float> full;      // S
  std::vector<float> shard;     // S / n
  std::vector<float> incoming;  // sendrecv: S from the previous rank
};

/// An operation the benchmark times. The collectives' names and bus-bandwidth factors are the
/// runtime's (mgpu::to_string, mgpu::bus_bandwidth_factor, both read from its table of
/// collectives); what is particular to the benchmark is how one call is made and what it holds.
struct BenchOp {
  std::string name;   // as --ops takes it
  mgpu::OpKind kind;  // whose bus-bandwidth factor applies
  std::size_t held;   // bytes one rank holds per byte of S (memory check)
  void (*once)(mgpu::Comm& w, Buffers& b);
};

/// The benchmark's operations: to time another collective, add a row.
const std::vector<BenchOp>& bench_ops() {
  using mgpu::OpKind;
  auto named = [](OpKind k) { return std::string(mgpu::to_string(k)); };
  static const std::vector<BenchOp> ops{
      {named(OpKind::all_reduce), OpKind::all_reduce, 1,
       [](mgpu::Comm& w, Buffers& b) { w.all_reduce(b.full); }},
      {named(OpKind::all_gather), OpKind::all_gather, 1,
       [](mgpu::Comm& w, Buffers& b) { w.all_gather(b.shard, b.full); }},
      {named(OpKind::reduce_scatter), OpKind::reduce_scatter, 1,
       [](mgpu::Comm& w, Buffers& b) { w.reduce_scatter(b.full, b.shard); }},
      // nccl-tests' sendrecv_perf: S to the next rank, S from the previous one. A rank holds the
      // outgoing and incoming buffers and the runtime's copy of the message.
      {"sendrecv", OpKind::send, 3,
       [](mgpu::Comm& w, Buffers& b) {
         const int n = w.size(), next = (w.rank() + 1) % n, prev = (w.rank() + n - 1) % n;
         mgpu::Request out = w.isend(b.full, next);
         w.recv(b.incoming, prev);
         out.wait();
       }},
  };
  return ops;
}

/// The names of every row, joined by `sep`.
std::string op_names(std::string_view sep) {
  std::string s;
  for (const auto& op : bench_ops()) s += (s.empty() ? "" : std::string(sep)) + op.name;
  return s;
}

/// Wall seconds per call of `op` on `n` ranks with a full buffer of `count` floats: the mean
/// over `iters` back-to-back calls, best of `trials` such runs.
double time_op(const BenchOp& op, int n, std::size_t count, int iters, int trials) {
  double seconds = 1e300;
  // A trial starts when the first rank leaves the opening barrier, not when rank 0 does: a woken
  // rank 0 may run late, and in a sendrecv ring the others can do most of their calls by then.
  std::vector<Clock::time_point> starts(static_cast<std::size_t>(n));
  mgpu::Cluster cluster(n);
  cluster.run([&](mgpu::Rank& r) {
    const std::size_t part = count / static_cast<std::size_t>(n);
    Buffers b{std::vector<float>(part * static_cast<std::size_t>(n), 1.0f),
              std::vector<float>(part, 1.0f),
              std::vector<float>(op.kind == mgpu::OpKind::send ? count : 0)};
    mgpu::Comm& w = r.world();
    op.once(w, b);  // warm-up: first touch of pages and thread wake-ups
    for (int t = 0; t < trials; ++t) {
      w.barrier();
      starts[static_cast<std::size_t>(r.id())] = Clock::now();
      for (int i = 0; i < iters; ++i) op.once(w, b);
      w.barrier();  // after it every rank has written its start, and none writes the next one yet
      if (r.id() == 0) {
        const auto t0 = *std::min_element(starts.begin(), starts.end());
        seconds =
            std::min(seconds, std::chrono::duration<double>(Clock::now() - t0).count() / iters);
      }
    }
  });
  return seconds;
}

/// What the command line asks for.
struct Options {
  // 256 and 1024 show how the runtime scales: a call's cost per rank should not grow with ranks.
  std::vector<int> ranks{2, 4, 8, 256, 1024};
  std::vector<std::string> ops;
  std::size_t min_bytes = 1 << 10, max_bytes = std::size_t(64) << 20;
  std::size_t max_memory = std::size_t(1) << 30;
  int factor = 4;
  int iters = 0;
  int trials = 5;
  std::string json_path;
};

void add_options(CLI::App& app, Options& o) {
  for (const auto& op : bench_ops()) o.ops.push_back(op.name);
  app.add_option("--ranks", o.ranks, "world sizes to run, e.g. 2,4,8")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--ops", o.ops, "operations, some of " + op_names(","))
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--min-bytes", o.min_bytes, "smallest buffer size S in bytes")
      ->capture_default_str();
  app.add_option("--max-bytes", o.max_bytes, "largest buffer size S in bytes")
      ->capture_default_str();
  app.add_option("--step-factor", o.factor, "multiply S by this between rows")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  app.add_option("--max-memory", o.max_memory,
                 "skip rows whose buffers on all ranks together exceed this (bytes)")
      ->capture_default_str();
  app.add_option("--iters", o.iters,
                 "timed calls per row (0: about 1 GiB moved over all ranks, 3..50)");
  app.add_option("--trials", o.trials, "repeat each row this many times and keep the fastest")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--json", o.json_path, "also write the results to this JSON file");
}

void print_preamble(double mem_bw, int trials) {
  // Per-row time: mean over back-to-back calls, best of --trials; memcpy: best of 10 copies.
  // Taking the best on both sides compares the two at their least disturbed on a shared host.
  fmt::print(
      "# mgpu-bench: wall-clock time of the simulated cluster's collectives and sendrecv on this "
      "host (float)\n");
  fmt::print(
      "# memcpy bandwidth: {:.2f} GB/s (one std::memcpy of 64 MiB, bytes copied / time, best of "
      "10)\n",
      mem_bw / 1e9);
  fmt::print(
      "# S is the full buffer (nccl-tests convention); busbw = algbw x factor "
      "(all_reduce 2(n-1)/n, sendrecv 1, others (n-1)/n)\n");
  fmt::print("# time: mean of back-to-back calls, best of {} trials; per rank: time / n\n", trials);
}

/// The row of bench_ops() named `name`, or null.
const BenchOp* find_op(const std::string& name) {
  const auto& table = bench_ops();
  const auto found =
      std::find_if(table.begin(), table.end(), [&](const BenchOp& o) { return o.name == name; });
  return found == table.end() ? nullptr : &*found;
}

/// Times `op` on `n` ranks at every size S of the options and prints one table; its rows are
/// added to `rows`.
void bench_table(const BenchOp& op, int n, const Options& o, double mem_bw,
                 std::vector<Row>& rows) {
  fmt::print("\n{} on {} ranks\n{:>12} {:>12} {:>6} {:>12} {:>14} {:>10} {:>10} {:>14}\n", op.name,
             n, "size(B)", "count", "type", "time(us)", "per rank(us)", "algbw", "busbw",
             "busbw/memcpy");
  const auto nn = static_cast<std::size_t>(n);
  for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes;
       bytes *= static_cast<std::size_t>(o.factor)) {
    std::size_t count = bytes / sizeof(float);
    count -= count % nn;  // gather/scatter need n equal parts
    if (count == 0) continue;
    const std::size_t s = count * sizeof(float);
    if (nn * op.held * s > o.max_memory) {
      fmt::print("{:>12} sizes from here skipped: {} ranks would hold {} B, over --max-memory {}\n",
                 s, n, nn * op.held * s, o.max_memory);
      break;
    }
    // Each rank reads or writes about S per call, n x S in all: aim for about 1 GiB per row.
    const int it = o.iters > 0
                       ? o.iters
                       : static_cast<int>(std::clamp<std::size_t>((1u << 30) / (nn * s), 3, 50));
    const double secs = time_op(op, n, count, it, o.trials);
    const double alg = double(s) / secs;
    const double bus = alg * mgpu::bus_bandwidth_factor(op.kind, n);
    rows.push_back({op.name, n, s, count, secs, secs / n, alg, bus});
    fmt::print("{:>12} {:>12} {:>6} {:>12.1f} {:>14.2f} {:>10.2f} {:>10.2f} {:>14.2f}\n", s, count,
               "float", secs * 1e6, secs / n * 1e6, alg / 1e9, bus / 1e9, bus / mem_bw);
  }
}

/// Runs every table the options ask for, in order; returns 2 at the first unknown op or world
/// size below 1 (after the tables before it), else 0.
int bench_all(const Options& o, double mem_bw, std::vector<Row>& rows) {
  for (const auto& name : o.ops) {
    const BenchOp* op = find_op(name);
    if (!op) {
      fmt::print(stderr, "mgpu-bench: unknown op '{}'; use {}\n", name, op_names(", "));
      return 2;
    }
    for (int n : o.ranks) {
      if (n < 1) {
        fmt::print(stderr, "mgpu-bench: --ranks {} must be >= 1\n", n);
        return 2;
      }
      bench_table(*op, n, o, mem_bw, rows);
    }
  }
  return 0;
}

/// The floor this runtime promises: 2-rank all_reduce of 64 MiB at >= half of memcpy bandwidth.
void print_floor(const std::vector<Row>& rows, double mem_bw) {
  const Row* floor_row = nullptr;
  for (const auto& r : rows)
    if (r.op == "all_reduce" && r.ranks == 2 && r.bytes == (std::size_t(64) << 20)) floor_row = &r;
  if (!floor_row) return;
  const double ratio = floor_row->busbw / mem_bw;
  fmt::print(
      "\nfloor: all_reduce 64 MiB on 2 ranks busbw {:.2f} GB/s = {:.2f} x memcpy (need >= 0.5): "
      "{}\n",
      floor_row->busbw / 1e9, ratio, ratio >= 0.5 ? "met" : "NOT met");
}

/// Writes the rows to `path` as JSON; returns 1 when it cannot, else 0.
int write_json(const std::string& path, const std::vector<Row>& rows, double mem_bw, int trials) {
  nlohmann::json j;
  j["memcpy_bandwidth_bytes_per_s"] = mem_bw;
  j["trials"] = trials;
  j["memcpy_definition"] = "bytes / time of one std::memcpy of 64 MiB, best of 10";
  for (const auto& r : rows) {
    j["results"].push_back({{"op", r.op},
                            {"ranks", r.ranks},
                            {"bytes", r.bytes},
                            {"count", r.count},
                            {"type", "float"},
                            {"time_s", r.seconds},
                            {"time_per_rank_s", r.per_rank},
                            {"algbw_bytes_per_s", r.algbw},
                            {"busbw_bytes_per_s", r.busbw},
                            {"busbw_over_memcpy", r.busbw / mem_bw}});
  }
  std::ofstream f(path);
  if (!f) {
    fmt::print(stderr, "mgpu-bench: cannot write '{}'\n", path);
    return 1;
  }
  f << j.dump(2) << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mgpu-bench: wall-clock bandwidth of the simulated cluster's collectives (nccl-tests style)"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);

  const std::size_t memcpy_bytes = std::size_t(64) << 20;
  const double mem_bw = memcpy_bandwidth(memcpy_bytes, 10);
  print_preamble(mem_bw, o.trials);
  std::vector<Row> rows;
  if (const int status = bench_all(o, mem_bw, rows); status != 0) return status;
  print_floor(rows, mem_bw);
  if (!o.json_path.empty()) return write_json(o.json_path, rows, mem_bw, o.trials);
  return 0;
}
