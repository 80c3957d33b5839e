// `mgpu demo 11_7`: the chapter's 3D-parallel training step (tensor x pipeline x data, ZeRO-1)
// on every rank of a simulated cluster, up to the text's 8 x 4 x 32 = 1,024 GPUs, with the
// memory and bytes each GPU measured printed beside per_gpu_memory and per_gpu_traffic; then
// the same step with the tensor-parallel groups spread across nodes instead of kept inside one.
#include "common.hpp"
#include "demo.hpp"
#include "table.hpp"

#include "11_7_3d_and_experts/formulas.hpp"
#include "11_7_3d_and_experts/share.hpp"
#include "11_7_3d_and_experts/step3d.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/not_implemented.hpp"

#include <fmt/core.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mgpu::demo {

namespace {

namespace lay = mgpu::layout;

struct Options {
  std::int64_t tp = 8, pp = 4, dp = 32;
  int micro_batches = 8;
  std::int64_t layers = 4;
  int steps = 1;
  int gpus_per_node = 8;
  double flops = 2e9;
  bool no_topology = false;
  std::string trace;
};

// More ranks than this is more threads than a laptop should be asked to start.
constexpr std::int64_t kMaxRanks = 4096;
constexpr std::uint64_t kSeed = 7;

std::string layout_name(const lay::Layout& l) {
  return fmt::format("tp {} x pp {} x dp {}", l.tp, l.pp, l.dp);
}

// The ranks the tables show: tp index 0 of replica 0 on the first, a middle and the last stage.
struct Shown {
  std::string name;
  lay::RankCoords coords;
};

std::vector<Shown> shown_ranks(const lay::Layout& l) {
  std::vector<Shown> out{{"first stage", {0, 0, 0}}};
  if (l.pp > 2) out.push_back({"middle stage", {0, 1, 0}});
  if (l.pp > 1) out.push_back({"last stage", {0, l.pp - 1, 0}});
  return out;
}

// The layout model of one rank's share, as the chapter's test builds it: the share padded to
// the ZeRO-1 flat is Psi', so Psi = Psi' * tp * pp, fp32 with Adam, ZeRO-1 over dp.
lay::LayoutModel layout_model(const model::ModelConfig& c, const lay::Layout& l,
                              const lay::Share& share, int micro_batches,
                              double activation_bytes_per_layer) {
  lay::LayoutModel lm;
  lm.params = static_cast<double>(share.padded) * static_cast<double>(l.tp * l.pp);
  lm.recipe = kFp32Adam;
  lm.layout = l;
  lm.zero_stage = 1;
  lm.shape = {c.seq_len, 1, c.d_model, c.n_heads, c.n_layers};
  lm.micro_batches = micro_batches;
  lm.activation_bytes_per_layer = activation_bytes_per_layer;
  lm.bytes_per_activation = 4;
  return lm;
}

// What the formula's pipeline term means for one stage: it is a middle stage's, and with more
// than two stages an end stage sends only one direction, half of it.
double pipeline_for(const lay::Layout& l, std::int64_t stage, double formula) {
  const bool end_stage = stage == 0 || stage == l.pp - 1;
  return l.pp > 2 && end_stage ? formula / 2 : formula;
}

// Where physical rank g sits when tensor parallelism is spread across nodes: numbered with dp
// fastest and tp slowest, so the tp partners of a rank are dp * pp ranks apart (other nodes)
// and a node holds consecutive replicas instead. Returns the rank the grid should see, numbered
// as rank_coordinates numbers them (tp fastest).
int across_key(std::int64_t g, const lay::Layout& l) {
  const std::int64_t d = g % l.dp, p = (g / l.dp) % l.pp, t = g / (l.dp * l.pp);
  return static_cast<int>(t + l.tp * (p + l.pp * d));
}

// The physical rank that the grid sees as coordinates c under each placement.
std::int64_t physical_rank(const lay::RankCoords& c, const lay::Layout& l, bool tp_across) {
  return tp_across ? c.dp + l.dp * (c.pp + l.pp * c.tp) : c.tp + l.tp * (c.pp + l.pp * c.dp);
}

// How many nodes the tp group (or the dp group) of rank (0, 0, 0) spans under a placement.
std::size_t group_nodes(const lay::Layout& l, int gpus_per_node, bool tp_across, bool dp_group) {
  std::set<std::int64_t> nodes;
  const std::int64_t size = dp_group ? l.dp : l.tp;
  for (std::int64_t i = 0; i < size; ++i) {
    const lay::RankCoords c = dp_group ? lay::RankCoords{0, 0, i} : lay::RankCoords{i, 0, 0};
    nodes.insert(physical_rank(c, l, tp_across) / gpus_per_node);
  }
  return nodes.size();
}

// What one rank recorded on its own thread.
struct Slot {
  lay::RankCoords coords;
  std::vector<std::optional<double>> losses;  // per step; set on the last stage
};

// What one run of the steps measured.
struct RunResult {
  std::string error;  // "not implemented: ..." when the chapter code is not written yet
  std::vector<Slot> slots;
  double step_seconds = 0;                 // latest end time over ranks, per step
  double compute = 0, idle = 0, comm = 0;  // means over ranks, per step
  double tp_all_reduce_seconds = 0;  // comm-stream time in tp all-reduces, mean per rank and step
  double dp_seconds = 0;             // comm-stream time in the dp reduce-scatter and all-gather
  std::vector<double> losses;        // mean over the replicas, per step
  double wall_seconds = 0;
};

RunResult run_steps(Cluster& cluster, const model::Model& net, const lay::Layout& l,
                    int micro_batches, const std::vector<model::Batch>& batches, bool tp_across) {
  RunResult res;
  res.slots.resize(static_cast<std::size_t>(cluster.world_size()));
  const auto start = std::chrono::steady_clock::now();
  try {
    cluster.run([&](Rank& r) {
      // The chapter numbers ranks tp fastest; building the grid on a renumbered world moves the
      // tp groups across nodes without touching the chapter.
      Comm world = tp_across ? r.world().split(0, across_key(r.id(), l), "world") : r.world();
      lay::ProcessGrid grid(world, l);
      lay::State3d state = lay::make_state_3d(r, grid, net, kSeed);
      Slot& slot = res.slots[static_cast<std::size_t>(r.id())];
      slot.coords = grid.coords();
      for (const model::Batch& b : batches)
        slot.losses.push_back(lay::train_step_3d(r, grid, net, state, b, micro_batches));
    });
  } catch (const NotImplemented& e) {
    res.error = e.what();
    return res;
  }
  res.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto steps = static_cast<double>(batches.size());
  const auto n = static_cast<double>(cluster.world_size());
  for (const RankReport& rep : cluster.reports()) {
    res.step_seconds = std::max(res.step_seconds, rep.clock.end_time() / steps);
    res.compute += rep.clock.compute_time() / n / steps;
    res.idle += rep.clock.idle_time() / n / steps;
    res.comm += rep.clock.comm_time() / n / steps;
    for (const Span& s : rep.clock.timeline()) {
      if (s.stream != Stream::comm) continue;
      if (s.label == "all_reduce tp") res.tp_all_reduce_seconds += s.duration() / n / steps;
      if (s.label == "reduce_scatter dp" || s.label == "all_gather dp")
        res.dp_seconds += s.duration() / n / steps;
    }
  }
  for (std::size_t step = 0; step < batches.size(); ++step) {
    double sum = 0;
    for (const Slot& s : res.slots)
      if (s.coords.tp == 0 && s.losses[step]) sum += *s.losses[step];
    res.losses.push_back(sum / static_cast<double>(l.dp));
  }
  return res;
}

// Bytes one block keeps for one micro-batch on one rank, measured: tp ranks run one block's
// forward and the ledger says what its cache holds. The skeleton's tp_block_forward throws, so
// then the count comes from the cache's shapes in step3d.hpp instead.
struct BlockBytes {
  double bytes = 0;
  bool measured = false;
};

BlockBytes block_cache_bytes(const model::Model& net, const lay::Layout& l,
                             const ClusterConfig& base) {
  const model::ModelConfig& c = net.config();
  const std::int64_t tokens = c.seq_len;  // one sequence per micro-batch
  ClusterConfig cc = base;
  cc.world_size = static_cast<int>(l.tp);
  Cluster cluster(cc);
  std::vector<double> bytes(static_cast<std::size_t>(l.tp));
  try {
    cluster.run([&](Rank& r) {
      const lay::Share share = lay::plan_share(net, {l.tp, 1, 1}, {r.id(), 0, 0});
      std::vector<float> full(net.num_params()), mine(share.padded);
      net.init_params(full, kSeed);
      lay::cut_share(net, share, {r.id(), 0, 0}, full, mine);
      Buffer<float> x(r.memory(), Category::activations,
                      static_cast<std::size_t>(tokens * c.d_model), "x");
      lay::BlockCache3d cache;
      const Buffer<float> y = lay::tp_block_forward(
          r, r.world(), net, 1, share.unit_view(std::span<const float>(mine), 1), std::move(x),
          tokens, cache);
      bytes[static_cast<std::size_t>(r.id())] =
          static_cast<double>(r.memory().current(Category::activations) - y.bytes());
    });
    return {bytes[0], true};
  } catch (const NotImplemented&) {
    const double n = static_cast<double>(tokens), d = static_cast<double>(c.d_model);
    const double t = static_cast<double>(l.tp), f = static_cast<double>(c.d_ff);
    const double probs = n / static_cast<double>(c.seq_len) * static_cast<double>(c.n_heads) / t *
                         static_cast<double>(c.seq_len * c.seq_len);
    // x and mid (n, d); q, k, v, o (n, d/t); the probabilities; h and a (n, f/t); all fp32.
    return {4 * (2 * n * d + 4 * n * d / t + probs + 2 * n * f / t), false};
  }
}

// The demo's own checks of the options, so that a bad layout is refused before 1,024 threads
// start. The chapter's layout_problem says it best; the skeleton's throws, so the essentials
// are checked here too.
void check_options(const Options& o, const model::Model& net) {
  for (auto [name, value] :
       {std::pair{"--tp", o.tp}, std::pair{"--pp", o.pp}, std::pair{"--dp", o.dp},
        std::pair{"--micro-batches", std::int64_t{o.micro_batches}},
        std::pair{"--layers", o.layers}, std::pair{"--steps", std::int64_t{o.steps}},
        std::pair{"--gpus-per-node", std::int64_t{o.gpus_per_node}}})
    if (value < 1)
      throw std::invalid_argument(
          fmt::format("11_7: {} = {} is below 1: use 1 or more", name, value));
  if (!(o.flops > 0))
    throw std::invalid_argument(fmt::format("11_7: --flops = {} must be positive", o.flops));
  const lay::Layout l{o.tp, o.pp, o.dp};
  // Each degree is at most kMaxRanks first, so that their product cannot overflow.
  const std::int64_t world =
      std::max({o.tp, o.pp, o.dp}) > kMaxRanks ? kMaxRanks + 1 : o.tp * o.pp * o.dp;
  if (world > kMaxRanks)
    throw std::invalid_argument(
        fmt::format("11_7: {} is more than {} simulated ranks (one thread each); "
                    "use smaller degrees",
                    layout_name(l), kMaxRanks));
  std::optional<std::string> problem;
  try {
    problem = lay::layout_problem(l, world, o.gpus_per_node, o.layers);
  } catch (const NotImplemented&) {
    if (o.gpus_per_node % o.tp != 0)
      problem = fmt::format(
          "tp={} does not divide gpus_per_node={}: tensor parallelism must stay inside one node",
          o.tp, o.gpus_per_node);
    else if (o.layers % o.pp != 0)
      problem = fmt::format("pp={} does not divide layers={}: stages must have equal depth", o.pp,
                            o.layers);
  }
  if (problem) throw std::invalid_argument("11_7: " + *problem);
  // The given plan_share checks what the model needs: heads and d_ff split by tp.
  try {
    (void)lay::plan_share(net, l, {0, 0, 0});
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("11_7: ") + e.what());
  }
  if (net.config().seq_len % o.tp != 0)
    throw std::invalid_argument(
        fmt::format("11_7: a micro-batch of {} tokens does not split into tp = {} slices "
                    "at the stage boundary; use a tp that divides {}",
                    net.config().seq_len, o.tp, net.config().seq_len));
}

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

