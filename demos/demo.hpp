// The chapter demos of `mgpu demo`: each adds its subcommand to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace mgpu::demo {

/// Adds `11_2` (data parallelism: ring all-reduce, data-parallel steps, buckets) to `app`.
void add_11_2(CLI::App& app);
/// Adds `11_3` (ZeRO stages 0-3 on N ranks: the ledger per kind of state and the bytes sent per
/// step beside the formulas, and the memory stack per stage as SVG) to `app`.
void add_11_3(CLI::App& app);
/// Adds `11_4` (one tensor-parallel block at several t: weights, all-reduce bytes, activations
/// and time per rank beside the formulas, across a node boundary at the largest t) to `app`.
void add_11_4(CLI::App& app);
/// Adds `11_5` (GPipe, 1F1B and interleaved 1F1B side by side: bubble, activations in flight per
/// stage and step time beside the formulas) to `app`.
void add_11_5(CLI::App& app);
/// Adds `11_6` (plain, checkpointed every k and selective steps: activation peak, recomputed FLOPs
/// and gradients beside the formulas and the plain step) to `app`.
void add_11_6(CLI::App& app);
/// Adds `11_7` (a 3D-parallel step at any layout, up to the text's 8 x 4 x 32, and tp inside
/// versus across nodes) to `app`.
void add_11_7(CLI::App& app);
/// Adds `11_7_moe` (the expert-parallel layer under even and skewed routing, with and without
/// the load-balancing loss) to `app`.
void add_11_7_moe(CLI::App& app);
/// Adds `11_7_cp` (ring attention at several sequence lengths and c = 1, 2, 4, 8: saved
/// activations, bytes and time per rank beside the formulas; contiguous versus zig-zag compute)
/// to `app`.
void add_11_7_cp(CLI::App& app);

}  // namespace mgpu::demo
