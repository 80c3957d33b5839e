// `mgpu demo 11_7_cp`: the chapter's ring attention (context parallelism) on c simulated ranks,
// for several sequence lengths and c = 1, 2, 4, 8. For each it measures what one rank keeps
// between the passes (the ledger), what it sends (the meter) and how long one layer's attention
// takes forward and backward (the clock), beside the chapter's formulas; then the compute each
// rank is charged under the contiguous and the zig-zag split of a causal sequence.
#include "common.hpp"
#include "demo.hpp"
#include "table.hpp"

#include "11_7_3d_and_experts/context_parallel.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::demo {

namespace {

namespace cx = mgpu::context;
using model::MatIn;
using model::MatrixRM;

struct Options {
  std::vector<std::int64_t> seqs{256, 512, 1024};
  std::vector<int> cps{1, 2, 4, 8};
  std::int64_t width = 32;  // hd, the inner width of the attention core
  std::int64_t heads = 4;
  double flops = 3e10;
  double bandwidth = 5e8;
};

// What one rank saw in one forward and one backward pass of the attention core.
struct Seen {
  double saved = 0;          // Category::activations held between the passes
  double sent_forward = 0;   // bytes sent by the forward
  double sent_backward = 0;  // bytes sent by the backward
  double flops_forward = 0;  // compute charged by the forward
  double seconds = 0;        // forward + backward, virtual time
  double worst_error = 0;    // largest |difference| from the unsplit attention, output and dq
};

MatrixRM random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  MatrixRM m(rows, cols);
  model::Rng rng(seed);
  rng.fill_normal(std::span<float>(m.data(), static_cast<std::size_t>(m.size())), 1.0);
  return m;
}

// The rows of `full` (one sequence) at `positions`, in that order.
MatrixRM rows_at(MatIn full, const std::vector<std::int64_t>& positions) {
  MatrixRM out(static_cast<Eigen::Index>(positions.size()), full.cols());
  for (std::size_t t = 0; t < positions.size(); ++t)
    out.row(static_cast<Eigen::Index>(t)) = full.row(positions[t]);
  return out;
}

struct Unsplit {
  MatrixRM q, k, v, d_out, out, dq;
};

// One sequence of s tokens and the runtime's unsplit causal attention of it, for the check.
Unsplit make_unsplit(const Options& o, std::int64_t seq) {
  Unsplit u{random_matrix(seq, o.width, 1), random_matrix(seq, o.width, 2),
            random_matrix(seq, o.width, 3), random_matrix(seq, o.width, 4),
            MatrixRM(seq, o.width),         MatrixRM(seq, o.width)};
  MatrixRM p(seq * o.heads, seq), dk(seq, o.width), dv(seq, o.width);
  model::attention_core_forward(u.q, u.k, u.v, seq, o.heads, true, p, u.out);
  model::attention_core_backward(u.q, u.k, u.v, p, u.d_out, seq, o.heads, u.dq, dk, dv);
  return u;
}

// Ring attention over c ranks on one sequence; every rank's measurements, index = rank.
std::vector<Seen> run_ring(const Options& o, const Unsplit& u, std::int64_t seq, int c,
                           cx::Split split) {
  std::vector<Seen> seen(static_cast<std::size_t>(c));
  Cluster cluster(slow_cluster(c, o.flops, o.bandwidth));
  const double rate = cluster.config().flops_per_second;
  const cx::CpShape shape{seq, o.heads, split};
  cluster.run([&](Rank& r) {
    Seen& s = seen[static_cast<std::size_t>(r.id())];
    const auto pos = cx::cp_positions(seq, c, r.id(), split);
    const MatrixRM q = rows_at(u.q, pos), k = rows_at(u.k, pos), v = rows_at(u.v, pos),
                   d_out = rows_at(u.d_out, pos);
    MatrixRM out(q.rows(), q.cols()), dq(q.rows(), q.cols()), dk(q.rows(), q.cols()),
        dv(q.rows(), q.cols());
    const cx::RingCache cache = cx::ring_attention_forward(r, r.world(), shape, q, k, v, out);
    s.saved = static_cast<double>(r.memory().current(Category::activations));
    s.sent_forward = static_cast<double>(r.traffic().op(OpKind::send).bytes_sent);
    s.flops_forward = r.clock().compute_time() * rate;
    cx::ring_attention_backward(r, r.world(), shape, cache, d_out, dq, dk, dv);
    s.sent_backward = static_cast<double>(r.traffic().op(OpKind::send).bytes_sent) - s.sent_forward;
    s.seconds = r.clock().end_time();
    s.worst_error = std::max((out - rows_at(u.out, pos)).cwiseAbs().maxCoeff(),
                             (dq - rows_at(u.dq, pos)).cwiseAbs().maxCoeff());
  });
  return seen;
}

