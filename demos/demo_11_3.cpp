// `mgpu demo 11_3`: the chapter's ZeRO step at stages 0 to 3 on N simulated ranks, with each
// rank's ledger per category (weights, grads, master, optimizer) and its bytes sent per step
// printed beside zero_state_per_gpu and zero_traffic_per_gpu, and the memory stack per stage
// drawn as SVG, the course figure of ZeRO with measured bars.
#include "common.hpp"
#include "demo.hpp"

#include "11_3_zero/formulas.hpp"
#include "11_3_zero/zero.hpp"
#include "svg.hpp"
#include "table.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::demo {

namespace {

namespace z = mgpu::zero;

struct Options {
  int ranks = 4;
  std::string precision = "bf16";
  std::int64_t layers = 2;
  int steps = 2;
  std::int64_t sequences_per_rank = 2;
  bool prefetch = false;
  double flops = 3e10;
  double bandwidth = 5e8;
  std::string trace;
  std::string svg;
};

// The four kinds of training state, in the order the formulas and the figure stack them.
constexpr std::array<Category, 4> kKinds = {Category::weights, Category::grads, Category::master,
                                            Category::optimizer};
constexpr std::array<const char*, 4> kKindNames = {"weights", "grads", "master", "optimizer"};

// What one stage measured on rank 0, and whether every rank measured the same.
struct StageRun {
  int stage = 0;
  std::string error;              // "not implemented: ..." while the chapter is a skeleton
  std::array<double, 4> state{};  // ledger peak bytes per kind, rank 0
  bool ranks_agree = true;        // every rank held and sent what rank 0 did
  double bytes_sent = 0;          // per step, rank 0
  double step_seconds = 0;        // per step, slowest rank
  std::vector<float> weights;     // full weights after the steps, rank 0
  std::string trace;
};

std::array<double, 4> as_array(const z::StateBytes& s) {
  return {s.weights_bytes, s.grads_bytes, s.master_bytes, s.optimizer_bytes};
}

// The model is sized so that every unit divides by N: d_model, d_ff and d_out are multiples of
// it (d_model also of the 2 heads). Shards are then exactly Psi/N with no padding, and the ledger
// can equal the formula to the byte, which assumes exact 1/N shards.
model::ModelConfig model_for(const Options& o) {
  const auto round_up = [](std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; };
  model::ModelConfig c;
  c.d_in = 8;
  c.d_model = round_up(32, std::lcm<std::int64_t>(o.ranks, 2));
  c.d_ff = 2 * c.d_model;
  c.n_layers = o.layers;
  c.n_heads = 2;
  c.seq_len = 4;
  c.d_out = round_up(4, o.ranks);
  return c;
}

StageRun run_stage(const Options& o, const model::Model& net, int stage, z::Precision precision) {
  StageRun run;
  run.stage = stage;
  Cluster cluster(slow_cluster(o.ranks, o.flops, o.bandwidth));
  const auto n = static_cast<std::size_t>(o.ranks);
  std::vector<double> sent(n);
  try {
    cluster.run([&](Rank& r) {
      z::ZeroState state =
          z::make_zero_state(r, r.world(), net, stage, 11, {.lr = 1e-2f}, precision);
      // The state stays allocated through the steps, so its peak is what the steps add to it;
      // the traffic and the clock start here, after the set-up.
      r.memory().reset_peaks();
      r.traffic().reset();
      const double t0 = r.now();
      for (int s = 0; s < o.steps; ++s)
        z::zero_step(
            r, r.world(), net, state,
            net.make_batch(o.sequences_per_rank * o.ranks, 500 + static_cast<std::uint64_t>(s)),
            o.prefetch);
      r.clock().wait_until(r.clock().end_time(), "drain");
      const auto id = static_cast<std::size_t>(r.id());
      sent[id] = static_cast<double>(r.traffic().total().bytes_sent) / o.steps;
      if (id == 0) run.step_seconds = (r.now() - t0) / o.steps;
      // A collective at stage 3, so every rank calls it; only rank 0's copy is kept.
      std::vector<float> w = z::full_weights(r, r.world(), net, state);
      if (id == 0) run.weights = std::move(w);
    });
  } catch (const NotImplemented& e) {
    run.error = e.what();
    return run;
  }
  for (std::size_t k = 0; k < kKinds.size(); ++k)
    run.state[k] = static_cast<double>(cluster.report(0).memory.peak(kKinds[k]));
  run.bytes_sent = sent[0];
  for (int r = 0; r < o.ranks; ++r) {
    const RankReport& rep = cluster.report(r);
    for (std::size_t k = 0; k < kKinds.size(); ++k)
      run.ranks_agree =
          run.ranks_agree && static_cast<double>(rep.memory.peak(kKinds[k])) == run.state[k];
    run.ranks_agree = run.ranks_agree && sent[static_cast<std::size_t>(r)] == run.bytes_sent;
  }
  if (!o.trace.empty()) run.trace = cluster.chrome_trace();
  return run;
}

// "2Ψ" or "0.5Ψ": a byte count as a multiple of the parameter count.
std::string psi(double bytes, double params) { return fmt::format("{:.4g}Ψ", bytes / params); }

// The chapter's formula for a stage in the recipe's numbers: 2Ψ+2Ψ+4Ψ+8Ψ, 4Ψ + 12Ψ/N, ...
std::string state_formula(const PrecisionRecipe& rc, int stage) {
  const double w = rc.bytes_weights, g = rc.bytes_grads, m = rc.bytes_master,
               o = rc.bytes_optimizer;
  switch (stage) {
    case 0: {
      std::string s;
      for (double b : {w, g, m, o})
        if (b > 0) s += fmt::format("{}{:g}Ψ", s.empty() ? "" : "+", b);
      return s;
    }
    case 1:
      return fmt::format("{:g}Ψ + {:g}Ψ/N", w + g, m + o);
    case 2:
      return fmt::format("{:g}Ψ + {:g}Ψ/N", w, g + m + o);
    default:
      return fmt::format("{:g}Ψ/N", w + g + m + o);
  }
}

std::string traffic_formula(int stage) {
  switch (stage) {
    case 0:
      return "2f gΨ (all-reduce)";
    case 1:
    case 2:
      return "f (g+w)Ψ (reduce-scatter + all-gather)";
    default:
      return "f (2w+g)Ψ (two all-gathers + reduce-scatter)";
  }
}

// ------------------------------------------------------------------ the figure
// One stacked bar per stage, bottom-up in kKinds order, in the colours of the course figure's
// four kinds; each segment labelled with its kind and its size in Ψ, each bar with its total.
std::string render_svg(const std::vector<StageRun>& runs, double params, int ranks,
                       const std::string& recipe_name, const std::vector<double>& formula_totals,
                       const PrecisionRecipe& recipe) {
  constexpr double kLeft = 90, kTop = 84, kPlot = 330, kBar = 110, kGap = 60, kLegend = 170;
  constexpr std::array<const char*, 4> kColours = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
  const double width = kLeft + 4 * (kBar + kGap) + kLegend;
  double top_bytes = 0;
  for (const StageRun& r : runs)
    top_bytes = std::max(top_bytes, std::accumulate(r.state.begin(), r.state.end(), 0.0));
  for (double t : formula_totals) top_bytes = std::max(top_bytes, t);
  const double scale = kPlot / std::max(top_bytes, 1.0);
  const double base = kTop + kPlot;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0:.0f}\" height=\"{1:.0f}\" fill=\"white\"/>\n"
      "<text x=\"{2:.0f}\" y=\"28\" font-size=\"16\" font-weight=\"bold\">{3}</text>\n"
      "<text x=\"{2:.0f}\" y=\"48\" fill=\"#555\">{4}</text>\n",
      width, base + 86, kLeft,
      tools::escape_xml(
          fmt::format("ZeRO: training state per GPU, N = {} ranks, {}", ranks, recipe_name)),
      tools::escape_xml(
          fmt::format("bars: each rank's memory ledger after the steps; Ψ = {:.0f} parameters; "
                      "dashes: the formula's total",
                      params)));
  svg += fmt::format(
      "<line x1=\"{0:.0f}\" y1=\"{1:.0f}\" x2=\"{2:.0f}\" y2=\"{1:.0f}\" stroke=\"black\"/>\n",
      kLeft - 10, base, kLeft + 4 * (kBar + kGap) - kGap + 10);
  svg += fmt::format(
      "<text x=\"{0:.0f}\" y=\"{1:.0f}\" text-anchor=\"middle\" transform=\"rotate(-90 {0:.0f} "
      "{1:.0f})\">"
      "bytes per GPU</text>\n",
      kLeft - 40, kTop + kPlot / 2);
  const std::array<const char*, 4> kStageNames = {"plain data parallel", "+ optimizer sharded",
                                                  "+ gradients sharded", "+ weights sharded"};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const StageRun& r = runs[i];
    const double x = kLeft + static_cast<double>(i) * (kBar + kGap);
    double y = base;
    for (std::size_t k = 0; k < kKinds.size(); ++k) {
      const double h = r.state[k] * scale;
      if (h <= 0) continue;
      y -= h;
      svg += fmt::format(
          "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.2f}\" width=\"{:.0f}\" height=\"{:.2f}\" "
          "fill=\"{}\" "
          "stroke=\"white\"><title>{}</title></rect>\n",
          kKindNames[k], x, y, kBar, h, kColours[k],
          tools::escape_xml(
              fmt::format("stage {} {}: {:.0f} bytes", r.stage, kKindNames[k], r.state[k])));
      if (h >= 15)
        svg += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.2f}\" text-anchor=\"middle\" fill=\"white\" "
            "font-size=\"11\">{} {}</text>\n",
            x + kBar / 2, y + h / 2 + 4, kKindNames[k], tools::escape_xml(psi(r.state[k], params)));
    }
    const double total = std::accumulate(r.state.begin(), r.state.end(), 0.0);
    const double formula_y = base - formula_totals[i] * scale;
    svg += fmt::format(
        "<line class=\"formula\" x1=\"{0:.1f}\" y1=\"{1:.2f}\" x2=\"{2:.1f}\" y2=\"{1:.2f}\" "
        "stroke=\"black\" "
        "stroke-dasharray=\"5,3\"/>\n",
        x - 6, formula_y, x + kBar + 6);
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-weight=\"bold\">{} = {:.0f} "
        "B</text>\n",
        x + kBar / 2, std::min(y, formula_y) - 8, tools::escape_xml(psi(total, params)), total);
    svg += fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1:.0f}\" text-anchor=\"middle\" font-weight=\"bold\">stage "
        "{2}</text>\n"
        "<text x=\"{0:.1f}\" y=\"{3:.0f}\" text-anchor=\"middle\" fill=\"#555\" "
        "font-size=\"11\">{4}</text>\n"
        "<text x=\"{0:.1f}\" y=\"{5:.0f}\" text-anchor=\"middle\" font-size=\"11\">{6}</text>\n",
        x + kBar / 2, base + 20, r.stage, base + 36, kStageNames[static_cast<std::size_t>(r.stage)],
        base + 52, tools::escape_xml(state_formula(recipe, r.stage)));
  }
  const double lx = kLeft + 4 * (kBar + kGap);
  for (std::size_t k = kKinds.size(); k-- > 0;) {
    const double ly = kTop + 10 + static_cast<double>(kKinds.size() - 1 - k) * 22;
    svg += fmt::format(
        "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"14\" height=\"14\" fill=\"{}\"/>\n"
        "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
        lx, ly, kColours[k], lx + 20, ly + 12, kKindNames[k]);
  }
  svg += "</svg>\n";
  return svg;
}

