// How every lab reports: a relative error against a reference, bytes per GPU from the ledger,
// and one machine-readable `RESULT lab=... key=value ...` line that gpu_labs/check.sh collects.
// Host code only.
#pragma once

#include <mgpu/memory.hpp>

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mgpu::gpu {

/// max_i |got_i - want_i| / max_i |want_i|: the largest error relative to the output's scale.
/// Element-wise relative error is meaningless near zeros, which bf16 outputs have plenty of.
/// Throws if the lengths differ. Returns 0 when both are all zeros, NaN when either holds a NaN
/// (so no tolerance accepts it), infinity for a nonzero result against an all-zero reference.
double max_rel_error(std::span<const double> got, std::span<const double> want);

/// ||got - want||_2 / ||want||_2 (Frobenius for matrices). Throws if the lengths differ. NaN in
/// either gives NaN, as above.
double norm_rel_error(std::span<const double> got, std::span<const double> want);

/// The larger of two errors, NaN if either is: for folding the errors of several outputs or
/// ranks into one, where std::max would drop a NaN that comes second.
double worse_error(double a, double b);

/// True when `err` is a finite number no larger than `tol`: NaN and infinity never pass.
bool within_tolerance(double err, double tol);

/// Byte count as text in binary units with two decimals, e.g. "12.00 MiB" ("512 B" below 1 KiB).
std::string format_bytes(double bytes);

/// The ledger's peak bytes as a table: one line per category ("  weights       12.00 MiB"), then
/// the peak of the total, which is at most the sum of the lines above it.
std::string peak_table(const MemoryLedger& ledger);

/// Builds `RESULT lab=<lab> key=value ...`; values are printed as given, in order.
class ResultLine {
 public:
  /// Starts a line for lab `lab`.
  explicit ResultLine(std::string lab);
  /// Appends key=value (text). Spaces in the value are replaced by '_' to keep the line parseable.
  ResultLine& add(const std::string& key, const std::string& value);
  /// Appends key=value with a number in %.4g form.
  ResultLine& add(const std::string& key, double value);
  /// Appends key=value with an integer printed in full.
  ResultLine& add_int(const std::string& key, long long value);
  /// The whole line, without a newline.
  std::string str() const;

 private:
  std::string lab_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace mgpu::gpu