model::ModelConfig model_config(const Options& o) {
  model::ModelConfig cfg;
  cfg.attention = true;
  cfg.d_in = 8;
  cfg.d_model = 32;
  cfg.n_heads = 8;
  cfg.d_ff = 64;
  cfg.n_layers = o.layers;
  cfg.seq_len = 8;
  cfg.d_out = 4;
  return cfg;
}

ClusterConfig cluster_config(const Options& o) {
  ClusterConfig cc;
  cc.world_size = static_cast<int>(o.tp * o.pp * o.dp);
  cc.gpus_per_node = o.gpus_per_node;
  cc.flops_per_second = o.flops;
  return cc;
}

// What every section works with: the layout, the cluster and the first run (tp inside nodes).
struct Setup {
  const Options& o;
  const model::Model& net;
  const model::ModelConfig& cfg;
  lay::Layout l;
  int world, m, nodes;
  ClusterConfig cc;
};

void print_header(const Setup& s) {
  const Options& o = s.o;
  fmt::print("11.7 3D parallelism: {} = {} simulated GPUs on {} node{} of {}\n", layout_name(s.l),
             s.world, s.nodes, s.nodes == 1 ? "" : "s", o.gpus_per_node);
  fmt::print("code: {}\n", code_line("11_7_3d_and_experts"));
  fmt::print(
      "model: {} blocks with attention, d_model {}, {} heads, d_ff {}: {} parameters;\n"
      "each GPU holds 1/{} of a block's matrices and {} block{}\n",
      s.cfg.n_layers, s.cfg.d_model, s.cfg.n_heads, s.cfg.d_ff, s.net.num_params(), o.tp,
      o.layers / o.pp, o.layers / o.pp == 1 ? "" : "s");
  fmt::print(
      "batch: {} sequences of {} tokens per step, {} micro-batches of one sequence per replica, "
      "1F1B;\n"
      "fp32 Adam, ZeRO-1 over dp\n",
      o.dp * s.m, s.cfg.seq_len, s.m);
  fmt::print(
      "cost model: {:.3g} FLOP/s per GPU (slow, so a tiny model's compute still shows beside link "
      "latency),\n"
      "links {:.3g} B/s + {:.0f} us in a node, {:.3g} B/s + {:.0f} us between nodes\n\n",
      s.cc.flops_per_second, s.cc.intra_node_bytes_per_second,
      s.cc.intra_node_latency_seconds * 1e6, s.cc.inter_node_bytes_per_second,
      s.cc.inter_node_latency_seconds * 1e6);
}

