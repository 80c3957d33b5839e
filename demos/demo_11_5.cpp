// `mgpu demo 11_5`: the chapter's three pipeline schedules (GPipe, 1F1B, interleaved 1F1B) run
// side by side through its executor at the same p and m, with each one's bubble, activations in
// flight per stage and step time printed beside the 11.5 formulas. One step of one schedule is
// tools/pipeline's run_figure; this demo runs it three times and compares.
#include "common.hpp"
#include "demo.hpp"
#include "table.hpp"

#include "11_5_pipeline/formulas.hpp"
#include "pipeline/figure.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::demo {

namespace {

namespace pf = mgpu::pipeline_figure;
namespace pl = mgpu::pipeline;

struct Options {
  int stages = 4;
  int micro_batches = 8;
  int chunks = 2;
  std::string trace;
};

// The run_figure tests' tolerance: the embedding and head make the first and last stage
// slightly dearer than the others, which the formula, written for equal stages, leaves out.
constexpr double kBubbleTolerance = 0.002;
// In-flight counts are read off the ledger as a peak divided by one micro-batch's bytes; with
// chunks, one chunk-micro-batch is a mean over chunks that differ by the embedding or head, and
// the stage that computes the loss also keeps its gradient: a relative tolerance.
constexpr double kInFlightTolerance = 0.02;

struct ScheduleRun {
  pf::ScheduleKind kind = pf::ScheduleKind::gpipe;
  int chunks = 1;
  std::string error;  // not implemented, or why this schedule cannot run at these p and m
  std::vector<std::string> todos;  // formulas still skeletons ("not implemented: ...")
  std::optional<pf::Figure> figure;
  std::optional<double> formula;            // bubble formula, nullopt while a TODO
  std::vector<std::optional<double>> want;  // in flight per stage, nullopt while a TODO
  double predicted_step = 0;                // 0 while a TODO
};

// Megatron's warm-up on stage s plus the one forward that starts the steady state: the forwards
// that fit before stage s's first gradient can be back, min(v m, 2 (p-1-s) + (v-1) p + 1).
// The chapter has no formula function for it (in_flight_micro_batches covers GPipe and 1F1B).
std::int64_t interleaved_in_flight(int p, int m, int v, int s) {
  const std::int64_t vm = static_cast<std::int64_t>(v) * m;
  const std::int64_t warm =
      std::min<std::int64_t>(vm, 2 * (p - 1 - s) + static_cast<std::int64_t>(v - 1) * p);
  return std::min(vm, warm + 1);
}

ScheduleRun run_schedule(const Options& o, pf::ScheduleKind kind) {
  ScheduleRun run;
  run.kind = kind;
  run.chunks = kind == pf::ScheduleKind::interleaved ? o.chunks : 1;
  const int p = o.stages, m = o.micro_batches, v = run.chunks;
  pf::FigureOptions fo;
  fo.schedule = kind;
  fo.stages = p;
  fo.micro_batches = m;
  fo.chunks = v;
  try {
    run.figure = pf::run_figure(fo, !o.trace.empty());
  } catch (const NotImplemented& e) {
    run.error = e.what();
    run.todos.push_back(e.what());
  } catch (const pf::UsageError& e) {
    run.error = std::string("not run: ") + e.what();
    return run;
  }
  try {
    if (kind == pf::ScheduleKind::zb_h1 || kind == pf::ScheduleKind::zb_h2) {
      // run_figure evaluated zb_h1_bubble_seconds (zb_h2_bubble_seconds) for the block's F, B
      // and W seconds.
      if (run.figure) run.formula = run.figure->formula.value;
    } else {
      run.formula = kind == pf::ScheduleKind::interleaved ? pl::interleaved_bubble_fraction(p, m, v)
                                                          : pl::gpipe_bubble_fraction(p, m);
    }
  } catch (const NotImplemented& e) {
    run.todos.push_back(e.what());
  }
  for (int s = 0; s < p; ++s) {
    try {
      switch (kind) {
        case pf::ScheduleKind::gpipe:
          run.want.emplace_back(
              static_cast<double>(pl::in_flight_micro_batches(pl::Schedule::gpipe, p, m, s)));
          break;
        case pf::ScheduleKind::one_f_one_b:
          run.want.emplace_back(
              static_cast<double>(pl::in_flight_micro_batches(pl::Schedule::one_f_one_b, p, m, s)));
          break;
        case pf::ScheduleKind::interleaved:
          run.want.emplace_back(static_cast<double>(interleaved_in_flight(p, m, v, s)));
          break;
        case pf::ScheduleKind::zb_h1:  // the bound of its contract: 1F1B's peak on every stage
          run.want.emplace_back(static_cast<double>(std::min(m, p)));
          break;
        case pf::ScheduleKind::zb_h2:  // its contract: min(m, 2p - 1) on every stage
          run.want.emplace_back(static_cast<double>(std::min(m, 2 * p - 1)));
          break;
      }
    } catch (const NotImplemented& e) {
      run.want.emplace_back(std::nullopt);
      run.todos.push_back(e.what());
    }
  }
  // Step time: (v m + p - 1) slots of 1/v of a stage's work per micro-batch, the slowest stage's
  // measured compute giving that work. For v = 1 it is pipeline_step_seconds with the backward
  // at twice the forward (the runtime charges unit_backward so).
  if (run.figure && kind == pf::ScheduleKind::zb_h1) {
    const pf::Figure& f = *run.figure;
    if (f.wait.value)
      run.predicted_step = m * (f.t_forward + f.t_input + f.t_weight) + *f.wait.value;
  } else if (run.figure && kind == pf::ScheduleKind::zb_h2) {
    // One step on its own waits the fill, or the wait inside a stage if that is longer.
    const pf::Figure& f = *run.figure;
    if (f.inner_wait.value)
      run.predicted_step = m * (f.t_forward + f.t_input + f.t_weight) +
                           std::max((p - 1) * f.t_forward, *f.inner_wait.value);
  } else if (run.figure) {
    double busy = 0;
    for (const pf::StageResult& st : run.figure->stages) busy = std::max(busy, st.busy_seconds);
    const double fwd = busy / (3.0 * m);
    try {
      run.predicted_step = v == 1 ? pl::pipeline_step_seconds(p, m, fwd, 2 * fwd)
                                  : (static_cast<double>(v) * m + p - 1) * 3 * fwd / v;
    } catch (const NotImplemented& e) {
      run.todos.push_back(e.what());
    }
  }
  return run;
}

std::string counts(const std::vector<double>& values) {
  std::string out;
  for (double x : values)
    out += fmt::format("{}{:g}", out.empty() ? "" : " ", std::round(x * 100) / 100);
  return out;
}

// The longest wait inside one stage's part of the step, per schedule: what each would lose per
// step if steps ran back to back (which needs the optimizer step validated afterwards, not
// synchronised first). ZB-H2's formula is zb_h2_bubble_seconds; beside it Qi et al.'s closed
// form for any pass costs, (p-1)(F+B-2W), which holds once m >= 2p - 1.
void print_inner_waits(const std::vector<ScheduleRun>& runs) {
  std::string line;
  for (const ScheduleRun& r : runs) {
    if (!r.figure || r.kind == pf::ScheduleKind::interleaved) continue;
    double longest = 0;
    for (const pf::StageResult& st : r.figure->stages)
      longest = std::max(longest, st.inner_wait_seconds);
    line +=
        fmt::format("{}{} {}", line.empty() ? "" : ", ", pf::schedule_title(r.kind), us(longest));
    if (r.kind == pf::ScheduleKind::zb_h2) {
      const pf::Figure& f = *r.figure;
      const int p = f.options.stages;
      line += f.inner_wait.value
                  ? fmt::format(" (formula max(0, 2p-1-m) F = {}", us(*f.inner_wait.value))
                  : std::string(" (formula: TODO zb_h2_bubble_seconds");
      if (f.options.micro_batches >= 2 * p - 1)
        line += fmt::format("; (p-1)(F+B-2W) = {}",
                            us((p - 1) * (f.t_forward + f.t_input - 2 * f.t_weight)));
      line += ")";
    }
  }
  if (!line.empty())
    fmt::print(
        "\nlongest wait inside one stage's part of the step (lost per step when steps run back "
        "to back,\nwhich needs the optimizer step validated afterwards instead of synchronising "
        "all stages first):\n  {}\n",
        line);
}

void print_header(const Options& o) {
  fmt::print(
      "11.5 pipeline parallelism: GPipe, 1F1B, interleaved 1F1B, ZB-H1 and ZB-H2, one step each, "
      "p = {} stages, m = {} micro-batches\n",
      o.stages, o.micro_batches);
  fmt::print("code: {}\n", code_line("11_5_pipeline"));
  fmt::print(
      "model: one equal FFN block per stage (per chunk for interleaved, v = {}, each 1/v as wide, "
      "so a stage's\n"
      "  work is the same in all of them); 1 GFLOP/s per stage, free links: only the schedule "
      "makes a stage wait\n",
      o.chunks);
  fmt::print("each step runs {} schedule through {} run_pipeline (tools/pipeline's run_figure)\n\n",
             whose(), whose());
}

// One schedule's cells in the table, and whether its numbers equal the formulas.
struct Line {
  std::string name, bubble, formula, formula_text, ledger, program, want, step, predicted, error;
};

Line make_line(const ScheduleRun& r, Checks& checks) {
  for (const std::string& t : r.todos) checks.todo(t);
  Line l;
  l.name = r.kind == pf::ScheduleKind::interleaved ? fmt::format("interleaved, v = {}", r.chunks)
                                                   : pf::schedule_title(r.kind);
  const bool h2 = r.kind == pf::ScheduleKind::zb_h2;
  const bool zb = r.kind == pf::ScheduleKind::zb_h1 || h2;
  l.formula_text = r.kind == pf::ScheduleKind::interleaved ? "(p-1)/(vm+p-1)"
                   : h2                                    ? "max((p-1)F, inner)/step"
                   : zb                                    ? "(p-1)(F+B-W)/step"
                                                           : "(p-1)/(m+p-1)";
  const std::string in_flight_text = r.kind == pf::ScheduleKind::gpipe         ? "m"
                                     : r.kind == pf::ScheduleKind::one_f_one_b ? "min(m, p-stage)"
                                     : h2                                      ? "min(m, 2p-1)"
                                     : zb                                      ? "min(m, p)"
                                                                               : "warm-up + 1";
  std::vector<double> want;
  bool have_want = true;
  for (const auto& w : r.want) {
    have_want = have_want && w.has_value();
    want.push_back(w.value_or(0));
  }
  l.formula = cell(r.formula, [](double b) { return fmt::format("{:.4f}", b); });
  l.want = have_want ? fmt::format("{} ({})", counts(want), in_flight_text) : "TODO";
  if (!r.figure) {
    l.error = r.error;
    return l;
  }
  const pf::Figure& f = *r.figure;
  std::vector<double> ledger, program;
  for (const pf::StageResult& st : f.stages) {
    ledger.push_back(st.in_flight_measured);
    program.push_back(static_cast<double>(st.in_flight_schedule));
  }
  // The program's count must be the formula exactly; the ledger's only nearly, since one
  // micro-batch's bytes are taken as a mean over chunks that differ by the embedding or head.
  // A zero-bubble ledger also counts what the weight halves keep (and, while an input half
  // runs, h beside the new dh), more than a forward saves: only at least the count is asked.
  checks.compare(l.name + " bubble", f.bubble, r.formula, kBubbleTolerance);
  for (std::size_t s = 0; have_want && s < ledger.size(); ++s) {
    const std::string where = fmt::format("{} stage {} in flight", l.name, s);
    checks.compare(where + " (program)", program[s], want[s]);
    if (zb)
      checks.check(where + " (ledger below the formula)", ledger[s] >= want[s] - 0.05);
    else
      checks.compare(where + " (ledger)", ledger[s], want[s], 0.05 + kInFlightTolerance * want[s]);
  }
  l.bubble = fmt::format("{:.4f}", f.bubble);
  l.ledger = counts(ledger);
  l.program = counts(program);
  l.step = us(f.step_seconds);
  l.predicted = r.predicted_step > 0 ? us(r.predicted_step) : std::string("TODO");
  return l;
}

// Runs every schedule once and prints bubble, activations in flight and step beside the
// formulas. Returns the runs, for the waits and the trace.
std::vector<ScheduleRun> schedules_section(const Options& o, Checks& checks) {
  std::vector<ScheduleRun> runs;
  for (pf::ScheduleKind kind :
       {pf::ScheduleKind::gpipe, pf::ScheduleKind::one_f_one_b, pf::ScheduleKind::interleaved,
        pf::ScheduleKind::zb_h1, pf::ScheduleKind::zb_h2})
    runs.push_back(run_schedule(o, kind));
  // Rows are built first so that the in-flight columns can be as wide as p stages need.
  std::vector<Line> lines;
  for (const ScheduleRun& r : runs) lines.push_back(make_line(r, checks));
  std::size_t wl = std::string("in flight: ledger").size(), wp = std::string("program").size(),
              ww = std::string("formula").size();
  for (const Line& l : lines) {
    wl = std::max(wl, l.ledger.size());
    wp = std::max(wp, l.program.size());
    ww = std::max(ww, l.want.size());
  }
  const Table table(
      fmt::format(
          "Bubble (mean idle fraction of a stage); activations in flight per stage 0..{}: the "
          "ledger's peak over one\n"
          "micro-batch's activations (chunk-micro-batches for interleaved), the program's count "
          "(schedule_in_flight)\n"
          "and the formula; the step on the virtual clock",
          o.stages - 1),
      {{"schedule", 20, true},
       {"bubble", 8},
       {"formula", 9},
       {"", 24, true, 2},
       {"in flight: ledger", static_cast<int>(wl), true},
       {"program", static_cast<int>(wp), true, 2},
       {"formula", static_cast<int>(ww), true, 2},
       {"step", 11},
       {"predicted", 11}});
  for (const Line& l : lines) {
    if (!l.error.empty()) {
      // Nothing measured: the formulas' cells still show, TODO while they are skeletons.
      table.row({l.name, "-", l.formula, l.formula_text, "-", "-", l.want, "-", "-"});
      table.line("", l.error);
    } else {
      table.row({l.name, l.bubble, l.formula, l.formula_text, l.ledger, l.program, l.want, l.step,
                 l.predicted});
    }
  }
  fmt::print(
      "  (predicted step: (vm + p - 1) slots of a stage's forward and backward of one micro-batch "
      "over v,\n"
      "   pipeline_step_seconds for v = 1, from the busiest stage's measured compute)\n");
  return runs;
}

void reading_notes(const Options& o) {
  fmt::print(
      "\nWhat to read in the table:\n"
      "- GPipe and 1F1B idle the same (p-1)/(m+p-1): 1F1B only reorders the work. What it changes "
      "is\n"
      "  memory: GPipe holds all m micro-batches' activations before its first backward, 1F1B at "
      "most p.\n"
      "- interleaving cuts each stage into v chunks, so filling and draining the pipeline takes "
      "slots of\n"
      "  1/v of a stage: the bubble falls to (p-1)/(vm+p-1), for v times as many boundary "
      "messages\n"
      "  (`./mgpu pipeline --schedule interleaved --latency 5e-6` shows what they cost).\n"
      "- ZB-H1 splits each backward into its input half, which the stage before waits for, and its "
      "weight\n"
      "  half, which nobody waits for, and runs weight halves where 1F1B waits: every stage now "
      "holds\n"
      "  min(m, p) until the weight halves (1F1B's peak in micro-batches; in bytes the ledger "
      "shows more,\n"
      "  since the micro-batch in its input half holds the FFN's h and the dh kept for its weight "
      "half).\n"
      "- ZB-H2 lets each stage hold up to 2p-1 micro-batches, enough for the first stage to cover "
      "its first\n"
      "  gradient's round trip with forwards, and puts the weight halves wherever a stage would "
      "wait: in a\n"
      "  step on its own only the forward fill is left ((p-1)F, ZB-H1's wait when B = W), and "
      "inside each\n"
      "  stage's part of the step nothing (inner wait below): steps run back to back lose "
      "nothing, given\n"
      "  an optimizer step validated afterwards. With unequal costs and m >= 2p-1 that wait is "
      "(p-1)(F+B-2W).\n"
      "- `./mgpu pipeline --schedule 1f1b --stages {} --micro-batches {} --svg t.svg` draws one "
      "timeline.\n",
      o.stages, o.micro_batches);
}

void write_trace(const Options& o, const std::vector<ScheduleRun>& runs) {
  if (o.trace.empty()) return;
  std::vector<std::pair<std::string, std::string>> traces;
  for (const ScheduleRun& r : runs)
    if (r.figure) traces.emplace_back(pf::schedule_title(r.kind), r.figure->trace_json);
  write_file(o.trace, merge_chrome_traces(traces));
  fmt::print(
      "trace of the {} schedules written to {} (open it in https://ui.perfetto.dev; one group of "
      "stages per schedule, all from time 0)\n",
      traces.size(), o.trace);
}

void run(const Options& o) {
  if (o.stages < 1 || o.stages > pf::kMaxStages)
    throw std::invalid_argument(fmt::format("--stages {}: use 1 to {}", o.stages, pf::kMaxStages));
  if (o.micro_batches < 1) throw std::invalid_argument("--micro-batches must be at least 1");
  if (o.chunks < 1) throw std::invalid_argument("--chunks must be at least 1");
  print_header(o);
  Checks checks(fmt::format(
      "bubble within {} of its formula, and activations in flight equal to the formulas on every "
      "stage\n(the program's count exactly, the ledger's within 0.05 + {:.0f}%)",
      kBubbleTolerance, 100 * kInFlightTolerance));
  const std::vector<ScheduleRun> runs = schedules_section(o, checks);
  fmt::print("\n");
  checks.print_verdict();
  print_inner_waits(runs);
  reading_notes(o);
  write_trace(o, runs);
}

}  // namespace

void add_11_5(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "11_5", "pipeline schedules side by side: bubble, activations in flight, step time");
  sub->add_option("--stages", opts->stages, "pipeline stages p, one simulated GPU each")
      ->capture_default_str();
  sub->add_option("--micro-batches", opts->micro_batches,
                  "micro-batches m per step (a multiple of p for interleaved)")
      ->capture_default_str();
  sub->add_option("--chunks", opts->chunks, "model chunks v per stage of the interleaved schedule")
      ->capture_default_str();
  sub->add_option("--trace", opts->trace,
                  "write a Chrome trace of the three schedules to this file");
  sub->callback([opts] { run(*opts); });
}

}  // namespace mgpu::demo
