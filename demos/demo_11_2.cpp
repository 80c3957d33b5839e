// `mgpu demo 11_2`: the chapter's ring all-reduce and data-parallel steps on N simulated ranks,
// with bytes, messages and virtual time printed beside the 11.2 formulas, and a Chrome trace
// in which the bucketed all-reduces visibly run under the backward pass.
#include "common.hpp"
#include "demo.hpp"
#include "table.hpp"

#include "11_2_data_parallel/data_parallel.hpp"
#include "11_2_data_parallel/formulas.hpp"
#include "11_2_data_parallel/ring_all_reduce.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgpu::demo {

namespace {

namespace dp = mgpu::data_parallel;

struct Options {
  int ranks = 4;
  int steps = 3;
  std::string trace;
  std::optional<std::size_t> bucket_bytes;
  std::int64_t sequences_per_rank = 16;
  int layers = 6;
  double flops = 3e10;
  double bandwidth = 5e8;
};

// What one phase of the run measured on every rank (means over ranks, per step).
struct Phase {
  std::string name;
  std::string error;  // "not implemented: ..." when the chapter code is not written yet
  double step_seconds = 0, compute_seconds = 0, comm_seconds = 0, overlap_seconds = 0;
  double bytes_sent = 0, messages = 0;
  std::vector<double> losses;  // rank 0, per step
};

// Per-rank numbers of one phase, written by each rank's thread into its own slot.
struct Slot {
  double t0 = 0, t1 = 0, compute0 = 0, compute1 = 0, comm0 = 0, comm1 = 0;
  TrafficCounts before, after;
};

Phase summarise(const std::string& name, const std::vector<Slot>& slots,
                const std::vector<RankReport>& reports, int steps) {
  Phase p;
  p.name = name;
  const auto n = static_cast<double>(slots.size());
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const Slot& s = slots[r];
    p.step_seconds += (s.t1 - s.t0) / n / steps;
    p.compute_seconds += (s.compute1 - s.compute0) / n / steps;
    p.comm_seconds += (s.comm1 - s.comm0) / n / steps;
    p.overlap_seconds += reports[r].clock.overlap_time(s.t0, s.t1) / n / steps;
    p.bytes_sent += static_cast<double>(s.after.bytes_sent - s.before.bytes_sent) / n / steps;
    p.messages += static_cast<double>(s.after.messages_sent - s.before.messages_sent) / n / steps;
  }
  return p;
}

std::string plain(double value) { return fmt::format("{:.1f}", value); }

// What every section works with: the model, its gradients and the cluster they run on.
struct Setup {
  const model::ModelConfig& cfg;
  const model::Model& net;
  double grad_bytes;
  std::vector<dp::Bucket> buckets;  // empty while plan_buckets is a TODO
  ClusterConfig cc;
  bool one_node;
  dp::LinkModel link;
  std::int64_t sequences;  // per step, all ranks
};

model::ModelConfig model_config(const Options& o) {
  model::ModelConfig cfg;
  cfg.d_in = 6;
  cfg.d_model = 32;
  cfg.d_ff = 128;
  cfg.n_layers = o.layers;
  cfg.n_heads = 2;
  cfg.seq_len = 4;
  cfg.d_out = 3;
  return cfg;
}

Setup make_setup(const Options& o, const model::Model& net, Checks& checks) {
  const std::size_t bucket_bytes = o.bucket_bytes.value_or(net.num_params() * sizeof(float) / 6);
  const ClusterConfig cc = slow_cluster(o.ranks, o.flops, o.bandwidth);
  const bool one_node = o.ranks <= cc.gpus_per_node;
  const dp::LinkModel link{
      one_node ? cc.intra_node_latency_seconds : cc.inter_node_latency_seconds,
      one_node ? cc.intra_node_bytes_per_second : cc.inter_node_bytes_per_second};
  return Setup{net.config(),
               net,
               static_cast<double>(net.num_params() * sizeof(float)),
               checks.formula([&] { return dp::plan_buckets(net, bucket_bytes); })
                   .value_or(std::vector<dp::Bucket>{}),
               cc,
               one_node,
               link,
               o.sequences_per_rank * o.ranks};
}