// The first run's cluster and results, and how the tables read them.
struct FirstRun {
  const Setup& s;
  Cluster& cluster;
  const RunResult& inside;
  BlockBytes block;
  bool ran() const { return inside.error.empty(); }
  // Report of the rank the grid calls `c` (tp inside nodes, the chapter's numbering).
  const RankReport& report_of(const lay::RankCoords& c) const {
    return cluster.report(static_cast<int>(physical_rank(c, s.l, false)));
  }
  lay::LayoutModel layout_of(const lay::RankCoords& c) const {
    return layout_model(s.cfg, s.l, lay::plan_share(s.net, s.l, c), s.m, block.bytes);
  }
  std::string measured(double bytes) const { return ran() ? human_bytes(bytes) : "-"; }
};

// Memory per GPU by kind, the ledger's peak beside per_gpu_memory, on the first and last stage.
void memory_section(const FirstRun& run, const std::vector<Shown>& shown, Checks& checks) {
  const Setup& s = run.s;
  const Options& o = s.o;
  std::vector<Shown> mem_ranks{shown.front()};
  if (s.l.pp > 1) mem_ranks.push_back(shown.back());
  std::vector<Column> columns{{"", 22, true}};
  for (const Shown& r : mem_ranks) {
    columns.push_back({r.name, 14});
    columns.push_back({"formula", 14});
  }
  const Table table("Memory per GPU, peak of the ledger (measured) beside per_gpu_memory (formula)",
                    columns);
  struct Row {
    std::string name;
    Category category;
    std::function<double(const lay::GpuMemory&)> formula;
  };
  const std::vector<Row> rows = {
      {"weights", Category::weights, [](const lay::GpuMemory& g) { return g.weights_bytes; }},
      {"gradients", Category::grads, [](const lay::GpuMemory& g) { return g.grads_bytes; }},
      {"optimizer (1/dp)", Category::optimizer,
       [](const lay::GpuMemory& g) { return g.optimizer_bytes; }},
  };
  for (const Row& row : rows) {
    std::vector<std::string> cells{row.name};
    for (const Shown& r : mem_ranks) {
      const double measured =
          run.ran() ? static_cast<double>(run.report_of(r.coords).memory.peak(row.category)) : 0;
      const auto want =
          checks.formula([&] { return row.formula(lay::per_gpu_memory(run.layout_of(r.coords))); });
      if (run.ran()) checks.compare(r.name + " " + row.name, measured, want);
      cells.push_back(run.measured(measured));
      cells.push_back(cell(want, human_bytes));
    }
    table.row(cells);
  }
  const double stage_blocks = static_cast<double>(o.layers / o.pp);
  std::vector<std::string> cells{"activations"};
  for (const Shown& r : mem_ranks) {
    const double measured =
        run.ran() ? static_cast<double>(run.report_of(r.coords).memory.peak(Category::activations))
                  : 0;
    cells.push_back(run.measured(measured));
    // per_gpu_memory's activation term is the first stage's; another stage gets none here.
    cells.push_back(r.coords.pp == 0 ? cell(checks.formula([&] {
      return lay::per_gpu_memory(run.layout_of(r.coords)).activation_bytes;
    }),
                                            human_bytes)
                                     : std::string("-"));
  }
  table.row(cells);
  checks.print_verdict();
  fmt::print(
      "  activations: the formula needs activation_bytes_per_layer; the demo passes one block's "
      "cache for one\n"
      "  micro-batch on one GPU, {} ({}),\n  so the formula is min(m, pp) x L/pp x that = {} x "
      "{:.0f} x {}.\n",
      human_bytes(run.block.bytes),
      run.block.measured ? "measured" : "from the cache shapes: tp_block_forward is a TODO",
      std::min<std::int64_t>(s.m, o.pp), stage_blocks, human_bytes(run.block.bytes));
  if (run.ran()) {
    fmt::print("  measured peak / (L/pp x one block's cache) =");
    for (const Shown& r : mem_ranks) {
      const double peak =
          static_cast<double>(run.report_of(r.coords).memory.peak(Category::activations));
      fmt::print(" {:.2f} on the {}", peak / (stage_blocks * run.block.bytes), r.name);
      if (&r != &mem_ranks.back()) fmt::print(",");
    }
    fmt::print("\n  1F1B keeps min(m, pp - stage) micro-batches in flight:");
    for (const Shown& r : mem_ranks)
      fmt::print(" {}{}", std::min<std::int64_t>(s.m, o.pp - r.coords.pp),
                 &r != &mem_ranks.back() ? " and" : "");
    fmt::print(
        "; the rest is the embedding\n  or head, the boundary tensors and the backward's "
        "temporaries.\n");
  }
  fmt::print("\n");
}

