// Runs the course model's step with and without checkpointing on one simulated GPU and reads the
// activation peak off the ledger and the recomputed work off the clock, as the 11.6 tests do.
#include "checkpoint/figure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "11_6_checkpointing/checkpointing.hpp"
#include "11_6_checkpointing/formulas.hpp"
#include "mgpu/cluster.hpp"

namespace mgpu::checkpoint_figure {

namespace {

// FFN blocks without attention, d_ff tiny against d_model: a block saves its input (C) plus its
// two d_ff-wide internals, so B = C (1 + 2 d_ff / d_model) = 1.0625 C, close to the units model's
// "a checkpoint costs as much as a block". Narrow so that L = 64 with every k runs in seconds.
model::ModelConfig course_model(std::int64_t layers) {
  model::ModelConfig c;
  c.d_in = 1;
  c.d_model = 32;
  c.d_ff = 1;
  c.n_layers = layers;
  c.n_heads = 1;
  c.seq_len = 4;
  c.d_out = 1;
  c.attention = false;
  return c;
}

constexpr std::int64_t kSequences = 2;
constexpr std::uint64_t kBatchSeed = 3, kParamSeed = 11;

struct Step {
  std::size_t peak = 0;
  double flops = 0;
};

// One step on a fresh rank: plain (k = 0) or with a checkpoint every k blocks.
Step run_step(const model::Model& net, const model::Batch& batch, std::int64_t k) {
  Step s;
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), kParamSeed);
    r.memory().reset_peaks();
    const double t0 = r.clock().compute_time();
    if (k == 0)
      net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
    else
      checkpointing::checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(),
                                                   batch, k);
    s.flops = (r.clock().compute_time() - t0) * r.config().flops_per_second;
    s.peak = r.memory().peak(Category::activations);
    if (r.memory().current(Category::activations) != 0)
      throw std::runtime_error(fmt::format(
          "the step with k = {} left {} bytes of activations allocated; every buffer it "
          "allocates must be freed by the end of the backward",
          k, r.memory().current(Category::activations)));
  });
  return s;
}

// Every k in [1, L] at which `value` is smallest (exact comparison: both are integers or sums of
// integers well below 2^53).
template <class F>
std::vector<std::int64_t> argmins(std::int64_t layers, F value) {
  std::vector<std::int64_t> out;
  double best = 0;
  for (std::int64_t k = 1; k <= layers; ++k) {
    const double v = value(k);
    if (out.empty() || v < best) {
      best = v;
      out = {k};
    } else if (v == best) {
      out.push_back(k);
    }
  }
  return out;
}

struct Sizes {
  double C, B, E;
};

Sizes sizes(const model::Model& net, std::int64_t tokens) {
  return {static_cast<double>(checkpointing::block_checkpoint_bytes(net, tokens)),
          static_cast<double>(checkpointing::block_saved_bytes(net, tokens)),
          static_cast<double>(tokens * net.config().d_in) * sizeof(float)};
}

}  // namespace

void validate(const FigureOptions& o) {
  if (o.layers < 1 || o.layers > kMaxLayers)
    throw UsageError(
        fmt::format("--layers {} is outside [1, {}]: give the model's blocks, e.g. --layers 32",
                    o.layers, kMaxLayers));
  if (o.k && (*o.k < 1 || *o.k > o.layers))
    throw UsageError(fmt::format(
        "--every {} is outside [1, {}]: a checkpoint every k blocks needs 1 <= k <= --layers; "
        "use e.g. --every {}, or leave --every out to try every k",
        *o.k, o.layers, std::max<std::int64_t>(1, std::llround(std::sqrt(o.layers)))));
}

double predicted_peak_bytes(std::int64_t layers, std::int64_t k, double checkpoint_bytes,
                            double block_bytes, double embed_bytes) {
  const double formula =
      checkpointing::checkpointed_peak_bytes(layers, k, checkpoint_bytes, block_bytes);
  const bool divides = layers % k == 0;
  return formula + embed_bytes + (divides ? checkpoint_bytes : 0.0);
}