void print_header(const Options& o, const Setup& s) {
  fmt::print("11.2 data parallelism on {} simulated ranks ({})\n", o.ranks,
             s.one_node ? "one node" : "several nodes");
  fmt::print("code: {}\n", code_line("11_2_data_parallel"));
  fmt::print("model: {} blocks, d_model {}, d_ff {}: {} parameters, {} of fp32 gradients\n",
             s.cfg.n_layers, s.cfg.d_model, s.cfg.d_ff, s.net.num_params(),
             human_bytes(s.grad_bytes));
  fmt::print(
      "batch: {} sequences of {} tokens per step, {} per rank; cost model: {:.3g} FLOP/s per rank, "
      "links {:.3g} B/s with {:.0f} us latency\n",
      s.sequences, s.cfg.seq_len, o.sequences_per_rank, s.cc.flops_per_second,
      s.link.bandwidth_bytes_per_second, s.link.latency_seconds * 1e6);
  fmt::print(
      "(a slow GPU for a small model, so compute and communication take comparable time, as in "
      "real runs)\n\n");
}

// One ring all-reduce of a gradient-sized buffer: bytes, messages and time beside the formulas.
void ring_all_reduce_section(const Options& o, const Setup& s, Checks& checks) {
  fmt::print("Ring all-reduce of one gradient-sized buffer ({} ring_all_reduce, TODO 6)\n",
             whose());
  Cluster cluster(s.cc);
  std::string error;
  if (!checks.run(
          [&] {
            cluster.run([&](Rank& r) {
              Buffer<float> data(r.memory(), Category::grads, s.net.num_params(), "grads");
              std::fill(data.begin(), data.end(), 1.0f);
              dp::ring_all_reduce(r.world(), data.span(), r.memory());
            });
          },
          &error)) {
    fmt::print("  {}\n\n", error);
    return;
  }
  double bytes = 0, messages = 0, seconds = 0;
  for (const RankReport& rep : cluster.reports()) {
    bytes += static_cast<double>(rep.traffic.op(OpKind::send).bytes_sent) / o.ranks;
    messages += static_cast<double>(rep.traffic.op(OpKind::send).messages_sent) / o.ranks;
    seconds = std::max(seconds, rep.clock.end_time());
  }
  const auto want_bytes =
      checks.formula([&] { return dp::ring_all_reduce_bytes_per_rank(o.ranks, s.grad_bytes); });
  const auto want_messages = checks.formula(
      [&] { return static_cast<double>(dp::ring_all_reduce_messages_per_rank(o.ranks)); });
  const auto want_seconds =
      checks.formula([&] { return dp::ring_all_reduce_seconds(o.ranks, s.grad_bytes, s.link); });
  // The mean over ranks is exact even when the buffer does not split evenly.
  checks.compare("ring bytes per rank", bytes, want_bytes, 1e-9 * s.grad_bytes);
  checks.compare("ring messages per rank", messages, want_messages, 1e-9);
  const Table table("", {{"", 26, true}, {"measured", 16}, {"predicted", 16}, {"", 0, true, 3}});
  table.row({"bytes sent per rank (mean)", plain(bytes), cell(want_bytes, plain),
             fmt::format("2(N-1)/N x {:.0f}", s.grad_bytes)});
  table.row({"messages per rank", fmt::format("{:.0f}", messages),
             cell(want_messages, [](double m) { return fmt::format("{:.0f}", m); }), "2(N-1)"});
  table.row({"time", us(seconds), cell(want_seconds, us), "2(N-1)(latency + S/(N bandwidth))"});
  fmt::print("\n");
}

// One way of averaging the gradients inside a data-parallel step.
struct Variant {
  std::string name;
  std::function<double(Rank&, model::Replica&, model::Adam&, const model::Batch&)> step;
};