// ------------------------------------------------------------------ the report
// What every section works with: the precision recipe and the model.
struct Setup {
  bool bf16;
  z::Precision precision;
  PrecisionRecipe recipe;
  std::string recipe_name;
  const model::Model& net;
  double params;
};

void check_options(const Options& o) {
  if (o.ranks < 1 || o.ranks > 256)
    throw std::invalid_argument(fmt::format("--ranks {}: use 1 to 256", o.ranks));
  if (o.steps < 1 || o.layers < 1 || o.sequences_per_rank < 1)
    throw std::invalid_argument("--steps, --layers and --sequences-per-rank must be at least 1");
  if (o.precision != "bf16" && o.precision != "fp32")
    throw std::invalid_argument(fmt::format("--precision {}: use bf16 or fp32", o.precision));
}

Setup make_setup(const Options& o, const model::Model& net) {
  const bool bf16 = o.precision == "bf16";
  return Setup{bf16,
               bf16 ? z::Precision::bf16_mixed : z::Precision::fp32,
               bf16 ? z::kZeroMixedRecipe : z::kZeroRecipe,
               bf16 ? "bf16 weights and grads, fp32 master and Adam"
                    : "fp32 weights and grads (the master), fp32 Adam",
               net,
               static_cast<double>(net.num_params())};
}

