// Lab tp_ffn, harness: sets up each rank's buffers, checks the student's forward and backward
// against the float64 reference on a small shape, times them on a large one, and times the
// single-GPU baselines (the unsplit FFN and the bare cuBLAS GEMMs of the same shapes).
#pragma once

#include "common/comm.hpp"
#include "tp_ffn/reference.hpp"
#include "tp_ffn/tp_ffn.hpp"

#include <string>

namespace mgpu::gpu {

/// FLOPs of one forward + backward of the FFN on one rank: 6 GEMMs of 2 B d (f / t) each.
double ffn_step_flops(const FfnShape& shape, int ranks);

/// Throws with the fix unless t divides f and every size is positive.
void validate_shape(const FfnShape& shape, int ranks, const std::string& what);

/// The largest hidden width f' <= f that `ranks` divides with every rank's slice f' / ranks a
/// multiple of `align` (keeps the GEMMs on tensor-core friendly sizes); f itself when it already
/// fits. Used for default shapes when the rank count (3, say) does not divide f. Throws when no
/// positive width fits.
int fit_hidden_to_ranks(int f, int ranks, int align = 8);

/// The check problem: inputs rounded to bf16 and the float64 reference outputs.
struct FfnProblem {
  FfnShape shape;  ///< sizes
  MatD x;          ///< (B, d) input
  MatD w1;         ///< (d, f)
  MatD w2;         ///< (f, d)
  MatD dy;         ///< (B, d) incoming gradient
  MatD y;          ///< (B, d) reference output
  MatD dx;         ///< (B, d) reference input gradient
  MatD dw1;        ///< (d, f) reference gradient of w1
  MatD dw2;        ///< (f, d) reference gradient of w2
};

/// Random inputs for `shape` (seeded) and their reference outputs.
FfnProblem make_problem(const FfnShape& shape, std::uint32_t seed);

/// One rank's measured results.
struct FfnRankResult {
  double err = 0.0;       ///< largest scaled_max_error over y, dx, dw1, dw2 (this rank's blocks)
  double err_norm = 0.0;  ///< largest norm_rel_error over the same
  MatD y;                 ///< this rank's y on the check problem (replicated)
  MatD dx;                ///< this rank's dx on the check problem (replicated)
  MatD dw1;               ///< this rank's block of dW1 on the check problem
  MatD dw2;               ///< this rank's block of dW2 on the check problem
  double ms = 0.0;        ///< mean forward + backward time on the timing shape
  MemoryLedger memory;    ///< a copy of this rank's ledger after the timing shape ran
};

/// On one rank: check against `problem`, then time `perf` (warmup + iters steps).
FfnRankResult tp_ffn_rank(DeviceComm& comm, const FfnProblem& problem, const FfnShape& perf,
                          int warmup, int iters);

/// Single-GPU baselines for `perf` on t ranks, on device 0 through a one-rank emulated
/// communicator: the unsplit FFN (the same code at t = 1), and the six bare cuBLAS GEMMs of one
/// rank's shapes ((B, d) x (d, f/t) and so on), back to back with nothing between them: the rate
/// a rank's FFN cannot beat, so tp per-GPU rate / GEMM rate is the share lost to GELU, the
/// all-reduces and launch gaps.
struct FfnBaseline {
  double ffn_ms = 0.0;   ///< unsplit forward + backward (full f)
  double gemm_ms = 0.0;  ///< the six GEMMs of one rank's shapes (f / t)
};

/// Measures FfnBaseline (warmup + iters of each).
FfnBaseline ffn_baselines(const FfnShape& perf, int ranks, int warmup, int iters);

}  // namespace mgpu::gpu
