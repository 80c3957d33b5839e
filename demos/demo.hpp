// The chapter demos of `mgpu demo`: each adds its subcommand to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace mgpu::demo {

/// Adds `11_2` (data parallelism: ring all-reduce, data-parallel steps, buckets) to `app`.
void add_11_2(CLI::App& app);

}  // namespace mgpu::demo
