// Hardware presets as data: parsing, writing back, and finding a preset by name. Nothing here
// holds a number; every one is in a JSON file beside its source.
#include "plan/hardware.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "errors.hpp"

#ifndef MGPU_PLAN_DATA_DIR
#error "MGPU_PLAN_DATA_DIR must name the folder of the planner's data files (tools/CMakeLists.txt)"
#endif

namespace mgpu::planner {

double EfficiencyCurve::at(double size) const {
  if (points.empty()) throw std::logic_error("EfficiencyCurve::at: the curve has no points");
  if (size <= points.front().first) return points.front().second;
  if (size >= points.back().first) return points.back().second;
  for (std::size_t i = 1; i < points.size(); ++i)
    if (size <= points[i].first) {
      const auto [x0, y0] = points[i - 1];
      const auto [x1, y1] = points[i];
      const double f = (std::log10(size) - std::log10(x0)) / (std::log10(x1) - std::log10(x0));
      return y0 + f * (y1 - y0);
    }
  return points.back().second;
}

namespace {

// The fields of a preset, in file order: name in the file, member, whether it is a fraction.
struct Field {
  const char* key;
  double Hardware::*member;
  bool fraction;
};
const Field kFields[] = {
    {"peak_bf16_flops", &Hardware::peak_flops, false},
    {"hbm_bytes_per_s", &Hardware::hbm_bytes_per_s, false},
    {"memory_bytes", &Hardware::memory_bytes, false},
    {"nvlink_bytes_per_s", &Hardware::nvlink_bytes_per_s, false},
    {"nvlink_latency_s", &Hardware::nvlink_latency_s, false},
    {"network_bytes_per_s", &Hardware::network_bytes_per_s, false},
    {"network_latency_s", &Hardware::network_latency_s, false},
    {"hbm_efficiency", &Hardware::hbm_efficiency, true},
    {"nvlink_efficiency", &Hardware::nvlink_efficiency, true},
    {"network_efficiency", &Hardware::network_efficiency, true},
    {"fused_attention_efficiency", &Hardware::fused_attention_efficiency, true},
    {"compute_overhead", &Hardware::compute_overhead, true},
};

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument(fmt::format("hardware file {}: {}", where, what));
}

const nlohmann::json& sourced(const nlohmann::json& j, const char* key, const std::string& where,
                              Hardware& h) {
  if (!j.contains(key)) bad(where, fmt::format("field '{}' is missing", key));
  const nlohmann::json& f = j.at(key);
  if (!f.is_object() || !f.contains("value"))
    bad(where, fmt::format("field '{}' must be {{\"value\": ..., \"source\": \"...\"}}", key));
  if (!f.contains("source") || !f.at("source").is_string() ||
      f.at("source").get<std::string>().empty())
    bad(where, fmt::format("field '{}' has no source: say where its number comes from", key));
  h.sources[key] = f.at("source").get<std::string>();
  return f.at("value");
}

double positive(const nlohmann::json& v, const char* key, const std::string& where, bool fraction) {
  if (!v.is_number()) bad(where, fmt::format("field '{}' must be a number", key));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x <= 0 || (fraction && x > 1))
    bad(where, fmt::format("field '{}' is {}: must be {}", key, x,
                           fraction ? "a fraction in (0, 1]" : "positive"));
  return x;
}

}  // namespace

Hardware parse_hardware(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "must be a JSON object");
  Hardware h;
  if (!j.contains("name") || !j.at("name").is_string()) bad(where, "field 'name' is missing");
  h.name = j.at("name").get<std::string>();
  h.description = j.value("description", "");
  for (const Field& f : kFields)
    h.*f.member = positive(sourced(j, f.key, where, h), f.key, where, f.fraction);
  const double per_server =
      positive(sourced(j, "gpus_per_server", where, h), "gpus_per_server", where, false);
  if (per_server != std::floor(per_server)) bad(where, "field 'gpus_per_server' must be whole");
  h.gpus_per_server = static_cast<std::int64_t>(per_server);
  const nlohmann::json& curve = sourced(j, "gemm_efficiency", where, h);
  if (!curve.is_array() || curve.empty())
    bad(where, "field 'gemm_efficiency' must be a list of [GEMM FLOPs, fraction of peak] pairs");
  for (const auto& p : curve) {
    if (!p.is_array() || p.size() != 2)
      bad(where, "each gemm_efficiency point is [GEMM FLOPs, fraction of peak]");
    const double size = positive(p[0], "gemm_efficiency", where, false);
    const double fraction = positive(p[1], "gemm_efficiency", where, true);
    if (!h.gemm.points.empty() && size <= h.gemm.points.back().first)
      bad(where, "gemm_efficiency points must have ascending GEMM FLOPs");
    h.gemm.points.emplace_back(size, fraction);
  }
  return h;
}

nlohmann::ordered_json hardware_to_json(const Hardware& h) {
  nlohmann::ordered_json j;
  j["name"] = h.name;
  j["description"] = h.description;
  const auto source = [&](const char* key) {
    const auto it = h.sources.find(key);
    return it == h.sources.end() ? std::string("not given") : it->second;
  };
  for (const Field& f : kFields) j[f.key] = {{"value", h.*f.member}, {"source", source(f.key)}};
  j["gpus_per_server"] = {{"value", h.gpus_per_server}, {"source", source("gpus_per_server")}};
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  for (const auto& [size, fraction] : h.gemm.points) curve.push_back({size, fraction});
  j["gemm_efficiency"] = {{"value", curve}, {"source", source("gemm_efficiency")}};
  return j;
}

std::string plan_data_dir() { return MGPU_PLAN_DATA_DIR; }

std::vector<std::string> hardware_presets() {
  std::vector<std::string> out;
  const std::filesystem::path dir = std::filesystem::path(plan_data_dir()) / "hardware";
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

Hardware load_hardware(const std::string& name_or_file) {
  const bool is_file =
      name_or_file.find('/') != std::string::npos ||
      (name_or_file.size() > 5 && name_or_file.compare(name_or_file.size() - 5, 5, ".json") == 0);
  const std::filesystem::path path =
      is_file ? std::filesystem::path(name_or_file)
              : std::filesystem::path(plan_data_dir()) / "hardware" / (name_or_file + ".json");
  std::ifstream in(path);
  if (!in) {
    std::string names;
    for (const auto& n : hardware_presets()) names += (names.empty() ? "" : ", ") + n;
    throw tools::UsageError(
        fmt::format("--hardware {}: no such {}; use a preset ({}) or a JSON file copied from one",
                    name_or_file, is_file ? "file" : "preset", names));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(fmt::format("hardware file {}: {}", path.string(), e.what()));
  }
  return parse_hardware(j, path.string());
}

}  // namespace mgpu::planner
