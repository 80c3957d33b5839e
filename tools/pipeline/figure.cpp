// Runs the pipeline figure's step and measures it the way chapters/11_5_pipeline/tests do:
// a stage's bubble is 1 - its compute time / the step's makespan, and its in-flight count is its
// activation ledger peak divided by what one micro-batch leaves saved on it.
#include "pipeline/figure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mgpu/not_implemented.hpp>
#include <numeric>

#include "11_5_pipeline/tests/runtime_probes.hpp"

namespace mgpu::pipeline_figure {

using pipeline::Action;
using pipeline::Pass;
using pipeline::PipelineSchedule;

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::gpipe;
  if (name == "1f1b") return ScheduleKind::one_f_one_b;
  if (name == "interleaved") return ScheduleKind::interleaved;
  if (name == "zb-h1") return ScheduleKind::zb_h1;
  if (name == "zb-h2") return ScheduleKind::zb_h2;
  throw UsageError(fmt::format(
      "--schedule '{}' is not a schedule: use --schedule gpipe, 1f1b, interleaved, zb-h1 or zb-h2",
      name));
}

std::string schedule_flag(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
      return "gpipe";
    case ScheduleKind::one_f_one_b:
      return "1f1b";
    case ScheduleKind::interleaved:
      return "interleaved";
    case ScheduleKind::zb_h1:
      return "zb-h1";
    case ScheduleKind::zb_h2:
      return "zb-h2";
  }
  return "";
}

std::string schedule_title(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
      return "GPipe";
    case ScheduleKind::one_f_one_b:
      return "1F1B";
    case ScheduleKind::interleaved:
      return "interleaved 1F1B";
    case ScheduleKind::zb_h1:
      return "ZB-H1";
    case ScheduleKind::zb_h2:
      return "ZB-H2";
  }
  return "";
}

void validate(const FigureOptions& o) {
  if (o.stages < 1)
    throw UsageError(
        fmt::format("--stages {}: a pipeline has at least one stage; use --stages 4", o.stages));
  if (o.stages > kMaxStages)
    throw UsageError(fmt::format(
        "--stages {}: the simulation runs one thread per stage; use at most --stages {}", o.stages,
        kMaxStages));
  if (o.micro_batches < 1)
    throw UsageError(fmt::format(
        "--micro-batches {}: a step has at least one micro-batch; use --micro-batches 8",
        o.micro_batches));
  if (o.chunks < 1)
    throw UsageError(
        fmt::format("--chunks {}: each stage holds at least one chunk; use --chunks 2", o.chunks));
  if (o.chunks != 1 && o.schedule != ScheduleKind::interleaved)
    throw UsageError(
        fmt::format("--chunks {} needs --schedule interleaved: {} gives each stage one chunk",
                    o.chunks, schedule_title(o.schedule)));
  if (o.schedule == ScheduleKind::interleaved && o.micro_batches % o.stages != 0) {
    const int below = o.micro_batches / o.stages * o.stages, above = below + o.stages;
    throw UsageError(
        fmt::format("--micro-batches {} is not a multiple of --stages {}: interleaved 1F1B sends "
                    "the micro-batches "
                    "through the chunks in groups of p; use --micro-batches {}",
                    o.micro_batches, o.stages,
                    below > 0 ? fmt::format("{} or {}", below, above) : std::to_string(above)));
  }
  if (!std::isfinite(o.latency) || o.latency < 0)
    throw UsageError(
        fmt::format("--latency {}: seconds per message, 0 or more; use --latency 5e-6", o.latency));
}