void print_header(const Options& o, const Setup& s) {
  const model::ModelConfig& cfg = s.net.config();
  fmt::print("11.3 ZeRO: {} steps of the course model at stages 0-3 on N = {} simulated ranks\n",
             o.steps, o.ranks);
  fmt::print("code: {}\n", code_line("11_3_zero"));
  fmt::print(
      "model: {} blocks with attention, d_model {}, d_ff {}, d_out {}: Ψ = {:.0f} parameters in {} "
      "units,\n"
      "  each a multiple of N, so every shard is exactly Ψ/N\n",
      cfg.n_layers, cfg.d_model, cfg.d_ff, cfg.d_out, s.params, s.net.num_units());
  fmt::print("precision: {} ({}: w={:g} g={:g} m={:g} o={:g} bytes per parameter){}\n",
             s.recipe_name, s.bf16 ? "kZeroMixedRecipe" : "kZeroRecipe", s.recipe.bytes_weights,
             s.recipe.bytes_grads, s.recipe.bytes_master, s.recipe.bytes_optimizer,
             o.prefetch ? "; stage 3 prefetches the next unit" : "");
  fmt::print(
      "batch: {} sequences per rank per step; cost model: {:.3g} FLOP/s per rank, links {:.3g} "
      "B/s\n\n",
      o.sequences_per_rank, o.flops, o.bandwidth);
}

