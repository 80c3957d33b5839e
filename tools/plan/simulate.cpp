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
  std::int64_t p = 1, v = 1, m = 1, dp = 1, cp = 1;
  double p2p_bytes = 0;
  double grad_bytes = 2, weight_bytes = 2;
  int zero_stage = 0;
  bool dp_overlap = false;
  std::vector<StageTime> stages;
};

// The message tag of micro-batch `mb` entering global chunk `g` (c p + stage), forward
// (activations) or backward (gradients).
int tag_of(const Shape& s, std::int64_t mb, std::int64_t g, bool forward) {
  return static_cast<int>((mb * s.p * s.v + g) * 2 + (forward ? 0 : 1));
}

// Ranks are numbered as the GPUs of their groups are, cp fastest, then stages, then replicas
// (tp is inside each rank), so a cp ring stays on one server when tp x cp GPUs fit in one.
struct Place {
  std::int64_t cp = 0, stage = 0, replica = 0;
};

Place place_of(const Shape& s, int id) { return {id % s.cp, id / s.cp % s.p, id / (s.cp * s.p)}; }

// One rank's step: the schedule's forwards and backwards of its stage, the sends between
// stages, ring attention's exchange inside each layer, and the data-parallel collectives where
// the step model prices them.
class StageRank {
 public:
  StageRank(Rank& r, const Shape& s)
      : r_(r),
        s_(s),
        at_(place_of(s, r.id())),
        st_(s.stages[static_cast<std::size_t>(at_.stage)]),
        pp_(r.world().split(static_cast<int>(at_.replica * s.cp + at_.cp),
                            static_cast<int>(at_.stage), "pp")),
        cp_(r.world().split(static_cast<int>(at_.replica * s.p + at_.stage),
                            static_cast<int>(at_.cp), "cp")),
        dp_(r.world().split(static_cast<int>(at_.stage),
                            static_cast<int>(at_.replica * s.cp + at_.cp), "dp")) {}

  void run() {
    const std::vector<Work> work = stage_schedule(at_.stage, s_.p, s_.v, s_.m);
    for (std::size_t i = 0; i < work.size(); ++i) {
      if (work[i].forward) {
        forward(work[i]);
      } else {
        if (s_.dp_overlap && s_.zero_stage == 0 && i + 1 == work.size()) post_dp();
        backward(work[i]);
      }
    }
    r_.checkpoint("pipeline");
    wait_pending();  // ZeRO 2's overlapped reduce-scatters: the update needs their shards
    if (!(s_.dp_overlap && s_.zero_stage == 0)) post_dp();
    dp_request_.wait();
    r_.compute_seconds(st_.optimizer, "optimizer");
  }

 private:
  bool sharded() const { return s_.dp * s_.cp > 1; }  // the weights' holders form a group
  // A stage's layers over its v chunks, as the step model divides them: a stage of 7 layers in 2
  // chunks (Llama 3's end stages) runs 3.5 in each.
  double layers_per_chunk() const {
    return static_cast<double>(st_.layers) / static_cast<double>(s_.v);
  }
  // ZeRO 3 gathers and reduce-scatters layer by layer, and ring attention exchanges blocks
  // inside every layer; otherwise a chunk's layers run as one span.
  bool per_layer() const { return s_.cp > 1 || (s_.zero_stage == 3 && sharded()); }
  // One layer's share of the stage's parameters, the unit of ZeRO 3's collectives, in bytes
  // of the whole buffer (the runtime's S): the step model's P / layers.
  double layer_bytes(double bytes_per_param) const {
    return st_.params * bytes_per_param /
           static_cast<double>(std::max<std::int64_t>(1, st_.layers));
  }

  // The step's collectives of the parameters after the schedule (ZeRO 2 and 3's per-micro-batch
  // ones run inside it): stage 0 all-reduces the gradients; stage 1 reduce-scatters them, the
  // optimizer updates the shard and the weights are gathered; stage 2 gathers the weights only.
  void post_dp() {
    if (!sharded()) return;
    const double grads = st_.params * s_.grad_bytes, weights = st_.params * s_.weight_bytes;
    switch (s_.zero_stage) {
      case 0:
        dp_request_ = dp_.icollective_timing(OpKind::all_reduce, grads);
        break;
      case 1:
        dp_.icollective_timing(OpKind::reduce_scatter, grads).wait();
        dp_request_ = dp_.icollective_timing(OpKind::all_gather, weights);
        break;
      case 2:
        dp_request_ = dp_.icollective_timing(OpKind::all_gather, weights);
        break;
      default:
        break;
    }
  }

  // A data-parallel collective inside the schedule: waited for at once, or, with dp_overlap,
  // left to run behind the compute.
  void inside(OpKind kind, double bytes) {
    Request q = dp_.icollective_timing(kind, bytes);
    if (s_.dp_overlap)
      pending_.push_back(std::move(q));
    else
      q.wait();
  }