PipelineSchedule make_schedule(const FigureOptions& o) {
  validate(o);
  switch (o.schedule) {
    case ScheduleKind::gpipe:
      return pipeline::gpipe_schedule(o.stages, o.micro_batches);
    case ScheduleKind::one_f_one_b:
      return pipeline::one_f_one_b_schedule(o.stages, o.micro_batches);
    case ScheduleKind::interleaved:
      return pipeline::interleaved_one_f_one_b_schedule(o.stages, o.micro_batches, o.chunks);
    case ScheduleKind::zb_h1:
      return pipeline::zb_h1_schedule(o.stages, o.micro_batches);
    case ScheduleKind::zb_h2:
      return pipeline::zb_h2_schedule(o.stages, o.micro_batches);
  }
  throw std::logic_error("make_schedule: unknown schedule");
}

namespace {

// The chapter tests' equal-stage model: FFN blocks dominate the compute and the embedding and
// head are one feature wide, so every chunk costs the same to about 0.1% and the formula, which
// assumes equal stages, applies. One block per chunk, its width divided by v so that a stage does
// the same work whatever v: only the cut changes, and with latency the price of v times as many
// messages shows.
model::ModelConfig equal_chunk_config(int p, int v) {
  model::ModelConfig c;
  c.d_in = 1;
  c.d_model = 16;
  c.d_ff = std::max<std::int64_t>(16, std::llround(768.0 / v));
  c.n_layers = p * v;
  c.attention = false;
  c.seq_len = 2;
  c.d_out = 1;
  return c;
}

// The cluster of the chapter tests: 1 GFLOP/s, links that cost only `latency`.
ClusterConfig cluster_config(const FigureOptions& o) {
  ClusterConfig cc;
  cc.world_size = o.stages;
  cc.gpus_per_node = o.stages;  // one node: every boundary uses the same link
  cc.flops_per_second = 1e9;
  cc.intra_node_latency_seconds = cc.inter_node_latency_seconds = o.latency;
  cc.intra_node_bytes_per_second = cc.inter_node_bytes_per_second = 1e18;
  return cc;
}

constexpr std::uint64_t kWeightSeed = 5;
constexpr std::uint64_t kBatchSeed = 3;

// The clock's label prefix of a pass's unit spans (Model::unit_forward, unit_backward,
// unit_backward_input and unit_backward_weight label them so).
std::string_view span_prefix(Pass pass) {
  switch (pass) {
    case Pass::forward:
      return "fwd ";
    case Pass::backward:
      return "bwd ";
    case Pass::backward_input:
      return "bwd-in ";
    case Pass::backward_weight:
      return "bwd-w ";
  }
  return "";
}

// Cuts stage s's compute spans into its program's actions: an action on a chunk of n units is
// n spans labelled by span_prefix.
// A timeline that does not split this way came from an executor that ran another order.
std::vector<Box> boxes_of_stage(const model::Model& net, const PipelineSchedule& schedule, int s,
                                const std::vector<Span>& timeline) {
  std::vector<const Span*> compute;
  for (const Span& span : timeline)
    if (span.stream == Stream::compute && span.kind == SpanKind::compute) compute.push_back(&span);
  const int p = schedule.stages, v = schedule.chunks;
  std::vector<Box> boxes;
  std::size_t next = 0;
  for (const Action& a : schedule.per_stage[static_cast<std::size_t>(s)]) {
    const pipeline::StageUnits units = pipeline::stage_units(net, p * v, a.chunk * p + s);
    const std::string_view prefix = span_prefix(a.pass);
    Box box{s, a.pass, a.micro_batch, a.chunk, 0, 0};
    for (int u = units.first; u < units.last; ++u, ++next) {
      if (next >= compute.size() || !compute[next]->label.starts_with(prefix))
        throw std::runtime_error(fmt::format(
            "stage {}'s timeline does not follow its program at the {}: expected \"{}{}\", found "
            "{}; "
            "run_pipeline must run the schedule's actions in order, each chunk's units once",
            s, pipeline::describe(a), prefix, net.unit(u).name,
            next < compute.size() ? "\"" + compute[next]->label + "\"" : std::string("nothing")));
      if (u == units.first) box.start = compute[next]->start;
      box.end = compute[next]->end;
    }
    boxes.push_back(box);
  }
  if (next != compute.size())
    throw std::runtime_error(
        fmt::format("stage {} computed {} spans more than its program's actions need; "
                    "run_pipeline must run each chunk's units once per action",
                    s, compute.size() - next));
  return boxes;
}

template <class F>
Formula formula_of(F&& f) {
  try {
    return {f(), ""};
  } catch (const NotImplemented& e) {
    std::string what = e.what();
    const std::string prefix = "not implemented: ";
    if (what.starts_with(prefix)) what = what.substr(prefix.size());
    return {std::nullopt, what};
  }
}

// The zero-bubble schedules' block: its F, B and W seconds per micro-batch from the runtime's
// FLOPs at `rate` FLOP/s, and the wait 1F1B would have, (p-1)(T_F+T_B+T_W).
void block_seconds(Figure& f, const model::Model& net, std::int64_t tokens, double rate) {
  const int p = f.options.stages;
  f.t_forward = net.unit_forward_flops(1, tokens) / rate;
  f.t_input = net.unit_backward_input_flops(1, tokens) / rate;
  f.t_weight = net.unit_backward_weight_flops(1, tokens) / rate;
  f.one_f_one_b_wait = (p - 1) * (f.t_forward + f.t_input + f.t_weight);
}

// ZB-H2's numbers: one block per stage, whose F, B and W seconds are equal in these FFN blocks;
// the longest wait inside a stage against zb_h2_bubble_seconds, and the whole step's bubble,
// max((p-1) T, that wait) over the step (the schedule's contract).
void zb_h2_formulas(Figure& f, const model::Model& net, std::int64_t tokens, double rate) {
  const int p = f.options.stages, m = f.options.micro_batches;
  block_seconds(f, net, tokens, rate);
  f.zb_h1_inner_wait = (p - 1) * (f.t_forward + f.t_input - f.t_weight);
  for (const StageResult& st : f.stages)
    f.inner_wait_measured = std::max(f.inner_wait_measured, st.inner_wait_seconds);
  f.inner_wait = formula_of([&] { return pipeline::zb_h2_bubble_seconds(p, m, f.t_forward); });
  f.formula_text = "max((p-1)T, zb_h2_bubble_seconds)/step";
  if (!f.inner_wait.value) {
    f.formula = f.inner_wait;
    return;
  }
  const double wait = std::max((p - 1) * f.t_forward, *f.inner_wait.value);
  f.formula = {wait / (m * (f.t_forward + f.t_input + f.t_weight) + wait), ""};
}

// ZB-H1's numbers: one block per stage, its F, B and W seconds per micro-batch from the
// runtime's FLOPs, and the bubble zb_h1_bubble_seconds gives over the step.
void zb_h1_formulas(Figure& f, const model::Model& net, std::int64_t tokens, double rate) {
  const int p = f.options.stages, m = f.options.micro_batches;
  block_seconds(f, net, tokens, rate);
  f.wait = formula_of(
      [&] { return pipeline::zb_h1_bubble_seconds(p, f.t_forward, f.t_input, f.t_weight); });
  const double busy = m * (f.t_forward + f.t_input + f.t_weight);
  f.formula_text = "(p-1)(T_F+T_B-T_W)/step";
  f.formula = f.wait.value ? Formula{*f.wait.value / (busy + *f.wait.value), ""} : f.wait;
}

// The chapter's formula for the schedule's bubble, beside the measured one (`f.stages` filled);
// v: the schedule's chunks per stage.
void bubble_formulas(Figure& f, const model::Model& net, int v, std::int64_t tokens) {
  const FigureOptions& o = f.options;
  const int p = o.stages, m = o.micro_batches;
  if (o.schedule == ScheduleKind::interleaved) {
    f.formula_text = "(p-1)/(v*m+p-1)";
    f.formula = formula_of([&] { return pipeline::interleaved_bubble_fraction(p, m, v); });
  } else if (o.schedule == ScheduleKind::zb_h1) {
    zb_h1_formulas(f, net, tokens, cluster_config(o).flops_per_second);
  } else if (o.schedule == ScheduleKind::zb_h2) {
    zb_h2_formulas(f, net, tokens, cluster_config(o).flops_per_second);
  } else {
    f.formula_text = "(p-1)/(m+p-1)";
    f.formula = formula_of([&] { return pipeline::gpipe_bubble_fraction(p, m); });
  }
}

// Stage s's measures from its rank's report; its boxes are appended to `f.boxes`.
// `per_unit`: the bytes one micro-batch leaves saved on each unit of `net`.
StageResult measure_stage(Figure& f, const model::Model& net, const PipelineSchedule& schedule,
                          const std::vector<std::size_t>& per_unit, const RankReport& report,
                          int s) {
  const int p = f.options.stages, v = schedule.chunks;
  StageResult st;
  st.busy_seconds = report.clock.compute_time();
  st.bubble = f.step_seconds > 0 ? 1.0 - st.busy_seconds / f.step_seconds : 0.0;
  // One (chunk-)micro-batch: the mean over the stage's chunks of what one micro-batch saves
  // there (the chunks differ only by the small embedding or head).
  double chunk_bytes = 0;
  for (int c = 0; c < v; ++c) {
    const pipeline::StageUnits units = pipeline::stage_units(net, p * v, c * p + s);
    for (int u = units.first; u < units.last; ++u)
      chunk_bytes += static_cast<double>(per_unit[static_cast<std::size_t>(u)]);
  }
  chunk_bytes /= v;
  st.in_flight_measured =
      static_cast<double>(report.memory.peak(Category::activations)) / chunk_bytes;
  st.in_flight_schedule = pipeline::schedule_in_flight(schedule, s);
  const std::vector<Box> boxes = boxes_of_stage(net, schedule, s, report.clock.timeline());
  if (!boxes.empty())
    st.inner_wait_seconds = boxes.back().end - boxes.front().start - st.busy_seconds;
  f.boxes.insert(f.boxes.end(), boxes.begin(), boxes.end());
  return st;
}

}  // namespace

