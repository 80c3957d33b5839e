// `mgpu demo 11_7_moe`: the chapter's expert-parallel mixture-of-experts layer on N simulated
// ranks. It measures the all_to_all_v bytes of an evenly routed forward pass beside
// expert_all_to_all_bytes_per_rank, shows what a router leaning on two experts costs (the busiest
// rank's bytes and time, copies dropped at capacity), and trains the router with the Switch
// Transformer load-balancing loss until the routing is even again.
#include "common.hpp"
#include "demo.hpp"
#include "table.hpp"

#include "11_7_3d_and_experts/formulas.hpp"
#include "11_7_3d_and_experts/moe.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mgpu::demo {

namespace {

namespace ex = mgpu::experts;
using model::MatIn;
using model::MatrixRM;

struct Options {
  int ranks = 8;
  std::int64_t experts = 16;
  std::int64_t top_k = 2;
  std::int64_t tokens = 256;  // per rank
  std::int64_t hidden = 64;
  double capacity_factor = 1.25;
  double skew = 3.0;
  int balance_steps = 50;
  double balance_lr = 0.5;
  double flops = 3e10;
  double bandwidth = 5e8;
  std::string trace;
};

// Seed of the expert weights; the demo overwrites the router, so only the experts' outputs
// depend on it, never the routing or the bytes.
constexpr std::uint64_t kWeightSeed = 7;

// What one rank saw in one forward pass, written by its own thread into its own slot.
struct Seen {
  double seconds = 0;            // virtual time from the phase's start to the end of the combine
  TrafficCounts a2av;            // all_to_all_v traffic of this forward pass only
  std::int64_t dropped = 0;      // copies of this rank's tokens that found no slot
  std::int64_t expert_rows = 0;  // rows this rank's experts processed, its own included
  std::vector<std::int64_t> routed, kept;  // per global expert: copies chosen, copies given a slot
};

// One forward pass of the layer on every rank under one router and capacity.
struct Phase {
  std::string name;
  std::vector<Seen> ranks;