// Runs every stage and prints rank 0's ledger per kind and bytes per step, each stage's measured
// row above its formula row; `equal` gets the comparisons, `agree` whether every rank matched
// rank 0. Returns the runs, with the formula's total state per stage (0 while a TODO).
std::vector<StageRun> ledger_and_traffic_section(const Options& o, const Setup& s, Checks& equal,
                                                 Checks& agree,
                                                 std::vector<double>& formula_totals) {
  std::vector<StageRun> runs;
  for (int stage = 0; stage <= 3; ++stage) runs.push_back(run_stage(o, s.net, stage, s.precision));
  const Table table(
      "Per rank: the ledger's peak per kind of training state, and bytes sent per step (traffic "
      "meter),\n"
      "beside 11.3 zero_state_per_gpu and zero_traffic_bytes_per_gpu (f = (N-1)/N)",
      {{"stage", 15, true},
       {"weights", 10},
       {"grads", 10},
       {"master", 10},
       {"optimizer", 11},
       {"total", 11},
       {"", 18, true, 2},
       {"sent/step", 12},
       {"x stage 0", 10},
       {"step time", 11}});
  const auto bytes = [](double b) { return fmt::format("{:.0f}", b); };
  double sent0 = 0, predicted0 = 0;
  for (const StageRun& r : runs) {
    const auto want = equal.formula(
        [&] { return as_array(z::zero_state_per_gpu(s.params, s.recipe, r.stage, o.ranks)); });
    const auto want_sent = equal.formula(
        [&] { return z::zero_traffic_bytes_per_gpu(s.params, s.recipe, r.stage, o.ranks); });
    const double want_total = want ? std::accumulate(want->begin(), want->end(), 0.0) : 0;
    formula_totals.push_back(want_total);
    if (r.stage == 0) predicted0 = want_sent.value_or(0);
    if (!r.error.empty()) {
      equal.todo(r.error);
      agree.todo(r.error);
      table.line(std::to_string(r.stage), r.error);
    } else {
      agree.check(fmt::format("stage {}: a rank differs from rank 0", r.stage), r.ranks_agree);
      if (r.stage == 0) sent0 = r.bytes_sent;
      const double total = std::accumulate(r.state.begin(), r.state.end(), 0.0);
      for (std::size_t k = 0; k < kKinds.size(); ++k)
        equal.compare(fmt::format("stage {} {}", r.stage, kKindNames[k]), r.state[k],
                      want ? std::optional<double>((*want)[k]) : std::nullopt);
      equal.compare(fmt::format("stage {} sent/step", r.stage), r.bytes_sent, want_sent);
      table.row({fmt::format("{} measured", r.stage), bytes(r.state[0]), bytes(r.state[1]),
                 bytes(r.state[2]), bytes(r.state[3]), bytes(total), psi(total, s.params),
                 bytes(r.bytes_sent), sent0 > 0 ? fmt::format("{:.3f}", r.bytes_sent / sent0) : "-",
                 us(r.step_seconds)});
    }
    const auto kind = [&](std::size_t k) {
      return cell(want ? std::optional<double>((*want)[k]) : std::nullopt, bytes);
    };
    table.row({"  formula", kind(0), kind(1), kind(2), kind(3),
               cell(want ? std::optional<double>(want_total) : std::nullopt, bytes),
               want ? state_formula(s.recipe, r.stage) : "", cell(want_sent, bytes),
               want_sent && predicted0 > 0 ? fmt::format("{:.3f}", *want_sent / predicted0) : "-"});
  }
  fmt::print("  (bytes per rank; sent/step formulas: stage 0 {}, stages 1-2 {},\n   stage 3 {})\n",
             traffic_formula(0), traffic_formula(1), traffic_formula(3));
  return runs;
}

