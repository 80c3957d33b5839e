// Measured numbers into a hardware file. The arithmetic is the definitions: achieved FLOP/s over
// peak, and the bus bandwidth of a ring all-reduce (11.2: each GPU sends 2 (n-1)/n of the buffer).
#include "plan/calibrate.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "command_line.hpp"

namespace mgpu::planner {

namespace {

double positive(const nlohmann::json& e, const char* key, const std::string& where) {
  if (!e.contains(key) || !e.at(key).is_number() || !(e.at(key).get<double>() > 0))
    throw std::invalid_argument(
        fmt::format("measurements {}: every entry needs a positive '{}'", where, key));
  return e.at(key).get<double>();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + " cannot be read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace

Measurements parse_measurements(const nlohmann::json& j, const std::string& where) {
  Measurements m;
  if (!j.is_object() || !j.contains("source") || !j.at("source").is_string() ||
      j.at("source").get<std::string>().empty())
    throw std::invalid_argument(
        fmt::format("measurements {}: say where they come from in \"source\"", where));
  m.source = j.at("source").get<std::string>();
  for (const auto& e : j.value("gemm", nlohmann::json::array()))
    m.gemm.push_back({positive(e, "flops", where), positive(e, "seconds", where)});
  for (const auto& e : j.value("all_reduce", nlohmann::json::array())) {
    const double ranks = positive(e, "ranks", where);
    if (ranks < 2)
      throw std::invalid_argument(
          fmt::format("measurements {}: an all-reduce needs at least 2 ranks", where));
    m.all_reduce.push_back({positive(e, "bytes", where), ranks, positive(e, "seconds", where)});
  }
  if (m.gemm.empty() && m.all_reduce.empty())
    throw std::invalid_argument(
        fmt::format("measurements {}: no gemm or all_reduce entries", where));
  return m;
}

Hardware calibrate(const Hardware& base, const Measurements& m) {
  Hardware h = base;
  const auto fraction = [](const char* field, double value) {
    if (value > 1)
      throw std::invalid_argument(fmt::format(
          "calibrate: measured {} is {:.3f} of the preset's rate: the preset's peak is too low "
          "for this GPU; start from a preset of its generation",
          field, value));
    return value;
  };
  if (!m.gemm.empty()) {
    std::vector<Measurements::Gemm> sweep = m.gemm;
    std::sort(sweep.begin(), sweep.end(),
              [](const auto& a, const auto& b) { return a.flops < b.flops; });
    h.gemm.points.clear();
    for (const auto& g : sweep) {
      const double achieved = fraction("gemm_efficiency", g.flops / g.seconds / h.peak_flops);
      if (!h.gemm.points.empty() && h.gemm.points.back().first == g.flops)
        h.gemm.points.back().second = std::max(h.gemm.points.back().second, achieved);
      else
        h.gemm.points.emplace_back(g.flops, achieved);
    }
    h.sources["gemm_efficiency"] = m.source + ": GEMM sweep, achieved FLOP/s over peak by size";
  }
  if (!m.all_reduce.empty()) {
    double best = 0;
    const Measurements::AllReduce* smallest = &m.all_reduce.front();
    for (const auto& a : m.all_reduce) {
      best = std::max(best, 2 * (a.ranks - 1) / a.ranks * a.bytes / a.seconds);
      if (a.bytes < smallest->bytes) smallest = &a;
    }
    h.nvlink_efficiency = fraction("nvlink_efficiency", best / h.nvlink_bytes_per_s);
    h.nvlink_latency_s = smallest->seconds;
    h.sources["nvlink_efficiency"] =
        m.source + fmt::format(": best all-reduce bus bandwidth {:.0f} GB/s", best / 1e9);
    h.sources["nvlink_latency_s"] =
        m.source + fmt::format(": all-reduce of {:.0f} bytes", smallest->bytes);
  }
  return h;
}

int run_calibrate_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 4) {
    err << "usage: mgpu plan --calibrate BASE MEASURED.json OUT.json   (BASE: a preset or file)\n";
    return 2;
  }
  try {
    const Hardware base = load_hardware(args[1]);
    Hardware h = calibrate(base, parse_measurements(read_json(args[2]), args[2]));
    h.name = base.name + "-calibrated";
    tools::write_file(args[3], hardware_to_json(h).dump(2) + "\n");
    out << fmt::format(
        "wrote {}: GEMM efficiency at 1e9 / 1e11 / 1e13 FLOPs {:.2f} / {:.2f} / {:.2f} (was "
        "{:.2f} / {:.2f} / {:.2f}), NVLink efficiency {:.2f} (was {:.2f}), latency {:.1f} us "
        "(was {:.1f}); use it with --hardware {}\n",
        args[3], h.gemm.at(1e9), h.gemm.at(1e11), h.gemm.at(1e13), base.gemm.at(1e9),
        base.gemm.at(1e11), base.gemm.at(1e13), h.nvlink_efficiency, base.nvlink_efficiency,
        h.nvlink_latency_s * 1e6, base.nvlink_latency_s * 1e6, args[3]);
    return 0;
  } catch (const std::exception& e) {
    err << "mgpu plan --calibrate: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mgpu::planner