  // The rank whose experts got the most rows (the lowest on a tie): the others wait for it.
  [[nodiscard]] std::size_t busiest() const {
    std::size_t best = 0;
    for (std::size_t r = 1; r < ranks.size(); ++r)
      if (ranks[r].expert_rows > ranks[best].expert_rows) best = r;
    return best;
  }
  [[nodiscard]] double seconds() const {
    double s = 0;
    for (const Seen& seen : ranks) s = std::max(s, seen.seconds);
    return s;
  }
  [[nodiscard]] std::int64_t dropped() const {
    std::int64_t d = 0;
    for (const Seen& seen : ranks) d += seen.dropped;
    return d;
  }
  // Copies per global expert over all ranks: `routed` (what the router asked for) or `kept`.
  [[nodiscard]] std::vector<std::int64_t> load(bool kept) const {
    std::vector<std::int64_t> sum(ranks.front().routed.size(), 0);
    for (const Seen& seen : ranks)
      for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += kept ? seen.kept[e] : seen.routed[e];
    return sum;
  }
};

// max / mean of an expert load: 1.00 is perfectly even.
double imbalance(const std::vector<std::int64_t>& load) {
  const double total =
      static_cast<double>(std::accumulate(load.begin(), load.end(), std::int64_t{0}));
  if (total == 0) return 0;
  return static_cast<double>(*std::max_element(load.begin(), load.end())) *
         static_cast<double>(load.size()) / total;
}

std::string whole(double value) { return fmt::format("{:.0f}", value); }

// Rank `rank`'s tokens (T, h). Under the identity router a token's logits are its first E
// features, so token g (global index) is given the logits 2k, 2(k-1), ..., 2 on experts
// g, g+1, ..., g+k-1 mod E: with T a multiple of E every expert gets exactly T*k/E copies from
// every rank. A little noise keeps the tokens distinct; the last feature is a constant 1, so the
// router's last row acts as a per-expert bias, which is where the skew goes.
MatrixRM make_tokens(const Options& o, int rank) {
  MatrixRM x(o.tokens, o.hidden);
  model::Rng rng(1000 + static_cast<std::uint64_t>(rank));
  rng.fill_normal(std::span<float>(x.data(), static_cast<std::size_t>(x.size())), 0.1);
  for (std::int64_t t = 0; t < o.tokens; ++t) {
    const std::int64_t g = rank * o.tokens + t;
    for (std::int64_t j = 0; j < o.top_k; ++j)
      x(t, (g + j) % o.experts) += static_cast<float>(2 * (o.top_k - j));
    x(t, o.hidden - 1) = 1.0f;
  }
  return x;
}

// The identity on the first E features: the tokens' own preferences decide, evenly.
MatrixRM even_router(const Options& o) {
  MatrixRM router = MatrixRM::Zero(o.hidden, o.experts);
  for (std::int64_t e = 0; e < o.experts; ++e) router(e, e) = 1.0f;
  return router;
}

// The even router plus `skew` on the bias row of experts 0 and 1: every token's logits for them
// rise by the same amount, as when a router has drifted towards a few favourites.
MatrixRM skewed_router(const Options& o) {
  MatrixRM router = even_router(o);
  for (std::int64_t e = 0; e < std::min<std::int64_t>(2, o.experts); ++e)
    router(o.hidden - 1, e) += static_cast<float>(o.skew);
  return router;
}

// The Switch Transformer load-balancing loss (Fedus et al. 2021) of one rank's tokens, and its
// gradient with respect to the router:
//   aux = E * sum_i f_i P_i,
// (Switch trains on task loss + alpha * aux with alpha = 0.01; here the router trains on aux
// alone, where alpha is one factor of the learning rate),
// f_i the share of the T*k top-k choices that picked expert i (dropped or not: the loss judges
// the router, not the capacity), P_i the mean router probability of expert i. f comes from an
// argmax and has no gradient, so it is held constant, as in the paper; through the softmax,
//   d aux / d logit(t, j) = (E/T) p_tj (f_j - sum_i f_i p_ti),
// and logits = x router gives d router = x^T d logits. An even f makes the bracket zero for
// every token, so the steps stop by themselves once the routing is even; aux is then exactly 1.
struct Balance {
  double aux = 0;
  MatrixRM grad;  // (h, E)
};

Balance balance_loss(MatIn x, const ex::Routing& routing) {
  const MatrixRM& p = routing.probs;
  const Eigen::Index T = p.rows(), E = p.cols();
  Eigen::RowVectorXf f = Eigen::RowVectorXf::Zero(E);
  for (int e : routing.expert) f(e) += 1.0f;
  f /= static_cast<float>(routing.expert.size());
  const Eigen::RowVectorXf mean_p = p.colwise().mean();
  Balance b;
  b.aux = static_cast<double>(E) * static_cast<double>(f.dot(mean_p));
  const Eigen::VectorXf f_dot_p = p * f.transpose();  // (T): sum_i f_i p_ti
  MatrixRM dlogits(T, E);
  for (Eigen::Index t = 0; t < T; ++t)
    dlogits.row(t) = p.row(t).cwiseProduct((f.array() - f_dot_p(t)).matrix());
  dlogits *= static_cast<float>(E) / static_cast<float>(T);
  b.grad = x.transpose() * dlogits;
  return b;
}

void check(const Options& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.ranks < 1) fail("--ranks must be at least 1");
  if (o.experts < 1 || o.experts % o.ranks != 0)
    fail(fmt::format(
        "--experts {} must be a positive multiple of --ranks {} (each rank hosts E/N experts)",
        o.experts, o.ranks));
  if (o.top_k < 1 || o.top_k > o.experts)
    fail(fmt::format("--top-k must be in 1..{} (the expert count)", o.experts));
  if (o.tokens < 1) fail("--tokens must be at least 1");
  if (o.hidden < o.experts + 1)
    fail(fmt::format(
        "--hidden must be at least --experts + 1 = {}: the demo's tokens carry one feature per "
        "expert and a constant one",
        o.experts + 1));
  if (!(o.capacity_factor > 0)) fail("--capacity-factor must be positive");
  if (o.balance_steps < 0) fail("--balance-steps must not be negative");
}

