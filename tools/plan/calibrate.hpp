// A hardware file from measurements: a GEMM sweep and all-reduce timings taken on one GPU server
// (the GPU labs' job) turn a preset's estimated efficiencies into measured ones, so the planner
// predicts for the machine the learner actually has. `mgpu plan --calibrate BASE MEASURED OUT`.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "plan/hardware.hpp"

namespace mgpu::planner {

/// What was measured, in the JSON shape
///   {"source": "who measured, where, when",
///    "gemm": [{"flops": 2mnk, "seconds": t}, ...],
///    "all_reduce": [{"bytes": buffer bytes, "ranks": n, "seconds": t}, ...]}
/// with the all-reduces inside one server (NVLink). Either list may be empty, not both.
struct Measurements {
  struct Gemm {
    double flops = 0, seconds = 0;
  };
  struct AllReduce {
    double bytes = 0, ranks = 0, seconds = 0;
  };
  std::string source;
  std::vector<Gemm> gemm;
  std::vector<AllReduce> all_reduce;
};

/// Reads measurements; throws std::invalid_argument naming `where` and the bad entry.
Measurements parse_measurements(const nlohmann::json& j, const std::string& where);

/// `base` with what was measured replacing what it assumed, each replaced field's source now
/// naming the measurement: the GEMM curve becomes the sweep's achieved fraction of peak by size;
/// the NVLink efficiency the best all-reduce bus bandwidth, 2 (n-1)/n bytes / seconds, over the
/// link's rate; the NVLink latency the time of the smallest all-reduce. Fractions above 1 (a
/// preset whose peak is too low for this GPU) are refused with the field named.
Hardware calibrate(const Hardware& base, const Measurements& m);

/// `mgpu plan --calibrate BASE MEASURED OUT`: writes the calibrated file to OUT and prints what
/// changed. Returns 0, or 2 with the reason on `err`.
int run_calibrate_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mgpu::planner