// Bytes sent per GPU and step by group, the traffic meter beside per_gpu_traffic.
void traffic_section(const FirstRun& run, const std::vector<Shown>& shown, Checks& checks) {
  const Setup& s = run.s;
  const lay::Layout& l = s.l;
  std::vector<Column> columns{{"", 28, true}};
  for (const Shown& r : shown) {
    columns.push_back({r.name, 13});
    columns.push_back({"formula", 12});
  }
  const Table table(
      "Bytes sent per GPU and step, by group (measured) beside per_gpu_traffic (formula)", columns);
  const double steps = static_cast<double>(s.o.steps);
  const double activation =
      static_cast<double>(s.cfg.seq_len * s.cfg.d_model * 4);  // A, one micro-batch, fp32
  struct TrafficRow {
    std::string name;
    std::function<double(const TrafficMeter&)> measured;
    std::function<double(const lay::GpuTraffic&, std::int64_t stage)> formula;
  };
  const std::vector<TrafficRow> traffic_rows = {
      {"tp all-reduce (4 per block)",
       [](const TrafficMeter& t) { return t.of(OpKind::all_reduce, "tp").bytes_sent; },
       [](const lay::GpuTraffic& g, std::int64_t) { return g.tensor_parallel_bytes; }},
      {"pp boundary (1/tp slices)", [](const TrafficMeter& t) { return t.group("pp").bytes_sent; },
       [&](const lay::GpuTraffic& g, std::int64_t stage) {
         return pipeline_for(l, stage, g.pipeline_bytes);
       }},
      {"dp ZeRO-1 (RS + AG)", [](const TrafficMeter& t) { return t.group("dp").bytes_sent; },
       [](const lay::GpuTraffic& g, std::int64_t) { return g.data_parallel_bytes; }},
      // Not in the formula: the receiving stage's all-gather that rebuilds a boundary tensor,
      // one per tensor received (as many as it sends), each (tp - 1)/tp of A.
      {"tp all-gather (extra)",
       [](const TrafficMeter& t) { return t.of(OpKind::all_gather, "tp").bytes_sent; },
       [&](const lay::GpuTraffic& g, std::int64_t stage) {
         const double received =
             pipeline_for(l, stage, g.pipeline_bytes) / (activation / static_cast<double>(l.tp));
         return received * activation * static_cast<double>(l.tp - 1) / static_cast<double>(l.tp);
       }},
  };
  for (const TrafficRow& row : traffic_rows) {
    std::vector<std::string> cells{row.name};
    for (const Shown& r : shown) {
      const double measured = run.ran() ? row.measured(run.report_of(r.coords).traffic) / steps : 0;
      const auto want = checks.formula(
          [&] { return row.formula(lay::per_gpu_traffic(run.layout_of(r.coords)), r.coords.pp); });
      if (run.ran() && want)
        checks.compare(r.name + " " + row.name, measured, want, 1e-9 * std::max(1.0, *want));
      cells.push_back(run.measured(measured));
      cells.push_back(cell(want, human_bytes));
    }
    table.row(cells);
  }
  checks.print_verdict();
  fmt::print(
      "  pp: the formula's term is a middle stage's (A forward and A backward per micro-batch, "
      "1/tp each);\n"
      "  with more than two stages an end stage sends one direction, half of it. The tp all-gather "
      "that\n"
      "  rebuilds each received boundary tensor is left out of the formula; its column is "
      "(tp-1)/tp x A per tensor.\n\n");
}

