// What every chapter demo prints with: byte and time formats, whose code the program was built
// with, traces and files. The measured-beside-formula table and its verdict are in table.hpp.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "mgpu/cluster.hpp"

namespace mgpu::demo {

/// Bytes as "12 B", "3.4 KiB" or "5.67 MiB".
std::string human_bytes(double bytes);
/// Seconds as microseconds, "12.3 us".
std::string us(double seconds);
/// True when the program runs the reference solutions, false for the student's chapters.
bool reference_build();
/// Whose code a demo runs, for its "code:" line: the reference solutions of `chapter` (its folder,
/// e.g. "11_4_tensor_parallel") or the student's own.
std::string code_line(const std::string& chapter);
/// A cluster of `ranks` slow GPUs on slow links (`flops` per second, `bandwidth` bytes/s inside a
/// node, a ninth of it between nodes: the default NVLink to InfiniBand ratio), so that a small
/// demo's compute and exchanges take visible time.
ClusterConfig slow_cluster(int ranks, double flops, double bandwidth);
/// "the reference" or "your", so that no output calls the reference the student's own.
std::string whose();
/// Several runs' Chrome traces (Cluster::chrome_trace) as one: each run's ranks become
/// processes named "<label>: rank r", numbered after the previous run's, so that Perfetto shows
/// the runs one above the other on a shared time axis that starts at 0 for each.
std::string merge_chrome_traces(
    const std::vector<std::pair<std::string, std::string>>& labelled_traces);
/// Writes `text` to `path`; throws std::runtime_error naming the path when it cannot.
void write_file(const std::string& path, const std::string& text);

}  // namespace mgpu::demo
