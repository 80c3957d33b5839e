// `mgpu demo 11_6`: forward and backward of L attention blocks on one simulated GPU, plain, with a
// checkpoint every k blocks for a few k, and with selective recompute of the attention core;
// the ledger's activation peak, the recomputed FLOPs on the clock and the gradients printed
// beside the 11.6 formulas and the plain step's. The exact peak of a checkpointed step is
// tools/checkpoint's predicted_peak_bytes, the formula `./mgpu checkpoint` sweeps k against.
#include "common.hpp"
#include "demo.hpp"
#include "table.hpp"

#include "11_6_checkpointing/checkpointing.hpp"
#include "11_6_checkpointing/formulas.hpp"
#include "checkpoint/figure.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::demo {

namespace {

namespace ck = mgpu::checkpointing;

struct Options {
  std::int64_t layers = 8;
  std::vector<std::int64_t> every;  // empty: 1, 2, sqrt(L), the chapter's best, L
  std::int64_t sequences = 2;
  std::string trace;
};

constexpr std::uint64_t kParamSeed = 11, kBatchSeed = 3;

// What one forward and backward measured on its own one-rank cluster.
struct Step {
  std::string name{};
  std::int64_t k = 0;   // 0: no checkpointing or selective
  std::string error{};  // "not implemented: ..." while the chapter is a skeleton
  double peak = 0, flops = 0, loss = 0;
  std::vector<float> grads{};
  std::optional<double> exact{};        // the chapter's exact peak, nullopt while a TODO
  std::optional<std::int64_t> units{};  // ceil(L/k) + k, or L for the plain step
  double predicted_extra = 0;           // FLOPs the recompute should add
  std::string trace{};
};

using StepFn = std::function<double(Rank&, const model::Model&, std::span<const float>,
                                    std::span<float>, const model::Batch&)>;

Step run_step(Step s, const model::Model& net, const model::Batch& batch, const StepFn& fn,
              bool trace) {
  Cluster cluster(1);
  try {
    cluster.run([&](Rank& r) {
      model::Replica rep = net.make_replica(r.memory(), kParamSeed);
      r.memory().reset_peaks();
      const double t0 = r.clock().compute_time();
      s.loss = fn(r, net, rep.params.span(), rep.grads.span(), batch);
      s.flops = (r.clock().compute_time() - t0) * r.config().flops_per_second;
      s.peak = static_cast<double>(r.memory().peak(Category::activations));
      if (r.memory().current(Category::activations) != 0)
        throw std::runtime_error(
            fmt::format("{}: {} bytes of activations still allocated after the step; "
                        "free every buffer the backward is done with",
                        s.name, r.memory().current(Category::activations)));
      s.grads.assign(rep.grads.begin(), rep.grads.end());
    });
  } catch (const NotImplemented& e) {
    s.error = e.what();
    return s;
  }
  if (trace) s.trace = cluster.chrome_trace();
  return s;
}

// The model, its batch and the sizes the formulas take, in the text's letters.
struct Setup {
  const model::Model& net;
  model::Batch batch;
  std::int64_t tokens, L;
  double C, B, A, E, D;
  double block_forward;  // FLOPs of one forward of all L blocks: what checkpointing reruns
  double core;           // FLOPs of one attention core's recompute
  std::int64_t best;     // the chapter's pick, marked in the table; 0 while a TODO
  std::set<std::int64_t> ks;
};

void check_options(const Options& o) {
  if (o.layers < 1 || o.layers > 256)
    throw std::invalid_argument(fmt::format("--layers {}: use 1 to 256", o.layers));
  if (o.sequences < 1) throw std::invalid_argument("--sequences must be at least 1");
  for (std::int64_t k : o.every)
    if (k < 1 || k > o.layers)
      throw std::invalid_argument(fmt::format(
          "--every {} is outside [1, {}]: a checkpoint every k blocks of L", k, o.layers));
}

model::ModelConfig model_config(const Options& o) {
  model::ModelConfig cfg;
  cfg.d_in = 8;
  cfg.d_model = 32;
  cfg.d_ff = 32;
  cfg.n_layers = o.layers;
  cfg.n_heads = 2;
  cfg.seq_len = 8;
  cfg.d_out = 4;
  return cfg;
}

Setup make_setup(const Options& o, const model::Model& net, Checks& checks) {
  const model::ModelConfig& cfg = net.config();
  const model::Batch batch = net.make_batch(o.sequences, kBatchSeed);
  const std::int64_t tokens = batch.tokens(), L = o.layers;
  double block_forward = 0;
  for (int u = 1; u <= L; ++u) block_forward += net.unit_forward_flops(u, tokens);
  Setup s{net,
          batch,
          tokens,
          L,
          static_cast<double>(ck::block_checkpoint_bytes(net, tokens)),
          static_cast<double>(ck::block_saved_bytes(net, tokens)),
          static_cast<double>(ck::attention_core_bytes(net, tokens)),
          static_cast<double>(tokens * cfg.d_in * 4),
          static_cast<double>(tokens * cfg.d_out * 4),
          block_forward,
          ck::attention_core_recompute_flops(net, tokens),
          checks.formula([&] { return ck::best_interval(net, tokens); }).value_or(0),
          {o.every.begin(), o.every.end()}};
  if (s.ks.empty()) {
    s.ks = {1, std::min<std::int64_t>(2, L), std::max<std::int64_t>(1, std::llround(std::sqrt(L))),
            L};
    if (s.best > 0) s.ks.insert(s.best);
  }
  return s;
}

void print_header(const Options& o, const Setup& s) {
  const model::ModelConfig& cfg = s.net.config();
  fmt::print(
      "11.6 activation checkpointing: forward and backward of L = {} attention blocks on one "
      "simulated GPU\n",
      s.L);
  fmt::print("code: {}\n", code_line("11_6_checkpointing"));
  fmt::print("model: d_model {}, d_ff {}, {} heads, {} sequences of {} tokens ({} tokens); fp32\n",
             cfg.d_model, cfg.d_ff, cfg.n_heads, o.sequences, cfg.seq_len, s.tokens);
  fmt::print(
      "sizes: block unit B = {:.0f} bytes (block_saved_bytes), checkpoint C = {:.0f} "
      "(block_checkpoint_bytes),\n"
      "  attention core A = {:.0f} (attention_core_bytes), embedding input E = {:.0f}, loss "
      "gradient D = {:.0f}\n\n",
      s.B, s.C, s.A, s.E, s.D);
}

// Runs the plain step, a checkpoint every k for each k, and selective recompute.
std::vector<Step> run_steps(const Options& o, const Setup& s, Checks& checks) {
  const std::int64_t L = s.L;
  const bool trace = !o.trace.empty();
  std::vector<Step> steps;
  {
    Step plain{.name = "no checkpointing",
               .exact = s.E + static_cast<double>(L) * s.B + 2 * s.C + s.D};
    plain.units = checks.formula([&] { return ck::no_checkpoint_peak_units(L); });
    steps.push_back(run_step(
        plain, s.net, s.batch,
        [](Rank& r, const model::Model& m, std::span<const float> p, std::span<float> g,
           const model::Batch& b) { return m.forward_backward(r, p, g, b); },
        trace));
  }
  for (std::int64_t k : s.ks) {
    Step step{.name = fmt::format("every k = {}{}", k, k == s.best ? " *" : ""),
              .k = k,
              .predicted_extra = s.block_forward};
    step.exact = checks.formula(
        [&] { return checkpoint_figure::predicted_peak_bytes(L, k, s.C, s.B, s.E); });
    step.units = checks.formula([&] { return ck::checkpointed_peak_units(L, k); });
    steps.push_back(run_step(
        step, s.net, s.batch,
        [k](Rank& r, const model::Model& m, std::span<const float> p, std::span<float> g,
            const model::Batch& b) { return ck::checkpointed_forward_backward(r, m, p, g, b, k); },
        trace));
  }
  {
    Step sel{.name = "selective (core)",
             .exact = s.E + static_cast<double>(L) * (s.B - s.A) + 2 * s.C + std::max(s.A, s.D),
             .predicted_extra = static_cast<double>(L) * s.core};
    steps.push_back(run_step(
        sel, s.net, s.batch,
        [](Rank& r, const model::Model& m, std::span<const float> p, std::span<float> g,
           const model::Batch& b) { return ck::selective_forward_backward(r, m, p, g, b); },
        trace));
  }
  return steps;
}

// Every step's activation peak, units, extra FLOPs and gradients beside the formulas.
std::vector<Step> peaks_section(const Options& o, const Setup& s, Checks& checks) {
  std::vector<Step> steps = run_steps(o, s, checks);
  const Step& plain = steps.front();
  const Table table(
      "Activation peak (the ledger) beside the exact peak each step's contract states and the "
      "text's units\n"
      "model; compute beyond the plain step (the clock) beside the recompute; gradients against "
      "the plain step",
      {{"", 18, true},
       {"peak (bytes)", 13},
       {"exact", 11},
       {"", 2},
       {"units", 9},
       {"ceil(L/k)+k", 13},
       {"extra FLOPs", 14},
       {"predicted", 14},
       {"gradients", 0, true, 3}});
  for (const Step& st : steps) {
    const auto count = [](double v) { return fmt::format("{:.0f}", v); };
    const std::string units =
        st.k == 0 && &st != &plain ? "-" : (st.units ? std::to_string(*st.units) : "TODO");
    if (!st.error.empty()) {
      // Nothing measured: the formulas' cells still show, TODO while they are skeletons.
      checks.todo(st.error);
      table.row(
          {st.name, "-", cell(st.exact, count), "", "-", units, "-", count(st.predicted_extra)});
      table.line("", st.error);
      continue;
    }
    // The clock keeps seconds, so FLOPs read back from it carry rounding; the counts are integers.
    const double extra = std::round(st.flops - plain.flops);
    const bool same_grads =
        plain.error.empty() && st.grads.size() == plain.grads.size() &&
        std::memcmp(st.grads.data(), plain.grads.data(), st.grads.size() * sizeof(float)) == 0 &&
        st.loss == plain.loss;
    // The plain step is the runtime's own code: the verdict is on the chapter's.
    if (&st != &plain) {
      checks.compare(st.name + " peak", st.peak, st.exact);
      checks.compare(st.name + " extra FLOPs", extra, st.predicted_extra);
      checks.check(st.name + ": gradients differ from no checkpointing", same_grads);
    }
    table.row({st.name, count(st.peak), cell(st.exact, count),
               st.exact ? (*st.exact == st.peak ? "=" : "!") : "",
               fmt::format("{:.2f}", st.peak / s.B), units, count(extra), count(st.predicted_extra),
               &st == &plain ? "(the baseline)" : (same_grads ? "bitwise equal" : "DIFFER")});
  }
  if (s.best > 0)
    fmt::print("  * 11.6 best_interval: the k with the smallest checkpointed_peak_bytes\n");
  fmt::print(
      "  exact: plain E + L B + 2C + D; every k: tools/checkpoint predicted_peak_bytes = 11.6\n"
      "  checkpointed_peak_bytes(L, k, C, B) + E + C, less C when k does not divide L; selective:\n"
      "  E + L (B - A) + 2C + max(A, D). units = peak / B. predicted FLOPs: every k reruns each "
      "block's\n"
      "  forward once (L blocks, {:.0f}); selective reruns each block's attention core (L x "
      "{:.0f})\n",
      s.block_forward, s.core);
  return steps;
}

void recompute_fraction(const Setup& s, const Step& plain, Checks& checks) {
  if (!plain.error.empty()) return;
  const auto fraction =
      checks.formula([&] { return ck::recompute_extra_flops_fraction(s.L, s.L); });
  fmt::print(
      "recompute of every block: {:.4f} of the plain step's {:.0f} FLOPs;\n"
      "  11.6 recompute_extra_flops_fraction(L, L) = {}, a little more: the embedding and head\n"
      "  are never recomputed\n",
      s.block_forward / plain.flops, plain.flops,
      cell(fraction, [](double f) { return fmt::format("{:.4f}", f); }));
}

void reading_notes(const Setup& s) {
  fmt::print(
      "\nWhat to read in the table:\n"
      "- the peak falls from L blocks' activations to the checkpoints plus one segment's: smallest "
      "near\n"
      "  k = sqrt(L C / B), here below sqrt(L) because a checkpoint C is {:.1f}x smaller than a "
      "block B.\n"
      "  The units model counts a checkpoint as a whole block, so it overstates small k.\n"
      "- every k pays the same recompute, one extra forward of each block, about a third more "
      "compute;\n"
      "  selective recompute drops only the attention core ({:.0f}% of a block here), for far "
      "fewer FLOPs.\n"
      "- `./mgpu checkpoint --layers 32` sweeps every k on a model where C is close to B.\n",
      s.B / s.C, 100 * s.A / s.B);
}

void write_trace(const Options& o, const std::vector<Step>& steps) {
  if (o.trace.empty()) return;
  std::vector<std::pair<std::string, std::string>> traces;
  for (const Step& st : steps)
    if (st.error.empty()) traces.emplace_back(st.name, st.trace);
  write_file(o.trace, merge_chrome_traces(traces));
  fmt::print(
      "trace of the {} runs written to {} (open it in https://ui.perfetto.dev; the recomputed "
      "\"fwd\"\n"
      "spans sit inside the backward)\n",
      traces.size(), o.trace);
}

void run(const Options& o) {
  check_options(o);
  const model::Model net(model_config(o));
  Checks checks(
      "activation peaks and extra FLOPs equal the formulas, gradients equal no checkpointing");
  const Setup s = make_setup(o, net, checks);
  print_header(o, s);
  const std::vector<Step> steps = peaks_section(o, s, checks);
  fmt::print("\n");
  checks.print_verdict();
  recompute_fraction(s, steps.front(), checks);
  reading_notes(s);
  write_trace(o, steps);
}

}  // namespace

void add_11_6(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "11_6", "activation checkpointing: peak, recompute FLOPs and gradients per interval");
  sub->add_option("--layers", opts->layers, "blocks L of the model")->capture_default_str();
  sub->add_option("--every", opts->every,
                  "checkpoint intervals k to run (default 1, 2, sqrt(L), the best, L)");
  sub->add_option("--sequences", opts->sequences, "sequences in the batch")->capture_default_str();
  sub->add_option("--trace", opts->trace, "write a Chrome trace of every run to this file");
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