void time_and_loss(const Setup& s, const RunResult& inside) {
  const double t = inside.step_seconds;
  fmt::print("Step time on the virtual clock: {} (latest end over all ranks{})\n", us(t),
             s.o.steps == 1 ? "" : fmt::format(", divided by the {} steps", s.o.steps));
  fmt::print(
      "  mean per GPU: compute {} ({:.0f}%), idle {} ({:.0f}%: waiting on collectives, "
      "neighbours and\n"
      "  the bubble), comm stream busy {} ({:.0f}%, mostly under that idle time); tp all-reduces "
      "{} of it\n",
      us(inside.compute), 100 * inside.compute / t, us(inside.idle), 100 * inside.idle / t,
      us(inside.comm), 100 * inside.comm / t, us(inside.tp_all_reduce_seconds));
  fmt::print("loss (mean over the {} replicas) per step:", s.o.dp);
  for (double loss : inside.losses) fmt::print(" {:.6f}", loss);
  fmt::print("\nhost: {:.1f} s for the {} ranks' run\n\n", inside.wall_seconds, s.world);
}

void write_trace(const Setup& s, const FirstRun& run) {
  const std::string& trace = s.o.trace;
  if (trace.empty()) return;
  if (!run.ran()) {
    fmt::print("no trace written: the step is not implemented yet\n\n");
    return;
  }
  run.cluster.write_chrome_trace(trace);
  fmt::print(
      "trace of the run with tp inside nodes written to {}, {}\n(open it in "
      "https://ui.perfetto.dev: one process per rank; 1F1B shows on the\ncompute lanes, the tp "
      "all-reduces on the comm lanes)\n\n",
      trace, human_bytes(static_cast<double>(std::filesystem::file_size(trace))));
}