  void wait_pending() {
    for (Request& q : pending_) q.wait();
    pending_.clear();
  }

  // Ring attention's steps of one layer: each sends this rank's block to the next rank of the
  // cp ring and takes the previous rank's while the block it holds is computed, for `layers`
  // layers' worth (1 but in a chunk of a fractional number of layers); returns the compute the
  // steps covered.
  double ring(const std::vector<RingStep>& steps, double layers, const std::string& what) {
    const int next = static_cast<int>((at_.cp + 1) % s_.cp);
    const int prev = static_cast<int>((at_.cp + s_.cp - 1) % s_.cp);
    double blocks = 0;
    for (const RingStep& step : steps) {
      Request send = cp_.isend_timing(layers * step.bytes, next), recv = cp_.irecv_timing(prev);
      r_.compute_seconds(layers * step.block_seconds, "ring " + what);
      send.wait();
      recv.wait();
      blocks += layers * step.block_seconds;
    }
    return blocks;
  }

  // The chunk's layers, one pass: `layer_seconds` of compute each (ring blocks included) and
  // `tp_seconds` of exposed tensor-parallel collectives. ZeRO 3 gathers each layer's weights
  // before it (with dp_overlap all of the chunk's at its start, so they run ahead of the
  // compute) and, backward, reduce-scatters its gradients after it.
  void pass(bool forward, double layer_seconds, double tp_seconds,
            const std::vector<RingStep>& steps, const std::string& what) {
    const bool zero3 = s_.zero_stage == 3 && sharded();
    const double n = layers_per_chunk();
    const std::int64_t pieces = per_layer() ? static_cast<std::int64_t>(std::ceil(n)) : 1;
    const double layers = pieces > 0 ? n / static_cast<double>(pieces) : 0;  // in each piece
    const double gather = layers * layer_bytes(s_.weight_bytes);
    std::vector<Request> gathers;
    if (zero3 && s_.dp_overlap)
      for (std::int64_t k = 0; k < pieces; ++k)
        gathers.push_back(dp_.icollective_timing(OpKind::all_gather, gather));
    for (std::int64_t k = 0; k < pieces; ++k) {
      if (zero3) {
        if (s_.dp_overlap)
          gathers[static_cast<std::size_t>(k)].wait();
        else
          dp_.icollective_timing(OpKind::all_gather, gather).wait();
      }
      const double blocks = ring(steps, layers, what);
      r_.compute_seconds(layers * layer_seconds - blocks, (forward ? "fwd " : "bwd ") + what);
      if (tp_seconds > 0)
        r_.compute_seconds(layers * tp_seconds, (forward ? "tp fwd " : "tp bwd ") + what);
      if (zero3 && !forward) inside(OpKind::reduce_scatter, layers * layer_bytes(s_.grad_bytes));
    }
    if (zero3 && !forward) wait_pending();  // the pass ends with its gradients reduced
  }

  void forward(const Work& w) {
    const std::int64_t g = w.chunk * s_.p + at_.stage;
    const std::string what = fmt::format("mb {} chunk {}", w.micro_batch, w.chunk);
    if (g > 0)
      pp_.irecv_timing(static_cast<int>((g - 1) % s_.p), tag_of(s_, w.micro_batch, g, true)).wait();
    pass(true, st_.layer_forward, st_.layer_forward_tp, st_.ring_forward, what);
    if (has_logits(w)) r_.compute_seconds(st_.logits_forward, "logits fwd " + what);
    // A send blocks until it has left, as Megatron-LM's schedules wait on each batched send and
    // receive before computing on: the published runs expose their sends.
    if (g + 1 < s_.p * s_.v)
      pp_.isend_timing(s_.p2p_bytes, static_cast<int>((g + 1) % s_.p),
                       tag_of(s_, w.micro_batch, g + 1, true))
          .wait();
  }

  void backward(const Work& w) {
    const std::int64_t g = w.chunk * s_.p + at_.stage;
    const std::string what = fmt::format("mb {} chunk {}", w.micro_batch, w.chunk);
    if (g + 1 < s_.p * s_.v)
      pp_.irecv_timing(static_cast<int>((g + 1) % s_.p), tag_of(s_, w.micro_batch, g, false))
          .wait();
    if (has_logits(w)) r_.compute_seconds(st_.logits_backward, "logits bwd " + what);
    pass(false, st_.layer_backward, st_.layer_backward_tp, st_.ring_backward, what);
    if (g > 0)
      pp_.isend_timing(s_.p2p_bytes, static_cast<int>((g - 1) % s_.p),
                       tag_of(s_, w.micro_batch, g - 1, false))
          .wait();
    // ZeRO 2 keeps only its shard of the gradients, so each micro-batch reduce-scatters the
    // stage's, chunk by chunk as each chunk's backward finishes them (as implementations reduce
    // gradient buckets once they are ready): a pipeline send then waits on the network lane
    // behind one chunk's collective at most, not the whole stage's.
    if (s_.zero_stage == 2 && sharded())
      inside(OpKind::reduce_scatter, st_.params * s_.grad_bytes / static_cast<double>(s_.v));
  }

