// The rubric's checker: how every section of rubric.json (the chapters and the GPU labs alike)
// names a problem by file and field, with the fix, and collects all of them before the rubric is
// refused. Internal to rubric/.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rubric/rubric.hpp"

namespace mgpu::grade::rubric_check {

using ojson = nlohmann::ordered_json;

/// The problems found so far in one rubric file.
struct Checker {
  std::string file;
  std::vector<std::string> errors;

  /// Records "FILE: FIELD: problem; fix: FIX".
  void fail(const std::string& field, const std::string& problem, const std::string& fix) {
    errors.push_back(fmt::format("{}: {}: {}; fix: {}", file, field, problem, fix));
  }

  /// Every key of obj outside `known` is an error naming the keys that are.
  void known_keys(const ojson& obj, const std::string& field, const std::set<std::string>& known) {
    for (const auto& [k, v] : obj.items()) {
      if (!known.count(k)) {
        std::string list;
        for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
        fail(field + "." + k, "unknown field", "remove it or use one of: " + list);
      }
    }
  }

  /// obj[key] as a finite number >= lo (> lo when lo_open); nullopt when absent or wrong.
  std::optional<double> number(const ojson& obj, const std::string& key, const std::string& field,
                               double lo, bool lo_open = false) {
    if (!obj.contains(key)) return std::nullopt;
    const auto& v = obj.at(key);
    std::string f = field + "." + key;
    if (!v.is_number()) {
      fail(f, "expected a number, got " + v.dump(),
           fmt::format("write a number such as {}", std::max(lo + 1, 1.0)));
      return std::nullopt;
    }
    double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || (lo_open && d == lo)) {
      fail(f, fmt::format("{} is out of range", d),
           fmt::format("use a finite number {} {}", lo_open ? ">" : ">=", lo));
      return std::nullopt;
    }
    return d;
  }

  /// obj["visibility"] as a Visibility; nullopt when absent or not one.
  std::optional<Visibility> visibility(const ojson& obj, const std::string& field) {
    if (!obj.contains("visibility")) return std::nullopt;
    const ojson& vis = obj.at("visibility");
    auto v = parse_visibility(vis.is_string() ? vis.get<std::string>() : "");
    if (!v) fail(field + ".visibility", "unknown visibility " + vis.dump(), kVisibilityFix);
    return v;
  }

  /// A {"rtol", "atol"} object.
  PartialTolerance tolerance(const ojson& v, const std::string& field) {
    PartialTolerance t;
    if (!v.is_object()) {
      fail(field, "expected an object, got " + v.dump(), R"(write {"rtol": 1e-6, "atol": 1e-9})");
      return t;
    }
    known_keys(v, field, {"rtol", "atol"});
    t.rtol = number(v, "rtol", field, 0);
    t.atol = number(v, "atol", field, 0);
    return t;
  }
};

/// A file name directly inside a folder: no '/', no "..", not hidden, not empty.
inline bool plain_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s.find("..") == std::string::npos &&
         s[0] != '.';
}

/// Reads the rubric's "gpu_labs" section into `out` (rubric/gpu_labs_section.cpp).
void parse_gpu_labs(Checker& ck, const ojson& section, GpuLabsSpec& out);

}  // namespace mgpu::grade::rubric_check