// The same step with the tp groups spread across nodes: step time and where it goes.
void topology_section(const Setup& s, const RunResult& inside,
                      const std::vector<model::Batch>& batches) {
  const Options& o = s.o;
  if (o.no_topology) {
    fmt::print("Topology comparison skipped (--no-topology)\n");
    return;
  }
  if (s.nodes == 1) {
    fmt::print(
        "Topology comparison skipped: all {} ranks share one node of {}; add --gpus-per-node {}\n"
        "to split them over nodes\n",
        s.world, o.gpus_per_node, o.tp);
    return;
  }
  if (!inside.error.empty()) {
    fmt::print("Topology comparison skipped: the step is not implemented yet\n");
    return;
  }
  fmt::print(
      "Topology: the same step again with the tp groups spread across nodes (a second run on {} "
      "ranks;\n"
      "--no-topology skips it)\n",
      s.world);
  std::fflush(stdout);
  Cluster across_cluster(s.cc);
  const RunResult across = run_steps(across_cluster, s.net, s.l, s.m, batches, true);
  if (!across.error.empty()) {
    fmt::print("  {}\n", across.error);
    return;
  }
  const Table table("", {{"", 40, true},
                         {"step time", 13},
                         {"in tp all-reduce", 18},
                         {"in dp ZeRO-1", 15},
                         {"loss", 11}});
  const auto line = [&](const std::string& name, const RunResult& r) {
    table.row({name, us(r.step_seconds), us(r.tp_all_reduce_seconds), us(r.dp_seconds),
               fmt::format("{:.6f}", r.losses.back())});
  };
  const auto nodes_of = [&](bool tp_across, bool dp_group) {
    const std::size_t k = group_nodes(s.l, o.gpus_per_node, tp_across, dp_group);
    return fmt::format("{} node{}", k, k == 1 ? "" : "s");
  };
  line(fmt::format("tp inside a node (tp group on {})", nodes_of(false, false)), inside);
  line(fmt::format("tp across nodes (tp group on {})", nodes_of(true, false)), across);
  fmt::print(
      "  (comm-stream time, mean per GPU. The dp groups move too: on {} in the first "
      "placement, {} in the\n"
      "  second; a ring that crosses any node boundary runs at the inter-node link speed "
      "either way)\n",
      nodes_of(false, true), nodes_of(true, true));
  fmt::print(
      "  Same losses bit for bit: {}; {:.2f}x the step time. Every block all-reduces its "
      "activations over\n"
      "  tp four times per micro-batch, on the critical path; a ring is as slow as its slowest "
      "link, so tp\n"
      "  wants the fast links of one server, while dp's one gradient exchange per step (and "
      "pp's\n"
      "  point-to-point sends) can cross nodes.\n",
      across.losses == inside.losses ? "yes" : "NO", across.step_seconds / inside.step_seconds);
}

