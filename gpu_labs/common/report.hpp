// How every lab reports: an error against a reference, bytes per GPU from the ledger,
// and one machine-readable `RESULT lab=... key=value ...` line that gpu_labs/check.sh collects.
// Host code only.
#pragma once

#include <mgpu/memory.hpp>
#include <mgpu_test/mismatch.hpp>

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mgpu::gpu {

// A whole output's error against its reference, from the project's comparison core
// (testing/mgpu_test/mismatch.hpp), which the visible tests and the grader diagnose through too.
using mgpu_test::norm_rel_error;
using mgpu_test::scaled_max_error;
using mgpu_test::within_tolerance;
using mgpu_test::worse_error;

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