namespace {

// The k to run: --every's, or every k up to kFullSweepLayers blocks, or beyond that 1, L and the
// k within 3 of the predicted bests (and `f.capped` set).
std::set<std::int64_t> ks_to_run(Figure& f) {
  const FigureOptions& o = f.options;
  const std::int64_t L = o.layers;
  std::set<std::int64_t> ks;
  if (o.k) {
    ks.insert(*o.k);
  } else if (L <= kFullSweepLayers) {
    for (std::int64_t k = 1; k <= L; ++k) ks.insert(k);
  } else {
    f.capped = true;
    ks.insert(1);
    ks.insert(L);
    for (const auto& best : {f.best_units, f.best_predicted})
      for (std::int64_t k : best)
        for (std::int64_t d = -3; d <= 3; ++d)
          if (k + d >= 1 && k + d <= L) ks.insert(k + d);
  }
  return ks;
}

// One run per depth, at the k the exact formula says is best: the sweep shows how the best
// peak grows with L, and every k of every L would cost L^2 / 2 runs.
void run_sweep(Figure& f) {
  const std::int64_t L = f.options.layers;
  const std::int64_t step = std::max<std::int64_t>(1, (L + 47) / 48);
  for (std::int64_t l = 1; l <= L; l += step) {
    const model::Model m(course_model(l));
    const model::Batch bl = m.make_batch(kSequences, kBatchSeed);
    const Sizes sl = sizes(m, bl.tokens());
    const std::int64_t k = argmins(l, [&](std::int64_t kk) {
                             return predicted_peak_bytes(l, kk, sl.C, sl.B, sl.E);
                           }).front();
    const Step st = run_step(m, bl, k);
    const std::int64_t kb = checkpointing::best_checkpoint_interval(l);
    f.sweep.push_back(
        {l, k, static_cast<double>(st.peak) / sl.B, checkpointing::checkpointed_peak_units(l, kb)});
    if (l + step > L && l != L) l = L - step;  // always end on L itself
  }
}

}  // namespace

Figure run_figure(const FigureOptions& o) {
  validate(o);
  Figure f;
  f.options = o;
  const std::int64_t L = o.layers;
  const model::Model net(course_model(L));
  const model::Batch batch = net.make_batch(kSequences, kBatchSeed);
  f.tokens = batch.tokens();
  const Sizes s = sizes(net, f.tokens);
  f.checkpoint_bytes = s.C;
  f.block_bytes = s.B;
  f.embed_bytes = s.E;

  // The predictions first: on a student build an unwritten formula stops here, before any run.
  f.best_units = argmins(L, [&](std::int64_t k) {
    return static_cast<double>(checkpointing::checkpointed_peak_units(L, k));
  });
  f.best_predicted =
      argmins(L, [&](std::int64_t k) { return predicted_peak_bytes(L, k, s.C, s.B, s.E); });
  f.chapter_best_units = checkpointing::best_checkpoint_interval(L);
  f.chapter_best_bytes = checkpointing::best_checkpoint_interval_bytes(L, s.C, s.B);

  double block_flops = 0;
  for (int u = 1; u <= L; ++u) block_flops += net.unit_forward_flops(u, f.tokens);
  f.predicted_extra_flops = block_flops;
  f.predicted_extra_fraction = checkpointing::recompute_extra_flops_fraction(L, L) * block_flops /
                               net.forward_flops(f.tokens);

  const std::set<std::int64_t> ks = ks_to_run(f);
  const Step plain = run_step(net, batch, 0);
  f.plain_peak_bytes = plain.peak;
  f.plain_flops = plain.flops;
  for (std::int64_t k : ks) {
    const Step st = run_step(net, batch, k);
    f.rows.push_back({k, st.peak, predicted_peak_bytes(L, k, s.C, s.B, s.E),
                      checkpointing::checkpointed_peak_units(L, k), st.flops - plain.flops});
  }
  std::size_t best_peak = f.rows.front().peak_bytes;
  for (const Row& r : f.rows) best_peak = std::min(best_peak, r.peak_bytes);
  for (const Row& r : f.rows)
    if (r.peak_bytes == best_peak) f.best_measured.push_back(r.k);

  if (o.sweep) run_sweep(f);
  return f;
}

namespace {

std::string list(const std::vector<std::int64_t>& ks) {
  std::string out;
  for (std::size_t i = 0; i < ks.size(); ++i) out += (i ? ", " : "") + std::to_string(ks[i]);
  return out;
}

bool contains(const std::vector<std::int64_t>& ks, std::int64_t k) {
  return std::find(ks.begin(), ks.end(), k) != ks.end();
}

}  // namespace

