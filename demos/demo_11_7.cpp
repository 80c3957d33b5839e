// `mgpu demo 11_7`: the chapter's 3D-parallel training step (tensor x pipeline x data, ZeRO-1)
// on every rank of a simulated cluster, up to the text's 8 x 4 x 32 = 1,024 GPUs, with the
// memory and bytes each GPU measured printed beside per_gpu_memory and per_gpu_traffic; then
// the same step with the tensor-parallel groups spread across nodes instead of kept inside one.
#include "common.hpp"
#include "demo.hpp"

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

void run(const Options& o) {
  const auto wall_start = std::chrono::steady_clock::now();
  model::ModelConfig cfg;
  cfg.attention = true;
  cfg.d_in = 8;
  cfg.d_model = 32;
  cfg.n_heads = 8;
  cfg.d_ff = 64;
  cfg.n_layers = o.layers;
  cfg.seq_len = 8;
  cfg.d_out = 4;
  const model::Model net(cfg);
  check_options(o, net);
  const lay::Layout l{o.tp, o.pp, o.dp};
  const auto world = static_cast<int>(o.tp * o.pp * o.dp);
  const int m = o.micro_batches;
  const std::int64_t sequences = o.dp * m;  // one sequence per micro-batch

  ClusterConfig cc;
  cc.world_size = world;
  cc.gpus_per_node = o.gpus_per_node;
  cc.flops_per_second = o.flops;
  const int nodes = (world + o.gpus_per_node - 1) / o.gpus_per_node;

  fmt::print("11.7 3D parallelism: {} = {} simulated GPUs on {} node{} of {}\n", layout_name(l),
             world, nodes, nodes == 1 ? "" : "s", o.gpus_per_node);
  fmt::print(
      "code: {}\n",
      reference_build()
          ? "the reference solutions (solutions/11_7_3d_and_experts); add --student to run yours"
          : "your chapters/11_7_3d_and_experts (the student build)");
  fmt::print(
      "model: {} blocks with attention, d_model {}, {} heads, d_ff {}: {} parameters;\n"
      "each GPU holds 1/{} of a block's matrices and {} block{}\n",
      cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, net.num_params(), o.tp, o.layers / o.pp,
      o.layers / o.pp == 1 ? "" : "s");
  fmt::print(
      "batch: {} sequences of {} tokens per step, {} micro-batches of one sequence per replica, "
      "1F1B;\n"
      "fp32 Adam, ZeRO-1 over dp\n",
      sequences, cfg.seq_len, m);
  fmt::print(
      "cost model: {:.3g} FLOP/s per GPU (slow, so a tiny model's compute still shows beside link "
      "latency),\n"
      "links {:.3g} B/s + {:.0f} us in a node, {:.3g} B/s + {:.0f} us between nodes\n\n",
      cc.flops_per_second, cc.intra_node_bytes_per_second, cc.intra_node_latency_seconds * 1e6,
      cc.inter_node_bytes_per_second, cc.inter_node_latency_seconds * 1e6);

  std::vector<model::Batch> batches;
  for (int s = 0; s < o.steps; ++s)
    batches.push_back(net.make_batch(sequences, 100 + static_cast<std::uint64_t>(s)));

  // ---------------------------------------------------------------- the step, tp inside nodes
  fmt::print("Running {} step{} of {} train_step_3d on {} ranks...\n", o.steps,
             o.steps == 1 ? "" : "s", whose(), world);
  std::fflush(stdout);
  Cluster cluster(cc);
  const RunResult inside = run_steps(cluster, net, l, m, batches, false);
  const bool ran = inside.error.empty();
  if (!ran) fmt::print("  {}: the measured columns stay empty until it is written\n", inside.error);
  const BlockBytes block = block_cache_bytes(net, l, cc);
  fmt::print("\n");

  const std::vector<Shown> shown = shown_ranks(l);
  // Report of the rank the grid calls `c` in the first run (tp inside nodes, the chapter's
  // numbering).
  const auto report_of = [&](const lay::RankCoords& c) -> const RankReport& {
    return cluster.report(static_cast<int>(physical_rank(c, l, false)));
  };
  const auto share_of = [&](const lay::RankCoords& c) { return lay::plan_share(net, l, c); };
  const auto cell = [&](double bytes) { return ran ? human_bytes(bytes) : std::string("-"); };

  // ---------------------------------------------------------------- memory
  std::vector<Shown> mem_ranks{shown.front()};
  if (l.pp > 1) mem_ranks.push_back(shown.back());
  fmt::print("Memory per GPU, peak of the ledger (measured) beside per_gpu_memory (formula)\n");
  fmt::print("  {:<22}", "");
  for (const Shown& s : mem_ranks) fmt::print("{:>14}{:>14}", s.name, "formula");
  fmt::print("\n");
  bool state_exact = true;
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
    fmt::print("  {:<22}", row.name);
    for (const Shown& s : mem_ranks) {
      const auto lm = layout_model(cfg, l, share_of(s.coords), m, block.bytes);
      const double measured =
          ran ? static_cast<double>(report_of(s.coords).memory.peak(row.category)) : 0;
      std::optional<double> want;
      try {
        want = row.formula(lay::per_gpu_memory(lm));
      } catch (const NotImplemented&) {
      }
      if (ran && want && measured != *want) state_exact = false;
      fmt::print("{:>14}{:>14}", cell(measured), want ? human_bytes(*want) : std::string("TODO"));
    }
    fmt::print("\n");
  }
  const double stage_blocks = static_cast<double>(o.layers / o.pp);
  fmt::print("  {:<22}", "activations");
  for (const Shown& s : mem_ranks) {
    const auto lm = layout_model(cfg, l, share_of(s.coords), m, block.bytes);
    const double measured =
        ran ? static_cast<double>(report_of(s.coords).memory.peak(Category::activations)) : 0;
    // per_gpu_memory's activation term is the first stage's; another stage gets none here.
    const std::string want =
        s.coords.pp == 0
            ? predict([&] { return lay::per_gpu_memory(lm).activation_bytes; }, human_bytes)
            : std::string("-");
    fmt::print("{:>14}{:>14}", cell(measured), want);
  }
  fmt::print("\n");
  if (ran) fmt::print("  state terms equal the formula exactly: {}\n", state_exact ? "yes" : "NO");
  fmt::print(
      "  activations: the formula needs activation_bytes_per_layer; the demo passes one block's "
      "cache for one\n"
      "  micro-batch on one GPU, {} ({}),\n  so the formula is min(m, pp) x L/pp x that = {} x "
      "{:.0f} x {}.\n",
      human_bytes(block.bytes),
      block.measured ? "measured" : "from the cache shapes: tp_block_forward is a TODO",
      std::min<std::int64_t>(m, o.pp), stage_blocks, human_bytes(block.bytes));
  if (ran) {
    fmt::print("  measured peak / (L/pp x one block's cache) =");
    for (const Shown& s : mem_ranks) {
      const double peak =
          static_cast<double>(report_of(s.coords).memory.peak(Category::activations));
      fmt::print(" {:.2f} on the {}", peak / (stage_blocks * block.bytes), s.name);
      if (&s != &mem_ranks.back()) fmt::print(",");
    }
    fmt::print("\n  1F1B keeps min(m, pp - stage) micro-batches in flight:");
    for (const Shown& s : mem_ranks)
      fmt::print(" {}{}", std::min<std::int64_t>(m, o.pp - s.coords.pp),
                 &s != &mem_ranks.back() ? " and" : "");
    fmt::print(
        "; the rest is the embedding\n  or head, the boundary tensors and the backward's "
        "temporaries.\n");
  }
  fmt::print("\n");

  // ---------------------------------------------------------------- traffic
  fmt::print("Bytes sent per GPU and step, by group (measured) beside per_gpu_traffic (formula)\n");
  fmt::print("  {:<28}", "");
  for (const Shown& s : shown) fmt::print("{:>13}{:>12}", s.name, "formula");
  fmt::print("\n");
  const double steps = static_cast<double>(o.steps);
  const double activation =
      static_cast<double>(cfg.seq_len * cfg.d_model * 4);  // A, one micro-batch, fp32
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
  bool traffic_exact = true;
  for (const TrafficRow& row : traffic_rows) {
    fmt::print("  {:<28}", row.name);
    for (const Shown& s : shown) {
      const auto lm = layout_model(cfg, l, share_of(s.coords), m, block.bytes);
      const double measured = ran ? row.measured(report_of(s.coords).traffic) / steps : 0;
      std::optional<double> want;
      try {
        want = row.formula(lay::per_gpu_traffic(lm), s.coords.pp);
      } catch (const NotImplemented&) {
      }
      if (ran && want && std::abs(measured - *want) > 1e-9 * std::max(1.0, *want))
        traffic_exact = false;
      fmt::print("{:>13}{:>12}", cell(measured), want ? human_bytes(*want) : std::string("TODO"));
    }
    fmt::print("\n");
  }
  if (ran) fmt::print("  every term equals the formula: {}\n", traffic_exact ? "yes" : "NO");
  fmt::print(
      "  pp: the formula's term is a middle stage's (A forward and A backward per micro-batch, "
      "1/tp each);\n"
      "  with more than two stages an end stage sends one direction, half of it. The tp all-gather "
      "that\n"
      "  rebuilds each received boundary tensor is left out of the formula; its column is "
      "(tp-1)/tp x A per "
      "tensor.\n\n");

  // ---------------------------------------------------------------- time and loss
  if (ran) {
    const double t = inside.step_seconds;
    fmt::print("Step time on the virtual clock: {} (latest end over all ranks{})\n", us(t),
               o.steps == 1 ? "" : fmt::format(", divided by the {} steps", o.steps));
    fmt::print(
        "  mean per GPU: compute {} ({:.0f}%), idle {} ({:.0f}%: waiting on collectives, "
        "neighbours and\n"
        "  the bubble), comm stream busy {} ({:.0f}%, mostly under that idle time); tp all-reduces "
        "{} of it\n",
        us(inside.compute), 100 * inside.compute / t, us(inside.idle), 100 * inside.idle / t,
        us(inside.comm), 100 * inside.comm / t, us(inside.tp_all_reduce_seconds));
    fmt::print("loss (mean over the {} replicas) per step:", o.dp);
    for (double loss : inside.losses) fmt::print(" {:.6f}", loss);
    fmt::print("\nhost: {:.1f} s for the {} ranks' run\n\n", inside.wall_seconds, world);
  }

  if (!o.trace.empty()) {
    if (ran) {
      cluster.write_chrome_trace(o.trace);
      fmt::print(
          "trace of the run with tp inside nodes written to {}, {}\n(open it in "
          "https://ui.perfetto.dev: one process "
          "per rank; 1F1B shows on the\ncompute lanes, the tp all-reduces on the comm lanes)\n\n",
          o.trace, human_bytes(static_cast<double>(std::filesystem::file_size(o.trace))));
    } else {
      fmt::print("no trace written: the step is not implemented yet\n\n");
    }
  }

  // ---------------------------------------------------------------- topology
  if (o.no_topology) {
    fmt::print("Topology comparison skipped (--no-topology)\n");
  } else if (nodes == 1) {
    fmt::print(
        "Topology comparison skipped: all {} ranks share one node of {}; add --gpus-per-node {}\n"
        "to split them over nodes\n",
        world, o.gpus_per_node, o.tp);
  } else if (!ran) {
    fmt::print("Topology comparison skipped: the step is not implemented yet\n");
  } else {
    fmt::print(
        "Topology: the same step again with the tp groups spread across nodes (a second run on {} "
        "ranks;\n"
        "--no-topology skips it)\n",
        world);
    std::fflush(stdout);
    Cluster across_cluster(cc);
    const RunResult across = run_steps(across_cluster, net, l, m, batches, true);
    if (!across.error.empty()) {
      fmt::print("  {}\n", across.error);
    } else {
      fmt::print("  {:<40}{:>13}{:>18}{:>15}{:>11}\n", "", "step time", "in tp all-reduce",
                 "in dp ZeRO-1", "loss");
      const auto line = [&](const std::string& name, const RunResult& r) {
        fmt::print("  {:<40}{:>13}{:>18}{:>15}{:>11.6f}\n", name, us(r.step_seconds),
                   us(r.tp_all_reduce_seconds), us(r.dp_seconds), r.losses.back());
      };
      const auto nodes_of = [&](bool tp_across, bool dp_group) {
        const std::size_t k = group_nodes(l, o.gpus_per_node, tp_across, dp_group);
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
  }

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
