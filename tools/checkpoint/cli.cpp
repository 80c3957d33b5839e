// `mgpu checkpoint`: parses the flags, runs the lab, and maps each failure to an exit status
// with a message that names the fix.
#include "checkpoint/cli.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <fstream>
#include <mgpu/not_implemented.hpp>

#include "checkpoint/figure.hpp"

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

void write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file)
    throw std::ios_base::failure("cannot write " + path + "; check that its folder exists");
}

}  // namespace

int run_checkpoint_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "mgpu checkpoint: run the course model with a checkpoint every k blocks on the simulated "
      "cluster and measure its activation peak and recomputed FLOPs (section 11.6)",
      "mgpu checkpoint"};
  RawFlags flags;
  add_flags(app, flags);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << "mgpu checkpoint: " << e.what() << "\n  see ./mgpu checkpoint --help for the flags\n";
    return kExitUsage;
  }
  try {
    FigureOptions o;
    o.layers = flags.layers;
    if (app.get_option("--every")->count() > 0) o.k = flags.every;
    o.sweep = !flags.svg_path.empty();
    validate(o);
    const Figure f = run_figure(o);
    out << render_text(f);
    if (!flags.svg_path.empty()) {
      write_file(flags.svg_path, render_svg(f));
      out << "wrote " << flags.svg_path << '\n';
    }
    return kExitOk;
  } catch (const NotImplemented& e) {
    err << fmt::format(
        "mgpu checkpoint: {}\n  write it in chapters/11_6_checkpointing/ (see its README), check "
        "it with ./mgpu test --student 11_6_checkpointing, then run this again\n",
        e.what());
    return kExitNotImplemented;
  } catch (const UsageError& e) {
    err << "mgpu checkpoint: " << e.what() << '\n';
    return kExitUsage;
  } catch (const std::ios_base::failure& e) {
    err << "mgpu checkpoint: " << e.what() << '\n';
    return kExitIoError;
  } catch (const std::exception& e) {
    err << "mgpu checkpoint: the run failed: " << e.what() << '\n';
    return kExitRunFailed;
  }
}

}  // namespace mgpu::checkpoint_figure
