// `mgpu demo 11_2`: the chapter's ring all-reduce and data-parallel steps on N simulated ranks,
// with bytes, messages and virtual time printed beside the 11.2 formulas, and a Chrome trace
// in which the bucketed all-reduces visibly run under the backward pass.
#include "common.hpp"
#include "demo.hpp"

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

void run(const Options& o) {
  if (o.ranks < 1 || o.steps < 1)
    throw std::invalid_argument("--ranks and --steps must be at least 1");
  model::ModelConfig cfg;
  cfg.d_in = 6;
  cfg.d_model = 32;
  cfg.d_ff = 128;
  cfg.n_layers = o.layers;
  cfg.n_heads = 2;
  cfg.seq_len = 4;
  cfg.d_out = 3;
  const model::Model net(cfg);
  const double grad_bytes = static_cast<double>(net.num_params() * sizeof(float));
  const std::size_t bucket_bytes = o.bucket_bytes.value_or(net.num_params() * sizeof(float) / 6);
  const std::vector<dp::Bucket> buckets = [&] {
    try {
      return dp::plan_buckets(net, bucket_bytes);
    } catch (const NotImplemented&) {
      return std::vector<dp::Bucket>{};
    }
  }();

  const ClusterConfig cc = slow_cluster(o.ranks, o.flops, o.bandwidth);
  const bool one_node = o.ranks <= cc.gpus_per_node;
  const dp::LinkModel link{
      one_node ? cc.intra_node_latency_seconds : cc.inter_node_latency_seconds,
      one_node ? cc.intra_node_bytes_per_second : cc.inter_node_bytes_per_second};
  const std::int64_t sequences = o.sequences_per_rank * o.ranks;

  fmt::print("11.2 data parallelism on {} simulated ranks ({})\n", o.ranks,
             one_node ? "one node" : "several nodes");
  fmt::print(
      "code: {}\n",
      reference_build()
          ? "the reference solutions (solutions/11_2_data_parallel); add --student to run yours"
          : "your chapters/11_2_data_parallel (the student build)");
  fmt::print("model: {} blocks, d_model {}, d_ff {}: {} parameters, {} of fp32 gradients\n",
             cfg.n_layers, cfg.d_model, cfg.d_ff, net.num_params(), human_bytes(grad_bytes));
  fmt::print(
      "batch: {} sequences of {} tokens per step, {} per rank; cost model: {:.3g} FLOP/s per rank, "
      "links {:.3g} B/s with {:.0f} us latency\n",
      sequences, cfg.seq_len, o.sequences_per_rank, cc.flops_per_second,
      link.bandwidth_bytes_per_second, link.latency_seconds * 1e6);
  fmt::print(
      "(a slow GPU for a small model, so compute and communication take comparable time, as in "
      "real runs)\n\n");

  // ---------------------------------------------------------------- one ring all-reduce
  fmt::print("Ring all-reduce of one gradient-sized buffer ({} ring_all_reduce, TODO 6)\n",
             whose());
  {
    Cluster cluster(cc);
    std::string error;
    try {
      cluster.run([&](Rank& r) {
        Buffer<float> data(r.memory(), Category::grads, net.num_params(), "grads");
        std::fill(data.begin(), data.end(), 1.0f);
        dp::ring_all_reduce(r.world(), data.span(), r.memory());
      });
    } catch (const NotImplemented& e) {
      error = e.what();
    }
    if (!error.empty()) {
      fmt::print("  {}\n\n", error);
    } else {
      double bytes = 0, messages = 0, seconds = 0;
      for (const RankReport& rep : cluster.reports()) {
        bytes += static_cast<double>(rep.traffic.op(OpKind::send).bytes_sent) / o.ranks;
        messages += static_cast<double>(rep.traffic.op(OpKind::send).messages_sent) / o.ranks;
        seconds = std::max(seconds, rep.clock.end_time());
      }
      fmt::print("  {:<26}{:>16}{:>16}\n", "", "measured", "predicted");
      fmt::print(
          "  {:<26}{:>16.1f}{:>16}   2(N-1)/N x {:.0f}\n", "bytes sent per rank (mean)", bytes,
          predict([&] { return dp::ring_all_reduce_bytes_per_rank(o.ranks, grad_bytes); }, plain),
          grad_bytes);
      fmt::print(
          "  {:<26}{:>16.0f}{:>16}   2(N-1)\n", "messages per rank", messages,
          predict(
              [&] { return static_cast<double>(dp::ring_all_reduce_messages_per_rank(o.ranks)); },
              [](double m) { return fmt::format("{:.0f}", m); }));
      fmt::print(
          "  {:<26}{:>16}{:>16}   2(N-1)(latency + S/(N bandwidth))\n\n", "time", us(seconds),
          predict([&] { return dp::ring_all_reduce_seconds(o.ranks, grad_bytes, link); }, us));
    }
  }

  // ---------------------------------------------------------------- training steps
  // One run holds every phase back to back, so the trace shows them side by side in time.
  struct Variant {
    std::string name;
    std::function<double(Rank&, model::Replica&, model::Adam&, const model::Batch&)> step;
  };
  const std::vector<Variant> variants = {
      {"one all_reduce after backward",
       [&](Rank& r, model::Replica& rep, model::Adam& adam, const model::Batch& b) {
         return dp::data_parallel_step(r, r.world(), net, rep, adam, b, dp::GradAverager::runtime);
       }},
      {whose() + " ring after backward",
       [&](Rank& r, model::Replica& rep, model::Adam& adam, const model::Batch& b) {
         return dp::data_parallel_step(r, r.world(), net, rep, adam, b, dp::GradAverager::ring);
       }},
      {buckets.empty() ? std::string("buckets during backward")
                       : fmt::format("{} buckets during backward", buckets.size()),
       [&](Rank& r, model::Replica& rep, model::Adam& adam, const model::Batch& b) {
         return dp::data_parallel_step_overlapped(r, r.world(), net, rep, adam, b, buckets);
       }},
  };
  std::vector<Phase> phases;
  bool identical = true;
  for (const Variant& v : variants) {
    Cluster cluster(cc);
    std::vector<Slot> slots(static_cast<std::size_t>(o.ranks));
    std::vector<double> losses;
    std::vector<std::vector<float>> params(static_cast<std::size_t>(o.ranks));
    Phase phase;
    try {
      cluster.run([&](Rank& r) {
        model::Replica rep = net.make_replica(r.memory(), 1);
        model::Adam adam(r.memory(), net.num_params());
        Slot& s = slots[static_cast<std::size_t>(r.id())];
        s.t0 = r.now();
        s.compute0 = r.clock().compute_time();
        s.comm0 = r.clock().comm_time();
        s.before = r.traffic().total();
        for (int step = 0; step < o.steps; ++step) {
          const double loss = v.step(
              r, rep, adam, net.make_batch(sequences, 100 + static_cast<std::uint64_t>(step)));
          if (r.id() == 0) losses.push_back(loss);
        }
        // Wait for anything still on the comm stream, so the step time counts it.
        r.clock().wait_until(r.clock().end_time(), "drain");
        s.t1 = r.now();
        s.compute1 = r.clock().compute_time();
        s.comm1 = r.clock().comm_time();
        s.after = r.traffic().total();
        params[static_cast<std::size_t>(r.id())].assign(rep.params.begin(), rep.params.end());
      });
      phase = summarise(v.name, slots, cluster.reports(), o.steps);
      phase.losses = losses;
      for (const auto& p : params)
        identical = identical && std::memcmp(p.data(), params[0].data(), p.size() * 4) == 0;
      if (&v == &variants.back() && !o.trace.empty()) cluster.write_chrome_trace(o.trace);
    } catch (const NotImplemented& e) {
      phase.name = v.name;
      phase.error = e.what();
    }
    phases.push_back(phase);
  }

  const double fwd = net.forward_flops(o.sequences_per_rank * cfg.seq_len) / cc.flops_per_second;
  fmt::print("Data-parallel training steps (TODOs 7-10), mean per step and rank over {} steps\n",
             o.steps);
  fmt::print("  {:<32}{:>12}{:>12}{:>12}{:>12}{:>14}{:>10}\n", "", "step time", "compute",
             "comm busy", "overlap", "bytes sent", "messages");
  for (const Phase& p : phases) {
    if (!p.error.empty()) {
      fmt::print("  {:<32}{}\n", p.name, p.error);
      continue;
    }
    fmt::print("  {:<32}{:>12}{:>12}{:>12}{:>12}{:>14.1f}{:>10.1f}\n", p.name, us(p.step_seconds),
               us(p.compute_seconds), us(p.comm_seconds), us(p.overlap_seconds), p.bytes_sent,
               p.messages);
  }
  const auto comm = [&] { return dp::ring_all_reduce_seconds(o.ranks, grad_bytes, link); };
  fmt::print("  {:<32}{:>12}{:>12}{:>12}{:>12}{:>14}{:>10}\n", "predicted, no overlap",
             predict([&] { return 3 * fwd + comm(); }, us), us(3 * fwd), predict(comm, us), us(0),
             predict(
                 [&] {
                   return dp::gradient_all_reduce_bytes_per_rank(
                       o.ranks, static_cast<double>(net.num_params()), 4);
                 },
                 plain),
             2 * (o.ranks - 1));
  fmt::print("  {:<32}{:>12}   forward + max(backward, all-reduce): the most buckets can save\n",
             "predicted, ideal overlap",
             predict([&] { return fwd + std::max(2 * fwd, comm()); }, us));
  if (!phases.front().losses.empty()) {
    fmt::print("\nloss of rank 0's slice per step:");
    for (double l : phases.front().losses) fmt::print(" {:.4f}", l);
    fmt::print("\n");
  }
  const bool any_ran =
      std::any_of(phases.begin(), phases.end(), [](const Phase& p) { return p.error.empty(); });
  if (any_ran)
    fmt::print("replicas bitwise identical after every run: {}\n", identical ? "yes" : "NO");
  if (!o.trace.empty()) {
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
