// `mgpu checkpoint`: parses the flags, runs the lab, and maps each failure to an exit status
// with a message that names the fix.
#include "checkpoint/cli.hpp"

#include <cstdint>

#include "checkpoint/figure.hpp"
#include "command_line.hpp"

namespace mgpu::checkpoint_figure {

namespace {

struct RawFlags {
  std::int64_t layers = 0, every = 0;
  std::string svg_path;
};

void add_flags(CLI::App& app, RawFlags& f) {
  app.add_option("--layers", f.layers, "blocks L of the model")->type_name("L")->required();
  app.add_option("--every", f.every,
                 "checkpoint every k blocks (default: measure every k from 1 to L)")
      ->type_name("K");
  app.add_option("--svg", f.svg_path,
                 "write the peak against k, and the best peak against L, as SVG to FILE")
      ->type_name("FILE");
}

}  // namespace

int run_checkpoint_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "mgpu checkpoint: run the course model with a checkpoint every k blocks on the simulated "
      "cluster and measure its activation peak and recomputed FLOPs (section 11.6)",
      "mgpu checkpoint"};
  RawFlags flags;
  add_flags(app, flags);
  if (const auto status = tools::parse_flags(app, args, out, err)) return *status;
  return tools::run_reported("mgpu checkpoint", "11_6_checkpointing", kExitRunFailed, err, [&] {
    FigureOptions o;
    o.layers = flags.layers;
    if (app.get_option("--every")->count() > 0) o.k = flags.every;
    o.sweep = !flags.svg_path.empty();
    validate(o);
    const Figure f = run_figure(o);
    out << render_text(f);
    if (!flags.svg_path.empty()) {
      tools::write_file(flags.svg_path, render_svg(f));
      out << "wrote " << flags.svg_path << '\n';
    }
    return kExitOk;
  });
}

}  // namespace mgpu::checkpoint_figure