void print_phases(const std::vector<const Phase*>& phases, std::int64_t copies) {
  fmt::print("  {:<21}{:>8}{:>12}{:>11}{:>11}{:>12}{:>13}{:>10}\n", "", "busiest", "expert rows",
             "received", "sent", "dropped", "fwd time", "max/mean");
  for (const Phase* p : phases) {
    const std::size_t b = p->busiest();
    const Seen& s = p->ranks[b];
    fmt::print("  {:<21}{:>8}{:>12}{:>11}{:>11}{:>12}{:>13}{:>10.2f}\n", p->name,
               fmt::format("rank {}", b), s.expert_rows,
               human_bytes(static_cast<double>(s.a2av.bytes_received)),
               human_bytes(static_cast<double>(s.a2av.bytes_sent)),
               fmt::format("{} ({:.0f}%)", p->dropped(),
                           100.0 * static_cast<double>(p->dropped()) / static_cast<double>(copies)),
               us(p->seconds()), imbalance(p->load(false)));
  }
}

// The expert capacity in words, "40 slots", or "TODO slots" while expert_capacity is a TODO.
std::string slots_text(const Options& o) {
  try {
    return fmt::format("{} slots",
                       ex::expert_capacity(o.tokens, o.top_k, o.experts, o.capacity_factor));
  } catch (const NotImplemented&) {
    return std::string("TODO slots");
  }
}

void print_header(const Options& o, const ClusterConfig& cc, const std::string& slots) {
  const std::int64_t n = o.ranks, E = o.experts, k = o.top_k, T = o.tokens, h = o.hidden;
  const bool one_node = o.ranks <= cc.gpus_per_node;
  fmt::print("11.7 expert parallelism: a mixture-of-experts layer on {} simulated ranks ({})\n", n,
             one_node ? "one node" : "several nodes");
  fmt::print("code: {}\n", code_line("11_7_3d_and_experts"));
  fmt::print(
      "layer: {} experts of ({} x {}), {} per rank, top-{} routing; {} tokens per rank, fp32\n", E,
      h, h, E / n, k, T);
  fmt::print("capacity factor (cap) {:g}: each expert has {} for the {} x {} copies of each rank\n",
             o.capacity_factor, slots, T, k);
  fmt::print("cost model: {:.3g} FLOP/s per rank, links {:.3g} B/s with {:.0f} us latency\n",
             cc.flops_per_second,
             one_node ? cc.intra_node_bytes_per_second : cc.inter_node_bytes_per_second,
             (one_node ? cc.intra_node_latency_seconds : cc.inter_node_latency_seconds) * 1e6);
  fmt::print(
      "(a slow GPU and slow links for a small layer, so exchanges and experts take visible "
      "time)\n");
  fmt::print(
      "tokens: under the identity router token g prefers experts g, g+1, ... mod {} (logits {}, "
      "..., 2),\n"
      "plus noise; a constant last feature makes the router's last row a per-expert bias\n\n",
      E, 2 * k);
}

// What the one run measured: the four forward passes and the aux loss per rank and step.
struct LayerRun {
  std::vector<Phase> phases;
  std::vector<std::vector<double>> aux;  // per rank, per step
  std::string error;                     // "not implemented: ..." while the layer is a skeleton
};