void run(const Options& o) {
  const auto wall_start = std::chrono::steady_clock::now();
  const model::Model net(model_config(o));
  check_options(o, net);
  const ClusterConfig cc = cluster_config(o);
  const Setup s{o,
                net,
                net.config(),
                lay::Layout{o.tp, o.pp, o.dp},
                cc.world_size,
                o.micro_batches,
                (cc.world_size + o.gpus_per_node - 1) / o.gpus_per_node,
                cc};
  print_header(s);

  std::vector<model::Batch> batches;
  for (int step = 0; step < o.steps; ++step)
    batches.push_back(net.make_batch(o.dp * s.m, 100 + static_cast<std::uint64_t>(step)));
  fmt::print("Running {} step{} of {} train_step_3d on {} ranks...\n", o.steps,
             o.steps == 1 ? "" : "s", whose(), s.world);
  std::fflush(stdout);
  Cluster cluster(cc);
  const RunResult inside = run_steps(cluster, net, s.l, s.m, batches, false);
  if (!inside.error.empty())
    fmt::print("  {}: the measured columns stay empty until it is written\n", inside.error);
  const FirstRun first{s, cluster, inside, block_cache_bytes(net, s.l, cc)};
  fmt::print("\n");

  const std::vector<Shown> shown = shown_ranks(s.l);
  Checks state("state terms equal the formula exactly");
  Checks traffic("every term equals the formula");
  if (!first.ran()) {
    state.todo(inside.error);
    traffic.todo(inside.error);
  }
  memory_section(first, shown, state);
  traffic_section(first, shown, traffic);
  if (first.ran()) time_and_loss(s, inside);
  write_trace(s, first);
  topology_section(s, inside, batches);

  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  fmt::print("\nhost: {:.1f} s wall time, peak RSS {}\n", wall, human_bytes(peak_rss_bytes()));
}

}  // namespace

