// One training step on the simulated cluster: the schedule's order of forwards and backwards per
// stage, the step model's seconds for each, and timing-only sends and collectives between the
// rank threads. What the timeline shows is the schedule's: nothing here adds a bubble.
#include "plan/simulate.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "mgpu/cluster.hpp"
#include "plan/reproduce.hpp"

namespace mgpu::planner {

namespace {

/// One forward or backward of one micro-batch through one model chunk of a stage.
struct Work {
  bool forward = true;
  std::int64_t micro_batch = 0;
  std::int64_t chunk = 0;  ///< 0..v-1, the stage's model chunk
};

/// The order a stage runs its work in: 1F1B (v = 1) or the interleaved 1F1B of Narayanan et al.
/// 2021 (v > 1), as Megatron-LM schedules it: a warm-up of forwards, then one forward and one
/// backward in turn, then the remaining backwards. The k-th forward of a stage is micro-batch
/// (k / (p v)) p + k mod p on chunk (k / p) mod v; backwards walk the chunks in reverse.
std::vector<Work> stage_schedule(std::int64_t stage, std::int64_t p, std::int64_t v,
                                 std::int64_t m) {
  const std::int64_t total = m * v;
  const std::int64_t warmup =
      v == 1 ? std::min(p - stage - 1, m) : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  const auto micro_batch = [&](std::int64_t k) { return (k / (p * v)) * p + k % p; };
  const auto forward = [&](std::int64_t k) { return Work{true, micro_batch(k), (k / p) % v}; };
  const auto backward = [&](std::int64_t k) {
    return Work{false, micro_batch(k), v - 1 - (k / p) % v};
  };
  std::vector<Work> out;
  out.reserve(static_cast<std::size_t>(2 * total));
  for (std::int64_t k = 0; k < warmup; ++k) out.push_back(forward(k));
  for (std::int64_t k = 0; k < total - warmup; ++k) {
    out.push_back(forward(warmup + k));
    out.push_back(backward(k));
  }
  for (std::int64_t k = total - warmup; k < total; ++k) out.push_back(backward(k));
  return out;
}

struct Shape {
  std::int64_t p = 1, v = 1, m = 1, dp = 1;
  double p2p_bytes = 0;
  double grad_bytes = 2;
  int zero_stage = 0;
  bool dp_overlap = false;
  std::vector<StageTime> stages;
};

// The message tag of micro-batch `mb` entering global chunk `g` (c p + stage), forward
// (activations) or backward (gradients).
int tag_of(const Shape& s, std::int64_t mb, std::int64_t g, bool forward) {
  return static_cast<int>((mb * s.p * s.v + g) * 2 + (forward ? 0 : 1));
}

void run_rank(Rank& r, const Shape& s) {
  const std::int64_t stage = r.id() % s.p, replica = r.id() / s.p;
  const std::int64_t chunks = s.p * s.v;  // model chunks of the whole pipeline
  const StageTime& st = s.stages[static_cast<std::size_t>(stage)];
  const double n = static_cast<double>(st.layers / s.v);  // layers per chunk
  const bool last_stage = stage + 1 == s.p;
  const auto rank_of = [&](std::int64_t g) { return static_cast<int>(replica * s.p + g % s.p); };
  Comm& world = r.world();
  Comm dp = world.split(static_cast<int>(stage), static_cast<int>(replica), "dp");

  // A send blocks until it has left, as Megatron-LM's schedules wait on each batched send and
  // receive before computing on: the published runs expose their sends.
  const std::vector<Work> work = stage_schedule(stage, s.p, s.v, s.m);
  Request dp_request;
  const auto post_dp = [&] {
    if (s.dp == 1) return;
    const double grads = st.params * s.grad_bytes;
    if (s.zero_stage == 0) {
      dp_request = dp.icollective_timing(OpKind::all_reduce, grads);
    } else {  // ZeRO 1: gradient shards, the optimizer on them, then the weights gathered
      dp.icollective_timing(OpKind::reduce_scatter, grads).wait();
      dp_request = dp.icollective_timing(OpKind::all_gather, st.params * 2);
    }
  };
  for (std::size_t i = 0; i < work.size(); ++i) {
    const Work& w = work[i];
    const std::int64_t g = w.chunk * s.p + stage;
    const bool has_logits = last_stage && w.chunk + 1 == s.v;
    const std::string what = fmt::format("mb {} chunk {}", w.micro_batch, w.chunk);
    if (w.forward) {
      if (g > 0) world.irecv_timing(rank_of(g - 1), tag_of(s, w.micro_batch, g, true)).wait();
      r.compute_seconds(n * st.layer_forward + (has_logits ? st.logits_forward : 0), "fwd " + what);
      if (st.layer_forward_tp > 0) r.compute_seconds(n * st.layer_forward_tp, "tp fwd " + what);
      if (g + 1 < chunks)
        world.isend_timing(s.p2p_bytes, rank_of(g + 1), tag_of(s, w.micro_batch, g + 1, true))
            .wait();
    } else {
      if (g + 1 < chunks)
        world.irecv_timing(rank_of(g + 1), tag_of(s, w.micro_batch, g, false)).wait();
      if (s.dp_overlap && s.zero_stage == 0 && i + 1 == work.size()) post_dp();
      r.compute_seconds(n * st.layer_backward + (has_logits ? st.logits_backward : 0),
                        "bwd " + what);
      if (st.layer_backward_tp > 0) r.compute_seconds(n * st.layer_backward_tp, "tp bwd " + what);
      if (g > 0)
        world.isend_timing(s.p2p_bytes, rank_of(g - 1), tag_of(s, w.micro_batch, g - 1, false))
            .wait();
    }
  }
  r.checkpoint("pipeline");
  if (!(s.dp_overlap && s.zero_stage == 0)) post_dp();
  dp_request.wait();
  r.compute_seconds(st.optimizer, "optimizer");
}

}  // namespace

Hardware without_communication(Hardware hw) {
  hw.nvlink_latency_s = 0;
  hw.network_latency_s = 0;
  hw.nvlink_bytes_per_s = std::numeric_limits<double>::infinity();
  hw.network_bytes_per_s = std::numeric_limits<double>::infinity();
  return hw;
}

namespace {

// What the simulation cannot schedule (yet), refused before any thread starts.
void require_simulatable(const RunLayout& l, const Shape& s) {
  if (l.cp > 1)
    throw UsageError(
        "--simulate runs one rank thread per stage and replica; context parallelism's ring is "
        "not scheduled on it yet: drop --simulate to see the model's step with --cp, or drop --cp");
  if (l.zero_stage >= 2)
    throw UsageError(
        "--simulate runs ZeRO 0 and 1; stages 2 and 3 repeat their collectives inside every "
        "micro-batch, which the simulation does not schedule yet");
  if (s.v > 1) {
    if (s.m % s.p != 0)
      throw UsageError(fmt::format(
          "--simulate: the interleaved schedule needs micro-batches m = {} to be a multiple of "
          "pp {}",
          s.m, s.p));
    for (const StageTime& st : s.stages)
      if (st.layers % s.v != 0)
        throw UsageError(
            fmt::format("--simulate: a stage of {} layers does not split into interleave {} chunks",
                        st.layers, s.v));
  }
  if (l.pp * l.dp > 4096)  // one host thread each
    throw UsageError(fmt::format(
        "--simulate runs one thread per stage and replica: pp x dp = {} is more than 4096",
        l.pp * l.dp));
}

// A rank stands for the tp GPUs of its group, so a server holds gpus_per_server / tp of them;
// ranks are numbered replica-major, so a replica's stages are neighbours, as on the real
// cluster where the pipeline's sends stay inside a server when they can.
ClusterConfig cluster_config(const RunLayout& l, const Hardware& hw) {
  ClusterConfig c;
  c.world_size = static_cast<int>(l.pp * l.dp);
  c.gpus_per_node = static_cast<int>(std::max<std::int64_t>(1, hw.gpus_per_server / l.tp));
  c.intra_node_bytes_per_second = hw.nvlink_bytes_per_s * hw.nvlink_efficiency;
  c.inter_node_bytes_per_second = hw.network_bytes_per_s * hw.network_efficiency;
  c.intra_node_latency_seconds = hw.nvlink_latency_s;
  c.inter_node_latency_seconds = hw.network_latency_s;
  c.isolation = RankIsolation::threads;
  return c;
}

// The step's end (the last rank to finish), the pipeline's, and the last rank's compute lane
// split into waiting, optimizer, exposed tp and compute.
void read_reports(const Cluster& cluster, SimulatedStep& out) {
  for (const RankReport& rep : cluster.reports()) {
    if (rep.clock.end_time() > out.seconds) {
      out.seconds = rep.clock.end_time();
      out.last_rank = rep.rank;
    }
    out.pipeline = std::max(out.pipeline, rep.checkpoints.at("pipeline").now);
  }
  const RankReport& last = cluster.report(out.last_rank);
  for (const Span& sp : last.clock.timeline()) {
    if (sp.stream != Stream::compute) continue;
    if (sp.kind == SpanKind::idle)
      out.waiting += sp.duration();
    else if (sp.label == "optimizer")
      out.optimizer += sp.duration();
    else if (sp.label.rfind("tp ", 0) == 0)
      out.exposed_tp += sp.duration();
    else
      out.compute += sp.duration();
  }
}

}  // namespace

SimulatedStep simulate_step(const RunModel& model, const RunLayout& layout, const Hardware& hw,
                            const SimulateOptions& options) {
  SimulatedStep out;
  out.analytic = step_time(model, layout, hw);  // validates the run
  const RunLayout& l = layout;
  const Shape s{.p = l.pp,
                .v = l.interleave,
                .m = out.analytic.micro_batches,
                .dp = l.dp,
                .p2p_bytes = out.analytic.p2p_bytes,
                .grad_bytes = l.grad_bytes,
                .zero_stage = l.zero_stage,
                .dp_overlap = l.dp_overlap,
                .stages = out.analytic.stages};
  require_simulatable(l, s);
  const ClusterConfig c = cluster_config(l, hw);
  Cluster cluster(c);
  const auto wall = std::chrono::steady_clock::now();
  cluster.run([&](Rank& r) { run_rank(r, s); });
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  out.ranks = c.world_size;
  read_reports(cluster, out);
  if (!options.trace_path.empty()) cluster.write_chrome_trace(options.trace_path);
  return out;
}

std::string simulate_text(const SimulatedStep& s) {
  const StepTime& a = s.analytic;
  std::string out = fmt::format(
      "\nThe same step on the simulated cluster ({} rank threads, one per stage and replica; "
      "{:.1f} s on this machine):\n",
      s.ranks, s.wall_seconds);
  out += fmt::format("  {:<22}{:>10.3f} s   analytic {:.3f} s, {:+.2f}%\n", "seconds per step",
                     s.seconds, a.seconds, 100 * (s.seconds / a.seconds - 1));
  out += fmt::format("  on rank {} (stage {}), the last to finish:\n", s.last_rank,
                     s.last_rank % static_cast<int>(a.stages.size()));
  const auto line = [&](const char* what, double seconds, const char* how) {
    out += fmt::format("  {:<22}{:>10.3f} s {:>5.1f}%  {}\n", what, seconds,
                       100 * seconds / s.seconds, how);
  };
  line("compute", s.compute, "its layers' forwards and backwards");
  line("exposed tp", s.exposed_tp, "tensor-parallel collectives, charged in place");
  line("waiting", s.waiting, "fill and drain of the schedule, sends, data-parallel collectives");
  line("optimizer", s.optimizer, "Adam on its parameters");
  return out;
}

int run_simulate_reproduce_cli(const std::vector<std::string>& args, std::ostream& out,
                               std::ostream& err) {
  std::string only, path = default_anchors_path();
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--reproduce" || args[i] == "--simulate") continue;
    if (args[i] == "--only" && i + 1 < args.size()) {
      only = args[++i];
    } else if (!args[i].empty() && args[i][0] != '-') {
      path = args[i];
    } else {
      err << "mgpu plan --reproduce --simulate [--only TEXT] [FILE]: unknown argument '" << args[i]
          << "'\n";
      return 2;
    }
  }
  try {
    std::map<std::string, Hardware> presets;
    out << fmt::format("{:<30} {:>7} {:>11} {:>11} {:>7} {:>8}\n", "run", "ranks", "analytic",
                       "simulated", "diff", "host");
    for (const Anchor& a : load_anchors(path)) {
      if (a.measure == "layer_forward_ms" || a.measure == "layer_backward_ms") continue;
      if (!only.empty() && a.name.find(only) == std::string::npos) continue;
      if (!presets.count(a.hardware)) presets.emplace(a.hardware, load_hardware(a.hardware));
      SimulatedStep s;
      try {
        s = simulate_step(a.model, a.layout, presets.at(a.hardware));
      } catch (const UsageError& e) {
        // A row the simulation cannot schedule (context parallelism, ZeRO 2 and 3) is named
        // with the reason; the others still run.
        out << fmt::format("{:<30} not simulated: {}\n", a.name, e.what());
        continue;
      }
      out << fmt::format("{:<30} {:>7} {:>9.3f} s {:>9.3f} s {:>+6.2f}% {:>6.1f} s\n", a.name,
                         s.ranks, s.analytic.seconds, s.seconds,
                         100 * (s.seconds / s.analytic.seconds - 1), s.wall_seconds);
      out.flush();
    }
    return 0;
  } catch (const std::exception& e) {
    err << "mgpu plan --reproduce --simulate: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mgpu::planner