void check(const Options& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.seqs.empty() || o.cps.empty()) fail("--seqs and --cps need at least one value each");
  if (o.heads < 1 || o.width < 1 || o.width % o.heads != 0)
    fail(fmt::format("--width {} must be a positive multiple of --heads {}", o.width, o.heads));
  for (int c : o.cps)
    if (c < 1) fail(fmt::format("--cps {}: every group size must be at least 1", c));
  for (std::int64_t s : o.seqs)
    for (int c : o.cps)
      if (s < 1 || s % (2 * c) != 0)
        fail(fmt::format(
            "--seqs {} is not divisible by 2 x {} (the zig-zag split's 2c chunks): use lengths "
            "that are multiples of {}",
            s, c, 2 * *std::max_element(o.cps.begin(), o.cps.end())));
}

void print_header(const Options& o) {
  fmt::print(
      "11.7 context parallelism: ring attention on c simulated ranks, one causal sequence\n");
  fmt::print("code: {}\n", code_line("11_7_3d_and_experts"));
  fmt::print(
      "attention core: width hd = {}, {} heads, fp32; cost model: {:.3g} FLOP/s per rank, links "
      "{:.3g} B/s\n",
      o.width, o.heads, o.flops, o.bandwidth);
  fmt::print(
      "per rank: saved = activations between the passes (ledger) beside "
      "cp_saved_activation_bytes_per_rank;\n"
      "sent = bytes forward + backward (meter) beside cp_forward_bytes_per_rank + "
      "cp_backward_bytes_per_rank;\n"
      "time = one layer's attention forward + backward, slowest rank (clock); zig-zag split\n\n");
}

// Equal within rounding: the formulas are in doubles, the meter and ledger in whole bytes.
double tolerance(const std::optional<double>& formula) {
  return formula ? 1e-9 * std::max(1.0, *formula) : 0;
}

// Ring attention at every s and c (zig-zag): saved bytes, bytes sent and time per rank beside
// the formulas, and the largest difference from unsplit attention.
void sequence_length_section(const Options& o, Checks& checks) {
  std::vector<std::string> fastest;  // per s: the c whose layer took least time
  const Table table("", {{"s", 6},
                         {"c", 4},
                         {"saved", 12},
                         {"formula", 12},
                         {"sent", 12},
                         {"formula", 12},
                         {"time", 14},
                         {"max |diff|", 12}});
  for (std::int64_t seq : o.seqs) {
    const Unsplit u = make_unsplit(o, seq);
    double best_seconds = 0;
    int best_c = 0;
    for (int c : o.cps) {
      const auto saved_formula = checks.formula([&] {
        return cx::cp_saved_activation_bytes_per_rank(1, seq, o.width, o.heads, c,
                                                      cx::Split::zigzag);
      });
      const auto sent_formula = checks.formula([&] {
        return cx::cp_forward_bytes_per_rank(1, seq, o.width, c, cx::Split::zigzag) +
               cx::cp_backward_bytes_per_rank(1, seq, o.width, c, cx::Split::zigzag);
      });
      std::vector<Seen> seen;
      if (!checks.run([&] { seen = run_ring(o, u, seq, c, cx::Split::zigzag); })) {
        table.row({std::to_string(seq), std::to_string(c), "TODO", cell(saved_formula, human_bytes),
                   "TODO", cell(sent_formula, human_bytes), "TODO"});
        continue;
      }
      double seconds = 0, error = 0;
      for (std::size_t r = 0; r < seen.size(); ++r) {
        const Seen& s = seen[r];
        seconds = std::max(seconds, s.seconds);
        error = std::max(error, s.worst_error);
        const std::string where = fmt::format("s = {}, c = {}, rank {}", seq, c, r);
        checks.compare(where + " saved", s.saved, saved_formula, tolerance(saved_formula));
        checks.compare(where + " sent", s.sent_forward + s.sent_backward, sent_formula,
                       tolerance(sent_formula));
      }
      checks.check(
          fmt::format("s = {}, c = {}: differs from unsplit attention by {:.1e}", seq, c, error),
          error < 1e-4);
      if (best_c == 0 || seconds < best_seconds) {
        best_seconds = seconds;
        best_c = c;
      }
      const Seen& r0 = seen.front();
      table.row({std::to_string(seq), std::to_string(c), human_bytes(r0.saved),
                 cell(saved_formula, human_bytes), human_bytes(r0.sent_forward + r0.sent_backward),
                 cell(sent_formula, human_bytes), us(seconds), fmt::format("{:.1e}", error)});
    }
    if (best_c > 0) fastest.push_back(fmt::format("s = {}: c = {}", seq, best_c));
  }
  std::string fastest_text;
  for (const std::string& f : fastest) fastest_text += (fastest_text.empty() ? "" : ", ") + f;
  fmt::print(
      "  The saved bytes fall as 1/c at every s; the bytes sent per rank, (c - 1)/c of 6 s hd 4,\n"
      "  barely grow with c: each rank's keys and values go c - 1 hops forward, and with their\n"
      "  gradients backward. A block's compute grows with (s/c)^2 and its bytes with s/c, so the\n"
      "  hops hide behind the compute only for long sequences; fastest layer: {}.\n\n",
      fastest_text.empty() ? std::string("TODO") : fastest_text);
}