Figure run_figure(const FigureOptions& o, bool with_trace) {
  const PipelineSchedule schedule = make_schedule(o);
  const int p = o.stages, v = schedule.chunks, m = o.micro_batches;
  // The student's schedule is checked here so that a wrong one is named as such, not as a
  // failure of the executor.
  pipeline::check_schedule(schedule);

  const model::Model net(equal_chunk_config(p, v));
  const model::Batch batch = net.make_batch(m, kBatchSeed);
  const std::vector<model::Batch> micro = pipeline::split_micro_batches(batch, m);

  Cluster cluster(cluster_config(o));
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    pipeline::run_pipeline(r, r.world(), net, schedule, replica.params.span(), replica.grads.span(),
                           micro);
  });

  Figure f;
  f.options = o;
  f.step_seconds = cluster.makespan();
  const std::vector<std::size_t> per_unit =
      pipeline_probes::saved_bytes_per_unit(net, micro[0], kWeightSeed);
  for (int s = 0; s < p; ++s)
    f.stages.push_back(measure_stage(f, net, schedule, per_unit, cluster.report(s), s));
  double sum = 0;
  for (const StageResult& st : f.stages) sum += st.bubble;
  f.bubble = sum / p;
  for (const StageResult& st : f.stages)
    f.bubble_worst = std::max(f.bubble_worst, std::abs(st.bubble - f.bubble));
  bubble_formulas(f, net, v, micro[0].tokens());
  if (with_trace) f.trace_json = cluster.chrome_trace();
  return f;
}

