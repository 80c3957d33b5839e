// Chrome trace export of the last run's timelines (pid = rank, tid = stream, microseconds),
// readable by https://ui.perfetto.dev and chrome://tracing.
#include "state.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace mgpu {

std::string Cluster::chrome_trace() const {
  using nlohmann::json;
  json events = json::array();
  for (const auto& r : reports()) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r.rank},
                      {"tid", 0},
                      {"args",
                       {{"name", "rank " + std::to_string(r.rank) + " (node " +
                                     std::to_string(r.rank / config().gpus_per_node) + ")"}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", r.rank},
                      {"tid", 0},
                      {"args", {{"sort_index", r.rank}}}});
    // The network lane is named only on ranks that used it (the timing-only calls).
    const bool network = r.clock.network_time() > 0 ||
                         std::any_of(r.clock.timeline().begin(), r.clock.timeline().end(),
                                     [](const Span& sp) { return sp.stream == Stream::network; });
    for (Stream s : {Stream::compute, Stream::comm, Stream::recv, Stream::network}) {
      if (s == Stream::network && !network) continue;
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r.rank},
                        {"tid", static_cast<int>(s)},
                        {"args", {{"name", std::string(to_string(s))}}}});
    }
    for (const Span& sp : r.clock.timeline()) {
      events.push_back({{"name", sp.label},
                        {"cat", std::string(to_string(sp.kind))},
                        {"ph", "X"},
                        {"pid", r.rank},
                        {"tid", static_cast<int>(sp.stream)},
                        {"ts", sp.start * 1e6},
                        {"dur", sp.duration() * 1e6}});
    }
  }
  json trace = {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
  return trace.dump();
}

void Cluster::write_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) {
    throw std::runtime_error("mgpu::Cluster::write_chrome_trace: cannot open '" + path +
                             "' for writing; check that the folder exists and is writable");
  }
  f << chrome_trace() << '\n';
  if (!f)
    throw std::runtime_error("mgpu::Cluster::write_chrome_trace: writing '" + path + "' failed");
}

}  // namespace mgpu