// One run holds every phase back to back, so a trace shows them side by side in time: even,
// skewed with and without the capacity limit, then the router trained on the balancing loss.
LayerRun run_layer(const Options& o, Cluster& cluster) {
  const std::int64_t n = o.ranks, E = o.experts, k = o.top_k, T = o.tokens, h = o.hidden;
  const auto hs = static_cast<std::size_t>(h), es = static_cast<std::size_t>(E);
  const ex::MoeConfig capped{h, E, k, o.capacity_factor};
  // A factor of E/k gives every expert T slots per source rank: nothing can be dropped.
  const ex::MoeConfig uncapped{h, E, k, static_cast<double>(E) / static_cast<double>(k)};
  const MatrixRM even = even_router(o), skewed = skewed_router(o);
  const std::string cap = fmt::format("(cap {:g})", o.capacity_factor);
  LayerRun run;
  run.phases = {
      {"even " + cap, {}}, {"skewed " + cap, {}}, {"skewed (no cap)", {}}, {"balanced " + cap, {}}};
  for (Phase& p : run.phases) p.ranks.resize(static_cast<std::size_t>(n));
  run.aux.resize(static_cast<std::size_t>(n));
  std::vector<Phase>& phases = run.phases;
  std::vector<std::vector<double>>& aux = run.aux;
  std::string error;
  try {
    cluster.run([&](Rank& r) {
      const auto id = static_cast<std::size_t>(r.id());
      Comm& ep = r.world();
      const MatrixRM x = make_tokens(o, r.id());
      ex::MoeLayer capped_layer = ex::make_moe_layer(r, ep, capped, kWeightSeed);
      ex::MoeLayer open_layer = ex::make_moe_layer(r, ep, uncapped, kWeightSeed);
      MatrixRM y(T, h);

      const auto forward = [&](ex::MoeLayer& layer, const MatrixRM& router, Phase& phase) {
        as_matrix(layer.router, hs, es) = router;
        // All ranks start the phase together, so its time is this forward pass alone.
        ep.barrier();
        const double t0 = r.now();
        const TrafficCounts before = r.traffic().op(OpKind::all_to_all_v);
        const ex::MoeCache cache = ex::moe_forward(r, ep, layer, x, y);
        const TrafficCounts after = r.traffic().op(OpKind::all_to_all_v);
        Seen& s = phase.ranks[id];
        s.seconds = r.clock().end_time() - t0;
        s.a2av.bytes_sent = after.bytes_sent - before.bytes_sent;
        s.a2av.bytes_received = after.bytes_received - before.bytes_received;
        s.a2av.messages_sent = after.messages_sent - before.messages_sent;
        s.dropped = cache.routing.dropped;
        s.expert_rows = cache.dispatch.received_rows;
        s.routed.assign(es, 0);
        s.kept.assign(es, 0);
        for (std::size_t c = 0; c < cache.routing.expert.size(); ++c) {
          const auto e = static_cast<std::size_t>(cache.routing.expert[c]);
          ++s.routed[e];
          if (cache.routing.kept[c]) ++s.kept[e];
        }
      };

      forward(capped_layer, even, phases[0]);
      forward(capped_layer, skewed, phases[1]);
      forward(open_layer, skewed, phases[2]);

      // Plain gradient descent on the router alone. Each rank takes the loss's gradient on its
      // own tokens; an all_reduce averages it, as data parallelism would, so every rank applies
      // the same step and the replicated router stays identical everywhere.
      MatrixRM router = skewed;
      for (int step = 0;; ++step) {
        const Balance b = [&] {
          const ex::Routing routing = ex::moe_route(x, router, k, o.capacity_factor);
          return balance_loss(x, routing);
        }();
        aux[id].push_back(b.aux);
        if (step == o.balance_steps) break;
        MatrixRM grad = b.grad;
        // The logits and the router gradient: two (T, h) x (h, E) products.
        r.compute(4.0 * static_cast<double>(T * h * E), "load-balancing gradient");
        ep.all_reduce(std::span<float>(grad.data(), static_cast<std::size_t>(grad.size())),
                      ReduceOp::avg);
        router -= static_cast<float>(o.balance_lr) * grad;
      }
      forward(capped_layer, router, phases[3]);
    });
  } catch (const NotImplemented& e) {
    error = e.what();
  }

  run.error = error;
  return run;
}

// Even routing: each rank's all_to_all_v bytes beside expert_all_to_all_bytes_per_rank; the
// verdict closes this table.
bool even_routing_section(const Options& o, const LayerRun& run) {
  const std::int64_t n = o.ranks, E = o.experts, k = o.top_k, T = o.tokens, h = o.hidden;
  Checks checks("measured equals the formula on every rank");
  const auto formula_bytes =
      checks.formula([&] { return layout::expert_all_to_all_bytes_per_rank(T, h, k, E, n, 4); });
  fmt::print(
      "1. Even routing, identity router ({} moe_forward): {:g} copies per expert from each rank\n",
      whose(), static_cast<double>(T * k) / static_cast<double>(E));
  if (!run.error.empty()) {
    checks.todo(run.error);
    fmt::print("  {}\n", run.error);
    fmt::print(
        "  formula: expert_all_to_all_bytes_per_rank = {} bytes sent per rank in the forward\n",
        cell(formula_bytes, whole));
    fmt::print(
        "  nothing below runs until the layer is written; then each rank's bytes should match "
        "it\n");
    checks.print_verdict();
    if (!o.trace.empty()) fmt::print("no trace written: the layer is not implemented yet\n");
    return false;
  }
  const Table table(
      "  sent: all_to_all_v bytes of the forward pass, the dispatch out and the combine back;\n"
      "  formula: expert_all_to_all_bytes_per_rank, 2 T k h 4 (N-1)/N, which counts both",
      {{"rank", 6},
       {"sent", 14},
       {"formula", 14},
       {"received", 14},
       {"dropped", 10},
       {"forward time", 16}});
  double worst = 0;  // largest relative difference from the formula over ranks
  for (std::size_t r = 0; r < run.phases[0].ranks.size(); ++r) {
    const Seen& s = run.phases[0].ranks[r];
    const auto sent = static_cast<double>(s.a2av.bytes_sent);
    checks.compare(fmt::format("rank {} sent", r), sent, formula_bytes);
    if (formula_bytes && *formula_bytes > 0)
      worst = std::max(worst, std::abs(sent - *formula_bytes) / *formula_bytes);
    table.row({std::to_string(r), std::to_string(s.a2av.bytes_sent), cell(formula_bytes, whole),
               std::to_string(s.a2av.bytes_received), std::to_string(s.dropped), us(s.seconds)});
  }
  checks.print_verdict();
  if (worst != 0 && T % E != 0)
    fmt::print(
        "  (up to {:.1f}% off: T is not a multiple of E, so this routing is only nearly even)\n",
        100 * worst);
  fmt::print(
      "  (the row counts go first in a small all_to_all of E doubles per rank, not counted "
      "here)\n\n");
  return true;
}

