// A checker for Gradescope's results.json, field by field, from the autograder specification
// (gradescope-autograders.readthedocs.io, "Autograder Specifications"): every key it documents,
// its type and allowed values; anything else is reported, so a typo cannot pass silently.
#pragma once

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mgpu::grade::testing {

/// Every way j breaks the results.json format; empty when it conforms.
inline std::vector<std::string> gradescope_schema_errors(const nlohmann::json& j) {
  std::vector<std::string> errors;
  const std::set<std::string> visibilities{"hidden", "after_due_date", "after_published",
                                           "visible"};
  const std::set<std::string> formats{"text", "html", "simple_format", "md", "ansi"};
  auto check = [&](const nlohmann::json& obj, const std::string& where, const std::string& key,
                   const char* type) {
    if (!obj.contains(key)) return;
    const auto& v = obj[key];
    const std::string t = type;
    bool ok = (t == "number" && v.is_number()) || (t == "string" && v.is_string()) ||
              (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
              (t == "integer" && v.is_number_integer());
    if (!ok) errors.push_back(where + key + ": expected " + t + ", got " + v.dump());
    if (ok && t == "number" && !std::isfinite(v.get<double>()))
      errors.push_back(where + key + ": not finite");
  };
  auto one_of = [&](const nlohmann::json& obj, const std::string& where, const std::string& key,
                    const std::set<std::string>& allowed) {
    if (obj.contains(key) && obj[key].is_string() && !allowed.count(obj[key].get<std::string>()))
      errors.push_back(where + key + ": '" + obj[key].get<std::string>() +
                       "' is not an allowed value");
  };
  if (!j.is_object()) return {"the document is not an object"};
  const std::set<std::string> top{"score",         "execution_time",     "output",
                                  "output_format", "test_output_format", "test_name_format",
                                  "visibility",    "stdout_visibility",  "extra_data",
                                  "tests",         "leaderboard"};
  for (const auto& [k, v] : j.items())
    if (!top.count(k)) errors.push_back("unknown top-level key " + k);
  check(j, "", "score", "number");
  check(j, "", "execution_time", "number");
  check(j, "", "output", "string");
  for (const char* f : {"output_format", "test_output_format", "test_name_format"}) {
    check(j, "", f, "string");
    one_of(j, "", f, formats);
  }
  for (const char* f : {"visibility", "stdout_visibility"}) {
    check(j, "", f, "string");
    one_of(j, "", f, visibilities);
  }
  check(j, "", "extra_data", "object");
  check(j, "", "tests", "array");
  if (!j.contains("score") && !j.contains("tests"))
    errors.push_back("neither a top-level score nor tests");
  if (j.contains("tests") && j["tests"].is_array()) {
    const std::set<std::string> keys{"score",       "max_score",  "status",    "name",
                                     "name_format", "number",     "output",    "output_format",
                                     "tags",        "visibility", "extra_data"};
    for (std::size_t i = 0; i < j["tests"].size(); ++i) {
      const auto& t = j["tests"][i];
      const std::string where = "tests[" + std::to_string(i) + "].";
      if (!t.is_object()) {
        errors.push_back(where + ": not an object");
        continue;
      }
      for (const auto& [k, v] : t.items())
        if (!keys.count(k)) errors.push_back(where + "unknown key " + k);
      for (const char* f : {"score", "max_score"}) check(t, where, f, "number");
      for (const char* f :
           {"status", "name", "name_format", "number", "output", "output_format", "visibility"})
        check(t, where, f, "string");
      one_of(t, where, "status", {"passed", "failed"});
      one_of(t, where, "name_format", formats);
      one_of(t, where, "output_format", formats);
      one_of(t, where, "visibility", visibilities);
      check(t, where, "tags", "array");
      check(t, where, "extra_data", "object");
      if (!j.contains("score") && !t.contains("score"))
        errors.push_back(where + "score: needed without a top-level score");
    }
  }
  // dump() throws on invalid UTF-8; accept() proves the text parses back.
  try {
    if (!nlohmann::json::accept(j.dump())) errors.push_back("the dump does not parse back");
  } catch (const std::exception& e) {
    errors.push_back(std::string("not serialisable as UTF-8 JSON: ") + e.what());
  }
  return errors;
}

}  // namespace mgpu::grade::testing