std::vector<Variant> variants(const Setup& s) {
  const model::Model& net = s.net;
  return {
      {"one all_reduce after backward",
       [&net](Rank& r, model::Replica& rep, model::Adam& adam, const model::Batch& b) {
         return dp::data_parallel_step(r, r.world(), net, rep, adam, b, dp::GradAverager::runtime);
       }},
      {whose() + " ring after backward",
       [&net](Rank& r, model::Replica& rep, model::Adam& adam, const model::Batch& b) {
         return dp::data_parallel_step(r, r.world(), net, rep, adam, b, dp::GradAverager::ring);
       }},
      {s.buckets.empty() ? std::string("buckets during backward")
                         : fmt::format("{} buckets during backward", s.buckets.size()),
       [&net, &s](Rank& r, model::Replica& rep, model::Adam& adam, const model::Batch& b) {
         return dp::data_parallel_step_overlapped(r, r.world(), net, rep, adam, b, s.buckets);
       }},
  };
}

// Runs `o.steps` steps of one variant on a fresh cluster; the replicas must end bitwise equal.
Phase run_phase(const Options& o, const Setup& s, const Variant& v, bool trace, Checks& checks) {
  Cluster cluster(s.cc);
  std::vector<Slot> slots(static_cast<std::size_t>(o.ranks));
  std::vector<double> losses;
  std::vector<std::vector<float>> params(static_cast<std::size_t>(o.ranks));
  Phase phase;
  phase.name = v.name;
  const bool ran = checks.run(
      [&] {
        cluster.run([&](Rank& r) {
          model::Replica rep = s.net.make_replica(r.memory(), 1);
          model::Adam adam(r.memory(), s.net.num_params());
          Slot& slot = slots[static_cast<std::size_t>(r.id())];
          slot.t0 = r.now();
          slot.compute0 = r.clock().compute_time();
          slot.comm0 = r.clock().comm_time();
          slot.before = r.traffic().total();
          for (int step = 0; step < o.steps; ++step) {
            const double loss =
                v.step(r, rep, adam,
                       s.net.make_batch(s.sequences, 100 + static_cast<std::uint64_t>(step)));
            if (r.id() == 0) losses.push_back(loss);
          }
          // Wait for anything still on the comm stream, so the step time counts it.
          r.clock().wait_until(r.clock().end_time(), "drain");
          slot.t1 = r.now();
          slot.compute1 = r.clock().compute_time();
          slot.comm1 = r.clock().comm_time();
          slot.after = r.traffic().total();
          params[static_cast<std::size_t>(r.id())].assign(rep.params.begin(), rep.params.end());
        });
      },
      &phase.error);
  if (!ran) return phase;
  phase = summarise(v.name, slots, cluster.reports(), o.steps);
  phase.losses = losses;
  bool identical = true;
  for (const auto& p : params)
    identical = identical && std::memcmp(p.data(), params[0].data(), p.size() * 4) == 0;
  checks.check(v.name + ": replicas differ", identical);
  if (trace) cluster.write_chrome_trace(o.trace);
  return phase;
}