double slowest(const std::vector<Seen>& seen) {
  return std::max_element(seen.begin(), seen.end(),
                          [](const Seen& a, const Seen& b) { return a.seconds < b.seconds; })
      ->seconds;
}

// Forward compute per rank under the contiguous and the zig-zag split, beside cp_attention_flops;
// `balance` gets whether zig-zag evens the work out and contiguous does not.
void causal_balance_section(const Options& o, Checks& checks, Checks& balance) {
  const std::int64_t seq = o.seqs.back();
  const int c = *std::max_element(o.cps.begin(), o.cps.end());
  const Table table(
      fmt::format("Causal balance at s = {}, c = {}: forward compute charged per rank (clock), "
                  "beside cp_attention_flops",
                  seq, c),
      {{"rank", 6}, {"contiguous", 16}, {"formula", 16}, {"zig-zag", 16}, {"formula", 16}});
  const Unsplit u = make_unsplit(o, seq);
  std::vector<Seen> by_split[2];
  std::string error;
  if (!checks.run(
          [&] {
            by_split[0] = run_ring(o, u, seq, c, cx::Split::contiguous);
            by_split[1] = run_ring(o, u, seq, c, cx::Split::zigzag);
          },
          &error))
    balance.todo(error);
  const auto gflop = [](double v) { return fmt::format("{:.4g}", v); };
  for (int i = 0; i < c; ++i) {
    const auto f_contig = checks.formula(
        [&] { return cx::cp_attention_flops(1, seq, o.width, c, i, cx::Split::contiguous); });
    const auto f_zig = checks.formula(
        [&] { return cx::cp_attention_flops(1, seq, o.width, c, i, cx::Split::zigzag); });
    const std::optional<double> formulas[2] = {f_contig, f_zig};
    std::string measured[2] = {"TODO", "TODO"};
    for (int s = 0; s < 2; ++s) {
      if (by_split[s].empty()) continue;
      const double flops = by_split[s][static_cast<std::size_t>(i)].flops_forward;
      measured[s] = gflop(flops);
      checks.compare(fmt::format("{} rank {} forward FLOPs", s == 0 ? "contiguous" : "zig-zag", i),
                     flops, formulas[s], tolerance(formulas[s]));
    }
    table.row(
        {std::to_string(i), measured[0], cell(f_contig, gflop), measured[1], cell(f_zig, gflop)});
  }
  if (by_split[0].empty()) return;
  const double contiguous_ratio =
      by_split[0].back().flops_forward / by_split[0].front().flops_forward;
  double lo = by_split[1].front().flops_forward, hi = lo;
  for (const Seen& s : by_split[1]) {
    lo = std::min(lo, s.flops_forward);
    hi = std::max(hi, s.flops_forward);
  }
  const double zigzag_ratio = hi / lo;
  fmt::print(
      "  contiguous: the last rank does {:.2f}x the first's work (about 2c - 1 = {}: its "
      "queries see\n"
      "  every earlier key, the first rank's only its own); zig-zag: max/min {:.2f}, every "
      "rank pairs an\n"
      "  early chunk with a late one. The ring waits for its slowest rank, so the contiguous "
      "split's\n"
      "  layer takes {} against the zig-zag's {}.\n",
      contiguous_ratio, 2 * c - 1, zigzag_ratio, us(slowest(by_split[0])),
      us(slowest(by_split[1])));
  balance.check(fmt::format("zig-zag max/min {:.4f}", zigzag_ratio),
                std::abs(zigzag_ratio - 1) < 1e-9);
  balance.check(fmt::format("contiguous last/first {:.2f}", contiguous_ratio),
                c == 1 || contiguous_ratio > 1.5);
}

void run(const Options& o) {
  check(o);
  print_header(o);
  Checks checks(
      "equal to the unsplit attention, saved bytes, bytes sent and compute equal the formulas at "
      "every s and c");
  Checks balance("zig-zag balanced, contiguous not");
  sequence_length_section(o, checks);
  causal_balance_section(o, checks, balance);
  fmt::print("\n");
  checks.print_verdict();
  balance.print_verdict();
}

}  // namespace

void add_11_7_cp(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "11_7_cp",
      "context parallelism: ring attention's memory, bytes and time against s, causal balance");
  sub->add_option("--seqs", opts->seqs, "sequence lengths, each a multiple of 2 x every c")
      ->capture_default_str();
  sub->add_option("--cps", opts->cps, "context-parallel group sizes c")->capture_default_str();
  sub->add_option("--width", opts->width, "inner width hd of the attention core")
      ->capture_default_str();
  sub->add_option("--heads", opts->heads, "heads (divide --width)")->capture_default_str();
  sub->add_option("--flops", opts->flops, "compute rate of a rank, FLOP/s")->capture_default_str();
  sub->add_option("--bandwidth", opts->bandwidth, "link bandwidth inside a node, bytes/s")
      ->capture_default_str();
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