TargetAnswer fewest_micro_batches(int p, int v, double target) {
  if (p < 1)
    throw UsageError(
        fmt::format("--stages {}: a pipeline has at least one stage; use --stages 4", p));
  if (v < 1)
    throw UsageError(
        fmt::format("--chunks {}: each stage holds at least one chunk; use --chunks 2", v));
  // Below 1e-9 the answer is far beyond any real step, and the counts would approach int64 range.
  if (!(target >= 1e-9 && target <= 1))
    throw UsageError(
        fmt::format("--target-bubble {}: a fraction of the step in [1e-9, 1]; use "
                    "--target-bubble 0.1",
                    target));
  TargetAnswer answer;
  const auto bubble = [&](std::int64_t m) {
    return pipeline::interleaved_bubble_fraction(p, m, v);
  };
  if (v == 1) {
    answer.micro_batches = pipeline::min_micro_batches_for_bubble(p, target);
  } else {
    // 11.5 has no min_micro_batches for the interleaved schedule, so bisect on its bubble
    // formula, which falls strictly as m grows (p = 1 has no bubble at all).
    answer.searched = true;
    std::int64_t hi = 1;
    constexpr std::int64_t kLimit = std::int64_t{1} << 52;  // beyond this m is meaningless
    while (bubble(hi) >= target) {
      if (hi >= kLimit)
        throw UsageError(fmt::format(
            "--target-bubble {}: no m up to {} reaches it; use a larger target, e.g. 0.01", target,
            kLimit));
      hi *= 2;
    }
    std::int64_t lo = hi / 2;  // bubble(lo) >= target unless lo = 0
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (bubble(mid) < target ? hi : lo) = mid;
    }
    answer.micro_batches = hi;
  }
  answer.bubble = v == 1 ? pipeline::gpipe_bubble_fraction(p, answer.micro_batches)
                         : bubble(answer.micro_batches);
  answer.multiple_of_p = (answer.micro_batches + p - 1) / p * p;
  return answer;
}