// Skewed routing: the busiest rank's rows, bytes and time, and the copies dropped at capacity.
void skewed_routing_section(const Options& o, const LayerRun& run, const std::string& slots) {
  const std::int64_t n = o.ranks, E = o.experts, k = o.top_k, T = o.tokens;
  const std::vector<Phase>& phases = run.phases;
  const std::int64_t copies = n * T * k;
  // The rank that hosts expert 1: rank 0 too when each rank has two experts or more.
  const std::int64_t hot_last = std::min<std::int64_t>(1, E - 1) / (E / n);
  fmt::print("2. Skewed routing: +{:g} on the logits of experts 0 and 1 for every token ({})\n",
             o.skew, hot_last == 0 ? "both on rank 0" : "on ranks 0 and 1");
  print_phases({&phases[0], &phases[1], &phases[2]}, copies);
  fmt::print(
      "  busiest: the rank whose experts got the most rows (its own tokens' included);\n"
      "  received, sent: its all_to_all_v bytes in the forward; dropped: copies, all ranks (of "
      "{});\n"
      "  fwd time: the slowest rank's forward; max/mean: the most chosen expert's copies over the "
      "mean\n",
      copies);
  for (const Phase* p : {&phases[1], &phases[2]}) {
    fmt::print("  expert rows per rank, {}:", p->name);
    for (const Seen& s : p->ranks) fmt::print(" {}", s.expert_rows);
    fmt::print("\n");
  }
  fmt::print(
      "  Each all_to_all_v lasts as long as its busiest member, so every rank waits for rank {}.\n"
      "  Its bytes fall: the skew points most of its own tokens' copies at its own experts, and\n"
      "  those never travel (its dispatch shrinks), while the limit lets its experts take at most\n"
      "  {} from each source (its combine grows only that far). The skew is paid in dropped\n"
      "  copies (tokens that skip the layer). Without the limit nothing is dropped, and its bytes\n"
      "  and expert time grow with the skew.\n\n",
      phases[2].busiest(), slots);
}

