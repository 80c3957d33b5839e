// Shared formatting of the chapter demos; see common.hpp.
#include "common.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string_view>

namespace mgpu::demo {

std::string human_bytes(double bytes) {
  if (bytes >= 1 << 20) return fmt::format("{:.2f} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:.1f} KiB", bytes / (1 << 10));
  return fmt::format("{:.0f} B", bytes);
}

std::string us(double seconds) { return fmt::format("{:.1f} us", seconds * 1e6); }

ClusterConfig slow_cluster(int ranks, double flops, double bandwidth) {
  ClusterConfig cc;
  cc.world_size = ranks;
  cc.flops_per_second = flops;
  cc.intra_node_bytes_per_second = bandwidth;
  cc.inter_node_bytes_per_second = bandwidth / 9;
  return cc;
}

// MGPU_DEMO_IMPL is set by CMake to the build's MGPU_IMPL.
bool reference_build() { return std::string_view(MGPU_DEMO_IMPL) == "solution"; }
std::string whose() { return reference_build() ? "the reference" : "your"; }
std::string code_line(const std::string& chapter) {
  return reference_build()
             ? "the reference solutions (solutions/" + chapter + "); add --student to run yours"
             : "your chapters/" + chapter + " (the student build)";
}

std::string merge_chrome_traces(
    const std::vector<std::pair<std::string, std::string>>& labelled_traces) {
  using nlohmann::json;
  json events = json::array();
  int offset = 0;
  for (const auto& [label, trace] : labelled_traces) {
    int ranks = 0;
    const json parsed = json::parse(trace);  // kept alive: the loop below walks into it
    for (json e : parsed.at("traceEvents")) {
      const int pid = e.at("pid").get<int>();
      ranks = std::max(ranks, pid + 1);
      e["pid"] = pid + offset;
      if (e.at("name") == "process_name")
        e["args"]["name"] = label + ": " + e["args"]["name"].get<std::string>();
      if (e.at("name") == "process_sort_index") e["args"]["sort_index"] = pid + offset;
      events.push_back(std::move(e));
    }
    offset += ranks;
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  if (!f)
    throw std::runtime_error("cannot open '" + path +
                             "' for writing; check that the folder exists");
  f << text << '\n';
  if (!f) throw std::runtime_error("writing '" + path + "' failed");
}

}  // namespace mgpu::demo