// How far each stage's weights after the steps are from stage 0's.
void weight_difference(const Options& o, const Setup& s, const std::vector<StageRun>& runs) {
  const StageRun& base = runs.front();
  if (!base.error.empty()) return;
  double worst = 0;
  for (const StageRun& r : runs) {
    if (!r.error.empty() || r.weights.size() != base.weights.size()) continue;
    for (std::size_t i = 0; i < r.weights.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(r.weights[i] - base.weights[i])));
  }
  fmt::print(
      "largest weight difference from stage 0 after {} steps: {:.3g} ({})\n", o.steps, worst,
      s.bf16 ? "every bf16 collective sums in fp32 in rank order and rounds once, so 0 is expected"
             : "fp32 rounding at most: a reduce-scatter may add in another order than the "
               "all-reduce");
}

void reading_notes(const Setup& s) {
  fmt::print(
      "\nWhat to read in the table:\n"
      "- each stage moves one more kind of state from whole to 1/N: optimizer and master at stage "
      "1,\n"
      "  grads at stage 2, weights at stage 3, where the {:g} bytes per parameter are all divided "
      "by N.\n"
      "- stages 1 and 2 send what stage 0 sends: an all-reduce is a reduce-scatter plus an "
      "all-gather,\n"
      "  and ZeRO runs the optimizer between the two. Stage 3 gathers the weights once more for "
      "the\n"
      "  backward: 1.5x the bytes when weights and grads have the same size.\n",
      s.recipe.bytes_weights + s.recipe.bytes_grads + s.recipe.bytes_master +
          s.recipe.bytes_optimizer);
}

void write_trace_and_svg(const Options& o, const Setup& s, const std::vector<StageRun>& runs,
                         const std::vector<double>& formula_totals) {
  if (!o.trace.empty()) {
    std::vector<std::pair<std::string, std::string>> traces;
    for (const StageRun& r : runs)
      if (r.error.empty()) traces.emplace_back(fmt::format("stage {}", r.stage), r.trace);
    write_file(o.trace, merge_chrome_traces(traces));
    fmt::print(
        "trace of the {} stages written to {} (open it in https://ui.perfetto.dev; one group of "
        "ranks per stage)\n",
        traces.size(), o.trace);
  }
  if (o.svg.empty()) return;
  const bool complete =
      std::all_of(runs.begin(), runs.end(), [](const StageRun& r) { return r.error.empty(); });
  if (!complete || formula_totals.back() == 0) {
    fmt::print("no SVG written: every stage and 11.3 zero_state_per_gpu must run first\n");
    return;
  }
  write_file(o.svg, render_svg(runs, s.params, o.ranks, s.bf16 ? "bf16 mixed precision" : "fp32",
                               formula_totals, s.recipe));
  fmt::print("memory stack per stage written to {}\n", o.svg);
}

void run(const Options& o) {
  check_options(o);
  const model::Model net(model_for(o));
  const Setup s = make_setup(o, net);
  print_header(o, s);
  Checks equal(
      "ledger and traffic meter equal zero_state_per_gpu and zero_traffic_bytes_per_gpu at every "
      "stage");
  Checks agree("every rank holds and sends what rank 0 does");
  std::vector<double> formula_totals;
  const std::vector<StageRun> runs = ledger_and_traffic_section(o, s, equal, agree, formula_totals);
  fmt::print("\n");
  equal.print_verdict();
  agree.print_verdict();
  weight_difference(o, s, runs);
  reading_notes(s);
  write_trace_and_svg(o, s, runs, formula_totals);
}

}  // namespace

void add_11_3(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "11_3", "ZeRO stages 0-3: ledger per kind of state and bytes per step vs the formulas");
  sub->add_option("--ranks", opts->ranks, "data-parallel ranks N")->capture_default_str();
  sub->add_option("--precision", opts->precision,
                  "bf16 (mixed: bf16 weights and grads, fp32 master) or fp32")
      ->capture_default_str();
  sub->add_option("--layers", opts->layers, "blocks of the model")->capture_default_str();
  sub->add_option("--steps", opts->steps, "training steps per stage")->capture_default_str();
  sub->add_option("--sequences-per-rank", opts->sequences_per_rank,
                  "sequences of each rank's slice")
      ->capture_default_str();
  sub->add_flag("--prefetch", opts->prefetch,
                "stage 3 posts the next unit's gather before computing this one");
  sub->add_option("--flops", opts->flops, "compute rate of a rank, FLOP/s")->capture_default_str();
  sub->add_option("--bandwidth", opts->bandwidth, "link bandwidth inside a node, bytes/s")
      ->capture_default_str();
  sub->add_option("--trace", opts->trace, "write a Chrome trace of the four stages to this file");
  sub->add_option("--svg", opts->svg, "draw the memory stack per stage to this SVG file");
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
