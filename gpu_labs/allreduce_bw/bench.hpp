// Lab allreduce_bw, harness: the size sweep, timing and checking of NCCL's collectives and the
// student's ring, and the nccl-tests style table. The table maths is host code, tested anywhere.
#pragma once

#include "common/comm.hpp"
#include "common/dtype.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace mgpu::gpu {

/// One line of the table: one collective at one size.
struct BwRow {
  std::string op;                ///< all_reduce, all_gather, reduce_scatter or ring_all_reduce
  std::size_t bytes = 0;         ///< size as nccl-tests counts it (the larger of input, output)
  std::size_t count = 0;         ///< elements in that buffer
  DType type = DType::f32;       ///< element type
  double us = 0.0;               ///< mean time per call, microseconds (averaged over ranks)
  double algbw = 0.0;            ///< bytes / time, GB/s
  double busbw = 0.0;            ///< algbw * busbw_factor(op, ranks), GB/s
  unsigned long long wrong = 0;  ///< elements differing from the expected sum, over all ranks
  bool implemented = true;       ///< false when the student's ring threw NotImplemented
  std::vector<double> sample;  ///< ring_all_reduce only: this rank's result at kSamplePoints spots
};

/// How many evenly spaced elements of each ring result a row keeps for the grader (the last
/// element is always one of them).
inline constexpr std::size_t kSamplePoints = 64;

/// Fills algbw and busbw of a row from bytes, us and the rank count.
BwRow make_row(const std::string& op, std::size_t bytes, std::size_t count, DType type, double us,
               unsigned long long wrong, int ranks);

/// Sizes min, min*factor, ... up to and including max (bytes; factor >= 2; min >= 4).
std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes,
                                    std::size_t factor);

/// The two header lines of the table (column names, then units).
std::string format_header();
/// One table line, columns aligned with format_header().
std::string format_row(const BwRow& row);

/// What to run in the sweep.
struct SweepOptions {
  std::size_t min_bytes = 1024;       ///< smallest size
  std::size_t max_bytes = 64u << 20;  ///< largest size
  std::size_t factor = 4;             ///< growth between sizes
  int warmup = 2;                     ///< untimed calls per size
  int iters = 10;                     ///< timed calls per size (fewer above 16 MiB)
  bool ring = true;                   ///< also run the student's ring_all_reduce
};

/// Runs the sweep on this rank (call on every rank); returns the same rows on every rank,
/// times averaged over ranks and #wrong summed, as nccl-tests does.
std::vector<BwRow> run_sweep(DeviceComm& comm, const SweepOptions& options);

}  // namespace mgpu::gpu
