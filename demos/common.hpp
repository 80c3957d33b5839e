// What every chapter demo prints with: byte and time formats, predictions that may still be a
// student's TODO, and whose code the program was built with.
#pragma once

#include <functional>
#include <string>

#include "mgpu/cluster.hpp"

namespace mgpu::demo {

/// Bytes as "12 B", "3.4 KiB" or "5.67 MiB".
std::string human_bytes(double bytes);
/// Seconds as microseconds, "12.3 us".
std::string us(double seconds);
/// `show(formula())`, or "TODO" when the formula is still a skeleton (throws NotImplemented).
std::string predict(const std::function<double()>& formula,
                    const std::function<std::string(double)>& show);
/// True when the program runs the reference solutions, false for the student's chapters.
bool reference_build();
/// A cluster of `ranks` slow GPUs on slow links (`flops` per second, `bandwidth` bytes/s inside a
/// node, a ninth of it between nodes: the default NVLink to InfiniBand ratio), so that a small
/// demo's compute and exchanges take visible time.
ClusterConfig slow_cluster(int ranks, double flops, double bandwidth);
/// "the reference" or "your", so that no output calls the reference the student's own.
std::string whose();

}  // namespace mgpu::demo
