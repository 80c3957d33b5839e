// mgpu-demo: run a chapter on the simulated cluster and print what it measured beside what the
// chapter's formulas predict. Usage: mgpu-demo <chapter> [options]; `mgpu-demo --help` lists them.
#include "demo.hpp"

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"Run a chapter on the simulated cluster, measured beside predicted"};
  app.require_subcommand(1);
  mgpu::demo::add_11_2(app);
  mgpu::demo::add_11_3(app);
  mgpu::demo::add_11_4(app);
  mgpu::demo::add_11_5(app);
  mgpu::demo::add_11_6(app);
  mgpu::demo::add_11_7(app);
  mgpu::demo::add_11_7_moe(app);
  mgpu::demo::add_11_7_cp(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "mgpu-demo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