namespace {

// One row per k run, the plain step's row, and what the columns mean.
std::string text_table(const Figure& f) {
  const std::int64_t L = f.options.layers;
  const double B = f.block_bytes;
  std::string out =
      fmt::format("  {:>5}  {:>12}  {:>7}  {:>15}  {:>11}  {:>11}\n", "k", "peak (bytes)", "units",
                  "exact (bytes)", "ceil(L/k)+k", "extra FLOPs");
  for (const Row& r : f.rows) {
    std::string mark;
    if (contains(f.best_measured, r.k)) mark += " *";
    if (contains(f.best_predicted, r.k)) mark += " p";
    if (contains(f.best_units, r.k)) mark += " u";
    const bool agrees = static_cast<double>(r.peak_bytes) == r.predicted_bytes;
    out += fmt::format("  {:>5}  {:>12}  {:>7.2f}  {:>13.0f} {}  {:>11}  {:>11.0f}{}\n", r.k,
                       r.peak_bytes, static_cast<double>(r.peak_bytes) / B, r.predicted_bytes,
                       agrees ? '=' : '!', r.units_model, r.extra_flops, mark);
  }
  out += fmt::format("  {:>5}  {:>12}  {:>7.2f}  {:>15}  {:>11}  {:>11}\n", "none",
                     f.plain_peak_bytes, static_cast<double>(f.plain_peak_bytes) / B, "", L, 0);
  out +=
      "  peak: the ledger's activation peak; units = peak / B; exact: 11.6\n"
      "  checkpointed_peak_bytes(L, k, C, B) + E + C, less C when k does not divide L (the peak\n"
      "  checkpointed_forward_backward documents), \"=\" where the ledger agrees to the byte;\n"
      "  none: plain Model::forward_backward, L units in the units model\n"
      "  * best measured, p best by the exact peak, u best by ceil(L/k)+k\n";
  if (f.capped)
    out += fmt::format(
        "  (L > {}: measured {} of the {} values of k: 1, L and those within 3 of the "
        "predicted bests)\n",
        kFullSweepLayers, f.rows.size(), L);
  return out;
}

// The recomputed FLOPs the clock shows against the prediction.
std::string text_recompute(const Figure& f) {
  const std::int64_t L = f.options.layers;
  // Clock differences carry rounding: compare the rows' extra FLOPs to a relative 1e-9.
  double lo = f.rows.front().extra_flops, hi = lo;
  for (const Row& r : f.rows) {
    lo = std::min(lo, r.extra_flops);
    hi = std::max(hi, r.extra_flops);
  }
  const bool same = hi - lo <= 1e-9 * std::max(1.0, std::fabs(hi));
  return fmt::format(
      "Recompute: {} {:.0f} extra FLOPs on the clock, predicted {:.0f} (a second forward of\n"
      "  each of the L blocks), {:.4f} of the plain step's {:.0f}; 11.6\n"
      "  recompute_extra_flops_fraction(L, L) = {:.4f}, {:.4f} with the embedding and head,\n"
      "  which are never recomputed\n",
      same ? (f.rows.size() > 1 ? "every k costs" : "costs") : "up to", hi, f.predicted_extra_flops,
      hi / f.plain_flops, f.plain_flops, mgpu::checkpointing::recompute_extra_flops_fraction(L, L),
      f.predicted_extra_fraction);
}

}  // namespace

std::string render_text(const Figure& f) {
  const std::int64_t L = f.options.layers;
  const double B = f.block_bytes;
  std::string out = fmt::format(
      "mgpu checkpoint: L = {} blocks, a checkpoint every k blocks, one step on the simulated "
      "cluster\n"
      "  {} FFN blocks (d_model 32, d_ff 1, no attention), {} tokens; one GPU, fresh for each k\n"
      "  block unit B = {:.0f} bytes (11.6 block_saved_bytes), checkpoint C = {:.0f} bytes\n"
      "  (block_checkpoint_bytes), embedding input E = {:.0f} bytes\n\n",
      L, L, f.tokens, B, f.checkpoint_bytes, f.embed_bytes);
  out += text_table(f);
  const auto& at = [&](std::int64_t k) -> const Row* {
    for (const Row& r : f.rows)
      if (r.k == k) return &r;
    return nullptr;
  };
  const Row* best = at(f.best_measured.front());
  out +=
      fmt::format("\nBest k measured: {} (peak {} bytes = {:.2f} units{})\n", list(f.best_measured),
                  best->peak_bytes, static_cast<double>(best->peak_bytes) / B,
                  f.rows.size() == 1 ? "; only this k was run" : "");
  out += fmt::format(
      "Best k predicted: {} by the exact peak; {} by ceil(L/k)+k = {} units, 2 sqrt(L) = {:.2f}\n"
      "  (11.6 best_checkpoint_interval(L) = {}, best_checkpoint_interval_bytes(L, C, B) = {}:\n"
      "  the smallest k of each formula's ties, the second without the E and C above)\n",
      list(f.best_predicted), list(f.best_units),
      mgpu::checkpointing::checkpointed_peak_units(L, f.best_units.front()),
      2 * std::sqrt(static_cast<double>(L)), f.chapter_best_units, f.chapter_best_bytes);

  out += text_recompute(f);
  return out;
}

}  // namespace mgpu::checkpoint_figure