  bool has_logits(const Work& w) const { return at_.stage + 1 == s_.p && w.chunk + 1 == s_.v; }

  Rank& r_;
  const Shape& s_;
  const Place at_;
  const StageTime& st_;
  Comm pp_, cp_, dp_;
  Request dp_request_;
  std::vector<Request> pending_;  // collectives left to run behind the compute (dp_overlap)
};

}  // namespace

Hardware without_communication(Hardware hw) {
  hw.nvlink_latency_s = 0;
  hw.network_latency_s = 0;
  hw.nvlink_bytes_per_s = std::numeric_limits<double>::infinity();
  hw.network_bytes_per_s = std::numeric_limits<double>::infinity();
  return hw;
}

namespace {

// What the simulation cannot run, refused before any thread starts: step_time() has checked
// the layout itself.
void require_simulatable(const RunLayout& l) {
  if (l.cp * l.pp * l.dp > 4096)  // one host thread each
    throw UsageError(fmt::format(
        "--simulate runs one thread per cp rank, stage and replica: cp x pp x dp = {} is more "
        "than 4096",
        l.cp * l.pp * l.dp));
}

// A rank stands for the tp GPUs of its group, so a server holds gpus_per_server / tp of them;
// ranks are numbered as place_of reads them, so a replica's cp ranks and then its stages are
// neighbours, as on the real cluster where the ring and the pipeline's sends stay inside a
// server when they can.
ClusterConfig cluster_config(const RunLayout& l, const Hardware& hw) {
  ClusterConfig c;
  c.world_size = static_cast<int>(l.cp * l.pp * l.dp);
  c.gpus_per_node = static_cast<int>(std::max<std::int64_t>(1, hw.gpus_per_server / l.tp));
  c.intra_node_bytes_per_second = hw.nvlink_bytes_per_s * hw.nvlink_efficiency;
  c.inter_node_bytes_per_second = hw.network_bytes_per_s * hw.network_efficiency;
  c.intra_node_latency_seconds = hw.nvlink_latency_s;
  c.inter_node_latency_seconds = hw.network_latency_s;
  c.ring_per_nic = true;  // as the step model prices data-parallel collectives across servers
  c.isolation = RankIsolation::threads;
  return c;
}

// The step's end (the last rank to finish), the pipeline's, and the last rank's compute lane
// split into waiting, optimizer, exposed tp and compute.
void read_reports(const Cluster& cluster, const Shape& s, SimulatedStep& out) {
  const auto sent = [](const RankReport& rep, const char* group) {
    return static_cast<double>(rep.traffic.group(group).bytes_sent);
  };
  for (const RankReport& rep : cluster.reports()) {
    if (rep.clock.end_time() > out.seconds) {
      out.seconds = rep.clock.end_time();
      out.last_rank = rep.rank;
    }
    out.pipeline = std::max(out.pipeline, rep.checkpoints.at("pipeline").now);
    out.pp_bytes = std::max(out.pp_bytes, sent(rep, "pp"));
    out.cp_bytes = std::max(out.cp_bytes, sent(rep, "cp"));
    out.dp_bytes = std::max(out.dp_bytes, sent(rep, "dp"));
  }
  out.last_stage = static_cast<int>(place_of(s, out.last_rank).stage);
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
                .cp = l.cp,
                .p2p_bytes = out.analytic.p2p_bytes,
                .grad_bytes = l.grad_bytes,
                .weight_bytes = l.weight_bytes,
                .zero_stage = l.zero_stage,
                .dp_overlap = l.dp_overlap,
                .stages = out.analytic.stages};
  require_simulatable(l);
  const ClusterConfig c = cluster_config(l, hw);
  Cluster cluster(c);
  const auto wall = std::chrono::steady_clock::now();
  cluster.run([&](Rank& r) { StageRank(r, s).run(); });
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  out.ranks = c.world_size;
  read_reports(cluster, s, out);
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
  out += fmt::format("  on rank {} (stage {}), the last to finish:\n", s.last_rank, s.last_stage);
  const auto line = [&](const char* what, double seconds, const char* how) {
    out += fmt::format("  {:<22}{:>10.3f} s {:>5.1f}%  {}\n", what, seconds,
                       100 * seconds / s.seconds, how);
  };
  line("compute", s.compute, "its layers' forwards and backwards");
  line("exposed tp", s.exposed_tp, "tensor-parallel collectives, charged in place");
  line("waiting", s.waiting,
       "fill and drain of the schedule, sends, ring attention, data-parallel collectives");
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