namespace {

// The run's description and one row per stage.
std::string text_stages(const Figure& f) {
  const FigureOptions& o = f.options;
  const std::string model =
      o.chunks == 1 ? fmt::format("{} equal FFN blocks, one per stage", o.stages)
                    : fmt::format(
                          "{} equal FFN blocks, one per chunk, each 1/{} as wide so that a "
                          "stage's work does not depend on v",
                          o.stages * o.chunks, o.chunks);
  std::string out = fmt::format(
      "mgpu pipeline: {}, p = {} stages, m = {} micro-batches{}, one step on the simulated "
      "cluster\n"
      "  {}; 1 GFLOP/s per GPU; links: {}\n\n",
      schedule_title(o.schedule), o.stages, o.micro_batches,
      o.schedule == ScheduleKind::interleaved ? fmt::format(", v = {} chunks per stage", o.chunks)
                                              : "",
      model,
      o.latency > 0 ? fmt::format("{:g} us latency per message", o.latency * 1e6)
                    : "free (no latency)");
  out += "  stage   busy (us)   bubble   in flight: ledger   schedule\n";
  for (std::size_t s = 0; s < f.stages.size(); ++s) {
    const StageResult& st = f.stages[s];
    out +=
        fmt::format("  {:>5}   {:>9.1f}   {:.4f}   {:>17.2f}   {:>8}\n", s, st.busy_seconds * 1e6,
                    st.bubble, st.in_flight_measured, st.in_flight_schedule);
  }
  out += fmt::format(
      "  (in flight: {} held at the peak; ledger = activation peak / what one leaves saved,\n"
      "   schedule = 11.5 schedule_in_flight of the stage's program)\n",
      o.chunks > 1 ? "chunk-micro-batches" : "micro-batches");
  return out;
}

// ZB-H1's wait per stage against its formula and 1F1B's.
std::string text_zb_h1(const Figure& f) {
  const FigureOptions& o = f.options;
  const std::string wait = f.wait.value ? fmt::format("{:.1f} us", *f.wait.value * 1e6)
                                        : fmt::format("finish {} to see it", f.wait.pending);
  std::string out = fmt::format(
      "Wait per stage: {:.1f} us measured, formula (p-1)(T_F+T_B-T_W) = {} for T_F = {:.2f}, "
      "T_B = {:.2f}, T_W = {:.2f} us;\n"
      "  1F1B would wait (p-1)(T_F+T_B+T_W) = {:.1f} us, a bubble of {:.4f}\n",
      f.step_seconds * f.bubble * 1e6, wait, f.t_forward * 1e6, f.t_input * 1e6, f.t_weight * 1e6,
      f.one_f_one_b_wait * 1e6,
      f.one_f_one_b_wait /
          (o.micro_batches * (f.t_forward + f.t_input + f.t_weight) + f.one_f_one_b_wait));
  if (o.micro_batches < o.stages)
    out += "  (the formula assumes m >= p: with fewer micro-batches the stages wait longer)\n";
  return out;
}

// ZB-H2's inner wait against its formula and Qi et al.'s closed form for any pass costs, with
// the condition back-to-back steps need; then ZB-H1's and 1F1B's.
std::string text_zb_h2(const Figure& f) {
  const FigureOptions& o = f.options;
  const int p = o.stages, m = o.micro_batches;
  const std::string inner = f.inner_wait.value
                                ? fmt::format("{:.1f} us", *f.inner_wait.value * 1e6)
                                : fmt::format("finish {} to see it", f.inner_wait.pending);
  const double closed = (p - 1) * (f.t_forward + f.t_input - 2 * f.t_weight);
  return fmt::format(
      "Inner wait: {:.1f} us measured, formula max(0, 2p-1-m) T = {} for T = T_F = {:.2f} us\n"
      "  (T_B = {:.2f}, T_W = {:.2f} us); for any T_F, T_B, T_W and m >= 2p-1, Qi et al.'s\n"
      "  (p-1)(T_F+T_B-2T_W) = {:.1f} us{}. It is the longest a stage waits between its first "
      "and last\n"
      "  action, the bubble per step when steps run back to back, which needs the optimizer step\n"
      "  validated afterwards instead of synchronising all stages first (without that each step "
      "also\n"
      "  waits the fill and drain); ZB-H1 leaves (p-1)(T_F+T_B-T_W) = {:.1f} us inside its first "
      "stage,\n"
      "  1F1B (p-1)(T_F+T_B+T_W) = {:.1f} us; in flight: min(m, 2p-1) = {} per stage\n",
      f.inner_wait_measured * 1e6, inner, f.t_forward * 1e6, f.t_input * 1e6, f.t_weight * 1e6,
      closed * 1e6, m >= 2 * p - 1 ? "" : " (not here: m < 2p-1)", f.zb_h1_inner_wait * 1e6,
      f.one_f_one_b_wait * 1e6, std::min(m, 2 * p - 1));
}

}  // namespace

std::string render_text(const Figure& f) {
  const FigureOptions& o = f.options;
  std::string out = text_stages(f);
  out += "\n";
  const std::string formula = f.formula.value
                                  ? fmt::format("{:.4f}", *f.formula.value)
                                  : fmt::format("finish {} to see it", f.formula.pending);
  out += fmt::format(
      "Bubble: {:.4f} measured (the mean over the stages, each within {:.4f} of it), formula {} = "
      "{}\n",
      f.bubble, f.bubble_worst, f.formula_text, formula);
  out += fmt::format(
      "Step time: {:.1f} us on the virtual clock, of which a stage computes {:.1f} us\n",
      f.step_seconds * 1e6, f.step_seconds * (1.0 - f.bubble) * 1e6);
  if (o.schedule == ScheduleKind::zb_h1) out += text_zb_h1(f);
  if (o.schedule == ScheduleKind::zb_h2) out += text_zb_h2(f);
  if (o.latency > 0 && f.formula.value)
    out += fmt::format(
        "Latency adds {:+.4f} to the bubble: every boundary message waits on the critical path\n",
        f.bubble - *f.formula.value);
  return out;
}

}  // namespace mgpu::pipeline_figure