// The router trained on the Switch load-balancing loss, and the routing it ends with.
void load_balancing_section(const Options& o, const LayerRun& run) {
  const std::int64_t n = o.ranks, k = o.top_k, T = o.tokens;
  const auto es = static_cast<std::size_t>(o.experts);
  const std::int64_t copies = n * T * k;
  const std::vector<Phase>& phases = run.phases;
  const std::vector<std::vector<double>>& aux = run.aux;
  fmt::print(
      "3. Load-balancing loss (Switch Transformer): aux = E sum_i f_i P_i, with f_i the share\n"
      "  of the top-k choices that picked expert i and P_i its mean router probability. Switch\n"
      "  adds alpha * aux to the task's loss (alpha = 0.01); trained alone here, alpha would only\n"
      "  rescale the learning rate, so it is left out.\n"
      "  {} plain gradient steps (lr {:g}) on the router alone, from the skewed one: each rank\n"
      "  differentiates its own tokens' loss, an all_reduce averages the gradients\n",
      o.balance_steps, o.balance_lr);
  fmt::print("  aux loss by step, mean over ranks (1.000 when the routing is even):\n ");
  // Steps 0, 1, 2, 5, 10, 20, 50, ... and the last: the loss falls fast, then flattens.
  const std::size_t shown = aux.front().size();
  std::vector<std::size_t> steps;
  for (std::size_t decade = 1; decade < shown; decade *= 10)
    for (std::size_t m : {1, 2, 5})
      if (m * decade < shown) steps.push_back(m * decade);
  steps.insert(steps.begin(), 0);
  if (steps.back() + 1 != shown) steps.push_back(shown - 1);
  for (std::size_t s : steps) {
    double mean = 0;
    for (const auto& per_rank : aux) mean += per_rank[s] / static_cast<double>(n);
    fmt::print(" {}:{:.3f}", s, mean);
  }
  fmt::print("\n");
  fmt::print("\n  copies per expert over all ranks, routed (kept):\n");
  fmt::print("  {:>8}{:>16}{:>16}{:>16}\n", "expert", "even", "skewed", "balanced");
  const std::vector<const Phase*> table = {&phases[0], &phases[1], &phases[3]};
  std::vector<std::vector<std::int64_t>> routed, kept;
  for (const Phase* p : table) {
    routed.push_back(p->load(false));
    kept.push_back(p->load(true));
  }
  for (std::size_t e = 0; e < es; ++e) {
    fmt::print("  {:>8}", e);
    for (std::size_t i = 0; i < table.size(); ++i)
      fmt::print("{:>16}", fmt::format("{} ({})", routed[i][e], kept[i][e]));
    fmt::print("\n");
  }
  fmt::print("  {:>8}", "max/mean");
  for (std::size_t i = 0; i < table.size(); ++i)
    fmt::print("{:>16}", fmt::format("{:.2f} ({:.2f})", imbalance(routed[i]), imbalance(kept[i])));
  fmt::print("\n\n");
  print_phases({&phases[0], &phases[1], &phases[3]}, copies);
}

void run(const Options& o) {
  check(o);
  const ClusterConfig cc = slow_cluster(o.ranks, o.flops, o.bandwidth);
  const std::string slots = slots_text(o);
  print_header(o, cc, slots);
  Cluster cluster(cc);
  const LayerRun layer = run_layer(o, cluster);
  if (!even_routing_section(o, layer)) return;
  skewed_routing_section(o, layer, slots);
  load_balancing_section(o, layer);
  if (!o.trace.empty()) {
    cluster.write_chrome_trace(o.trace);
    fmt::print(
        "\ntrace written to {} (open it in https://ui.perfetto.dev): the four forward passes\n"
        "and the balancing steps one after another; rank {}'s expert compute grows under skew\n",
        o.trace, layer.phases[1].busiest());
  }
}

}  // namespace

void add_11_7_moe(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "11_7_moe", "expert parallelism: an MoE layer's all-to-all, skewed routing, load balancing");
  sub->add_option("--ranks", opts->ranks, "expert-parallel ranks (simulated GPUs)")
      ->capture_default_str();
  sub->add_option("--experts", opts->experts, "experts in the layer, a multiple of --ranks")
      ->capture_default_str();
  sub->add_option("--top-k", opts->top_k, "experts each token is sent to")->capture_default_str();
  sub->add_option("--tokens", opts->tokens, "tokens per rank")->capture_default_str();
  sub->add_option("--hidden", opts->hidden, "width of a token, at least --experts + 1")
      ->capture_default_str();
  sub->add_option("--capacity-factor", opts->capacity_factor,
                  "slots per expert relative to an even share")
      ->capture_default_str();
  sub->add_option("--skew", opts->skew, "logit added to experts 0 and 1 for every token")
      ->capture_default_str();
  sub->add_option("--balance-steps", opts->balance_steps,
                  "gradient steps on the load-balancing loss")
      ->capture_default_str();
  sub->add_option("--balance-lr", opts->balance_lr, "learning rate of those steps")
      ->capture_default_str();
  sub->add_option("--flops", opts->flops, "compute rate of a rank, FLOP/s")->capture_default_str();
  sub->add_option("--bandwidth", opts->bandwidth, "link bandwidth inside a node, bytes/s")
      ->capture_default_str();
  sub->add_option("--trace", opts->trace, "write a Chrome trace of the whole run to this file");
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