// Every variant's step, mean per step and rank, above the no-overlap and ideal-overlap bounds.
std::vector<Phase> training_steps_section(const Options& o, const Setup& s, Checks& checks) {
  // One run holds every phase back to back, so the trace shows them side by side in time.
  const std::vector<Variant> vs = variants(s);
  std::vector<Phase> phases;
  for (const Variant& v : vs)
    phases.push_back(run_phase(o, s, v, &v == &vs.back() && !o.trace.empty(), checks));

  const double fwd =
      s.net.forward_flops(o.sequences_per_rank * s.cfg.seq_len) / s.cc.flops_per_second;
  const Table table(
      fmt::format("Data-parallel training steps (TODOs 7-10), mean per step and rank over {} steps",
                  o.steps),
      {{"", 32, true},
       {"step time", 12},
       {"compute", 12},
       {"comm busy", 12},
       {"overlap", 12},
       {"bytes sent", 14},
       {"messages", 10}});
  for (const Phase& p : phases) {
    if (!p.error.empty()) {
      fmt::print("  {:<32}{}\n", p.name, p.error);
      continue;
    }
    table.row({p.name, us(p.step_seconds), us(p.compute_seconds), us(p.comm_seconds),
               us(p.overlap_seconds), plain(p.bytes_sent), plain(p.messages)});
  }
  const auto comm =
      checks.formula([&] { return dp::ring_all_reduce_seconds(o.ranks, s.grad_bytes, s.link); });
  const auto bytes = checks.formula([&] {
    return dp::gradient_all_reduce_bytes_per_rank(o.ranks, static_cast<double>(s.net.num_params()),
                                                  4);
  });
  const auto plus = [](const std::optional<double>& x, double y) {
    return x ? std::optional<double>(*x + y) : std::nullopt;
  };
  table.row({"predicted, no overlap", cell(plus(comm, 3 * fwd), us), us(3 * fwd), cell(comm, us),
             us(0), cell(bytes, plain), std::to_string(2 * (o.ranks - 1))});
  table.row({"predicted, ideal overlap",
             cell(comm ? std::optional<double>(fwd + std::max(2 * fwd, *comm)) : std::nullopt, us),
             "   forward + max(backward, all-reduce): the most buckets can save"});
  return phases;
}

void print_losses(const std::vector<Phase>& phases) {
  if (phases.front().losses.empty()) return;
  fmt::print("\nloss of rank 0's slice per step:");
  for (double l : phases.front().losses) fmt::print(" {:.4f}", l);
  fmt::print("\n");
}

void print_trace_note(const Options& o, const std::vector<Phase>& phases) {
  if (o.trace.empty()) return;
  if (phases.back().error.empty()) {
    fmt::print(
        "trace of the bucketed run written to {} (open it in https://ui.perfetto.dev: one "
        "process per rank,\n"
        "compute and comm lanes; the all_reduce spans sit under the bwd spans)\n",
        o.trace);
  } else {
    fmt::print("no trace written: the bucketed step is not implemented yet\n");
  }
}

void run(const Options& o) {
  if (o.ranks < 1 || o.steps < 1)
    throw std::invalid_argument("--ranks and --steps must be at least 1");
  Checks checks(
      "ring all-reduce bytes and messages equal the formulas, replicas bitwise identical after "
      "every run");
  const model::Model net(model_config(o));
  const Setup s = make_setup(o, net, checks);
  print_header(o, s);
  ring_all_reduce_section(o, s, checks);
  const std::vector<Phase> phases = training_steps_section(o, s, checks);
  print_losses(phases);
  checks.print_verdict();
  print_trace_note(o, phases);
}

}  // namespace

void add_11_2(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "11_2", "data parallelism: ring all-reduce, data-parallel steps, gradient buckets");
  sub->add_option("--ranks", opts->ranks, "data-parallel ranks (simulated GPUs)")
      ->capture_default_str();
  sub->add_option("--steps", opts->steps, "training steps per variant")->capture_default_str();
  sub->add_option("--trace", opts->trace, "write a Chrome trace of the bucketed run to this file");
  sub->add_option("--bucket-bytes", opts->bucket_bytes,
                  "gradient bucket size in bytes (default: a sixth of the gradients)");
  sub->add_option("--sequences-per-rank", opts->sequences_per_rank,
                  "sequences of each rank's slice")
      ->capture_default_str();
  sub->add_option("--layers", opts->layers, "residual blocks of the model")->capture_default_str();
  sub->add_option("--flops", opts->flops, "compute rate of a rank, FLOP/s")->capture_default_str();
  sub->add_option("--bandwidth", opts->bandwidth, "link bandwidth inside a node, bytes/s")
      ->capture_default_str();
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
