// `mgpu pipeline`: parses the flags, runs the figure, and maps each failure to an exit status
// with a message that names the fix.
#include "pipeline/cli.hpp"

#include <fmt/format.h>

#include "command_line.hpp"
#include "pipeline/figure.hpp"

namespace mgpu::pipeline_figure {

namespace {

struct RawFlags {
  std::string schedule = "1f1b";
  int stages = 0, micro_batches = 0, chunks = 1;
  double latency = 0, target_bubble = 0;
  std::string svg_path, trace_path;
};

void add_flags(CLI::App& app, RawFlags& f) {
  app.add_option("--schedule", f.schedule, "gpipe, 1f1b, interleaved, zb-h1 or zb-h2")
      ->type_name("gpipe|1f1b|interleaved|zb-h1|zb-h2")
      ->capture_default_str();
  app.add_option("--stages", f.stages, "pipeline stages p (one simulated GPU each)")
      ->type_name("P")
      ->required();
  app.add_option("--micro-batches", f.micro_batches,
                 "micro-batches per step m (needed unless --target-bubble)")
      ->type_name("M");
  app.add_option("--chunks", f.chunks, "model chunks per stage v (interleaved only)")
      ->type_name("V")
      ->capture_default_str();
  app.add_option("--latency", f.latency,
                 "seconds per point-to-point message, e.g. 5e-6 (default: free links)")
      ->type_name("SECONDS");
  app.add_option("--target-bubble", f.target_bubble,
                 "print the fewest micro-batches whose bubble is below B for these p and v")
      ->type_name("B");
  app.add_option("--svg", f.svg_path, "write the timeline as SVG to FILE")->type_name("FILE");
  app.add_option("--trace", f.trace_path,
                 "write the cluster's Chrome trace (ui.perfetto.dev) to FILE")
      ->type_name("FILE");
}

bool given(const CLI::App& app, const char* flag) { return app.get_option(flag)->count() > 0; }

std::string target_text(const FigureOptions& o, double target, const TargetAnswer& a) {
  const bool interleaved = o.schedule == ScheduleKind::interleaved;
  std::string out = fmt::format(
      "Fewest micro-batches for a bubble below {:g} with p = {}{}: m = {} (bubble {:.4f})\n",
      target, o.stages, interleaved ? fmt::format(" and v = {}", o.chunks) : "", a.micro_batches,
      a.bubble);
  out += a.searched
             ? "  found by bisection on 11.5 interleaved_bubble_fraction (the chapter has no "
               "min_micro_batches for the interleaved schedule)\n"
             : "  from 11.5 min_micro_batches_for_bubble; the bubble (p-1)/(m+p-1) must be "
               "strictly below the target\n";
  if (interleaved && a.multiple_of_p != a.micro_batches)
    out += fmt::format(
        "  the interleaved schedule needs m to be a multiple of p: run it with --micro-batches "
        "{}\n",
        a.multiple_of_p);
  return out;
}

}  // namespace

int run_pipeline_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "mgpu pipeline: run a pipeline schedule on the simulated cluster and measure its bubble "
      "(section 11.5)",
      "mgpu pipeline"};
  RawFlags flags;
  add_flags(app, flags);
  if (const auto status = tools::parse_flags(app, args, out, err)) return *status;
  return tools::run_reported("mgpu pipeline", "11_5_pipeline", kExitBadSchedule, err, [&] {
    FigureOptions o;
    o.schedule = parse_schedule(flags.schedule);
    o.stages = flags.stages;
    o.chunks = flags.chunks;
    o.latency = flags.latency;
    const bool target = given(app, "--target-bubble");
    const bool run = given(app, "--micro-batches");
    if (!run && !target)
      throw UsageError(
          "--micro-batches is missing: give the micro-batches per step, e.g. --micro-batches 8, "
          "or ask --target-bubble 0.1 for the fewest that reach a bubble");
    if (!run)
      for (const char* flag : {"--svg", "--trace", "--latency"})
        if (given(app, flag))
          throw UsageError(fmt::format("{} draws a run: add --micro-batches M", flag));
    o.micro_batches = run ? flags.micro_batches : o.stages;  // only validated, not run, without M
    validate(o);

    if (run) {
      const Figure f = run_figure(o, !flags.trace_path.empty());
      out << render_text(f);
      if (!flags.svg_path.empty()) {
        tools::write_file(flags.svg_path, render_svg(f));
        out << "wrote " << flags.svg_path << '\n';
      }
      if (!flags.trace_path.empty()) {
        tools::write_file(flags.trace_path, f.trace_json);
        out << "wrote " << flags.trace_path << " (open it in https://ui.perfetto.dev)\n";
      }
    }
    if (target) {
      if (run) out << '\n';
      out << target_text(o, flags.target_bubble,
                         fewest_micro_batches(o.stages, o.chunks, flags.target_bubble));
    }
    return kExitOk;
  });
}

}  // namespace mgpu::pipeline_figure
