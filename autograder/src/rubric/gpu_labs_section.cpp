// The rubric's "gpu_labs" section: which files of each lab students write, and the lab cases
// (which lab, its arguments, limits, and how its outputs are compared). Read with the same
// checker as the chapters, so its problems read the same way.
#include <fmt/format.h>

#include <cstdint>

#include "rubric/checker.hpp"

namespace mgpu::grade::rubric_check {
namespace {

// c[key] as a number >= 0 (> 0 when positive); the lab section's own wording of the problem.
std::optional<double> lab_number(Checker& ck, const ojson& c, const std::string& key,
                                 const std::string& field, bool positive, const char* example) {
  if (!c.contains(key)) return std::nullopt;
  const ojson& v = c.at(key);
  if (v.is_number() && (positive ? v.get<double>() > 0 : v.get<double>() >= 0))
    return v.get<double>();
  ck.fail(field + "." + key, positive ? "expected a number > 0" : "expected a number >= 0",
          fmt::format("write e.g. {}", example));
  return std::nullopt;
}

// "files": lab folder -> the plain names of the files students write in it.
void parse_lab_files(Checker& ck, const ojson& files, const std::string& field, GpuLabsSpec& out) {
  if (!files.is_object()) {
    ck.fail(field + ".files", "expected an object of lab -> file names",
            R"(write {"tp_ffn": ["tp_ffn.cpp", "gelu.cu"]})");
    return;
  }
  for (const auto& [lab, fl] : files.items()) {
    bool ok = plain_name(lab) && fl.is_array() && !fl.empty();
    for (const auto& f : fl) ok = ok && f.is_string() && plain_name(f.get<std::string>());
    if (!ok)
      ck.fail(field + ".files." + lab,
              "expected a lab folder name and a non-empty array of plain file names",
              "list the files students edit in gpu_labs/<lab>/");
    else
      for (const auto& f : fl) out.files[lab].push_back(f.get<std::string>());
  }
}

// A case's "visibility" and "args".
void parse_lab_choices(Checker& ck, const ojson& c, const std::string& cf, GpuLabCase& g) {
  if (auto vis = ck.visibility(c, cf)) g.visibility = *vis;
  if (c.contains("args")) {
    bool ok = c.at("args").is_array();
    if (ok)
      for (const auto& a : c.at("args")) ok = ok && a.is_string();
    if (ok)
      for (const auto& a : c.at("args")) g.args.push_back(a.get<std::string>());
    else
      ck.fail(cf + ".args", "expected an array of strings",
              R"(write ["--ranks", "4", "--backend", "emulated"])");
  }
}

// A case's "error": the measure its outputs are compared by.
void parse_lab_error(Checker& ck, const ojson& c, const std::string& cf, GpuLabCase& g) {
  if (!c.contains("error")) return;
  const std::string e = c.at("error").is_string() ? c.at("error").get<std::string>() : "";
  if (e == "max_rel")
    g.error = LabError::max_rel;
  else if (e == "norm_rel")
    g.error = LabError::norm_rel;
  else
    ck.fail(cf + ".error", "unknown error measure " + c.at("error").dump(),
            R"(use "max_rel" or "norm_rel")");
}

// One entry of "cases": its lab must be one "files" lists.
void parse_lab_case(Checker& ck, const std::string& name, const ojson& c, const std::string& cf,
                    GpuLabsSpec& out) {
  if (!c.is_object()) {
    ck.fail(cf, "expected an object", R"(write {"lab": "tp_ffn", "points": 2})");
    return;
  }
  ck.known_keys(c, cf,
                {"lab", "points", "visibility", "args", "time_limit_s", "memory_mb", "error",
                 "tolerance", "description"});
  GpuLabCase g;
  g.name = name;
  if (c.contains("lab") && c.at("lab").is_string() &&
      out.files.count(c.at("lab").get<std::string>()))
    g.lab = c.at("lab").get<std::string>();
  else
    ck.fail(cf + ".lab", "missing, or not a lab listed in gpu_labs.files",
            "name a lab folder that gpu_labs.files lists");
  if (auto p = lab_number(ck, c, "points", cf, false, "2")) g.points = *p;
  parse_lab_choices(ck, c, cf, g);
  if (auto t = lab_number(ck, c, "time_limit_s", cf, true, "300")) g.time_limit_s = *t;
  if (auto m = lab_number(ck, c, "memory_mb", cf, true, "16384")) g.memory_mb = *m;
  parse_lab_error(ck, c, cf, g);
  if (auto t = lab_number(ck, c, "tolerance", cf, false, "0.02")) g.tolerance = *t;
  out.cases.push_back(std::move(g));
}

}  // namespace

void parse_gpu_labs(Checker& ck, const ojson& v, GpuLabsSpec& out) {
  const std::string field = "gpu_labs";
  if (!v.is_object()) {
    ck.fail(field, "expected an object",
            R"(write {"files": {"tp_ffn": ["tp_ffn.cpp"]}, "cases": {...}})");
    return;
  }
  ck.known_keys(v, field, {"title", "files", "cases", "labs_per_gpu", "description"});
  if (v.contains("labs_per_gpu")) {
    const ojson& k = v.at("labs_per_gpu");
    if (k.is_number_integer() && k.get<std::int64_t>() >= 1 && k.get<std::int64_t>() <= 64)
      out.labs_per_gpu = k.get<int>();
    else
      ck.fail(field + ".labs_per_gpu", "expected a whole number from 1 to 64, got " + k.dump(),
              "write 1 (the default: one lab per GPU at a time), or more where the labs' shapes "
              "fit the device's memory together");
  }
  if (v.contains("title")) {
    if (v.at("title").is_string())
      out.title = v.at("title").get<std::string>();
    else
      ck.fail(field + ".title", "expected a string", "write a title such as \"GPU labs\"");
  }
  if (v.contains("files")) parse_lab_files(ck, v.at("files"), field, out);
  if (!v.contains("cases") || !v.at("cases").is_object()) {
    ck.fail(field + ".cases", "missing or not an object",
            R"(write {"gpu.tp_ffn": {"lab": "tp_ffn", "points": 2}})");
    return;
  }
  for (const auto& [name, c] : v.at("cases").items())
    parse_lab_case(ck, name, c, field + ".cases." + name, out);
}

}  // namespace mgpu::grade::rubric_check