void add_11_7(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("11_7",
                         "3D parallelism: a tp x pp x dp training step, measured beside the "
                         "formulas, and tp inside versus across nodes");
  sub->add_option("--tp", opts->tp,
                  "tensor-parallel degree (divides --gpus-per-node and the 8 heads)")
      ->capture_default_str();
  sub->add_option("--pp", opts->pp, "pipeline stages (divides --layers)")->capture_default_str();
  sub->add_option("--dp", opts->dp, "data-parallel replicas")->capture_default_str();
  sub->add_option("--micro-batches", opts->micro_batches, "micro-batches per replica and step")
      ->capture_default_str();
  sub->add_option("--layers", opts->layers, "blocks of the model (a multiple of --pp)")
      ->capture_default_str();
  sub->add_option("--steps", opts->steps, "training steps")->capture_default_str();
  sub->add_option("--gpus-per-node", opts->gpus_per_node, "GPUs that share a node's fast links")
      ->capture_default_str();
  sub->add_option("--flops", opts->flops, "compute rate of a GPU, FLOP/s")->capture_default_str();
  sub->add_flag("--no-topology", opts->no_topology,
                "skip the second run with tp spread across nodes");
  sub->add_option("--trace", opts->trace, "write a Chrome trace of the first run to this file");
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
