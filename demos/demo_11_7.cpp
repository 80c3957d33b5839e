// Placeholder until the demo is written.
#include "demo.hpp"

namespace mgpu::demo {

void add_11_7(CLI::App& app) { app.add_subcommand("11_7", "not written yet"); }

}  // namespace mgpu::demo
