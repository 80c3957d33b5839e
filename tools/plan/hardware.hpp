// A GPU cluster as the step-time model sees it: a small JSON file per preset
// (tools/plan/hardware/*.json), every number with the document it comes from. A user copies a
// preset, edits it for their cluster, and passes the file to `mgpu plan --hardware FILE`.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mgpu::planner {

/// Achieved fraction of a peak rate against the size of the work, interpolated linearly in
/// log10(size) between points and held flat beyond the first and last.
struct EfficiencyCurve {
  std::vector<std::pair<double, double>> points;  ///< (size, fraction), sizes ascending
  /// The fraction at `size`; precondition: points is not empty.
  double at(double size) const;
};

/// One preset. Rates are per GPU and per direction; latencies are one collective's or one
/// send's fixed cost in seconds.
struct Hardware {
  std::string name;                  ///< e.g. "a100-80gb"
  std::string description;           ///< one line: GPU, server, network
  double peak_flops = 0;             ///< dense bf16 tensor-core FLOP/s of one GPU
  double hbm_bytes_per_s = 0;        ///< HBM bandwidth of one GPU
  double memory_bytes = 0;           ///< HBM capacity of one GPU
  std::int64_t gpus_per_server = 0;  ///< GPUs on one NVLink/NVSwitch domain
  double nvlink_bytes_per_s = 0;     ///< NVLink bandwidth of one GPU, one direction
  double nvlink_latency_s = 0;       ///< fixed cost of one collective inside a server
  double network_bytes_per_s = 0;    ///< network bandwidth of one GPU (its own NIC), one direction
  double network_latency_s = 0;      ///< fixed cost of one collective or send across servers
  EfficiencyCurve gemm;              ///< fraction of peak_flops a GEMM of F FLOPs achieves
  double hbm_efficiency = 0;         ///< fraction of hbm_bytes_per_s a memory-bound kernel achieves
  double nvlink_efficiency = 0;      ///< fraction of nvlink_bytes_per_s a large collective achieves
  double network_efficiency = 0;     ///< fraction of network_bytes_per_s a large transfer achieves
  /// Fraction of peak_flops a fused attention kernel achieves, forward and backward, on the
  /// FLOPs it performs (a causal mask's skipped half not counted). Separate from the GEMM curve:
  /// softmax and the online rescaling sit between its matmuls, so it falls well short of them.
  double fused_attention_efficiency = 0;
  /// Time a real training run adds to every kernel the model prices (launch gaps, framework
  /// work between kernels, clocks lower under a whole server's load), as a fraction of that
  /// modelled compute time. The one constant fitted to published runs: `mgpu plan --reproduce`
  /// refits it on the anchors' fitted group and prints it beside this value.
  double compute_overhead = 0;
  std::map<std::string, std::string> sources;  ///< field name -> where its number comes from
};

/// Reads a hardware description from JSON. Every field is an object {"value": ..., "source":
/// "..."}; a missing field, a missing or empty source, or a non-positive number throws
/// std::invalid_argument naming the field and `where` (the file).
Hardware parse_hardware(const nlohmann::json& j, const std::string& where);

/// The same description as JSON, sources included: parse_hardware(to_json(h)) gives h back.
nlohmann::ordered_json hardware_to_json(const Hardware& h);

/// The folder of the presets and the anchors file (tools/plan in the source tree).
std::string plan_data_dir();

/// Names of the presets, e.g. {"a100-80gb", "h100-sxm", "h200-sxm"}.
std::vector<std::string> hardware_presets();

/// A preset by name, or a JSON file by path (anything containing '/' or ending in .json).
/// Throws tools::UsageError naming the presets when neither exists, std::invalid_argument for a
/// malformed file.
Hardware load_hardware(const std::string& name_or_file);

}  // namespace mgpu::planner
