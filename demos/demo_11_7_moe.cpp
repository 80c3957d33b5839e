// Placeholder until the demo is written.
#include "demo.hpp"

namespace mgpu::demo {

void add_11_7_moe(CLI::App& app) { app.add_subcommand("11_7_moe", "not written yet"); }

}  // namespace mgpu::demo
