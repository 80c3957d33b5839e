// Reading and validating the rubric. Every problem is collected (not only the first) and named
// by file and field, with the fix, so an instructor repairs the file in one pass.
#include "rubric/rubric.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rubric/checker.hpp"

namespace mgpu::grade {

using namespace rubric_check;  // Checker, plain_name, parse_gpu_labs

namespace {

const std::set<std::string> kDtypes{"bf16", "fp32", "fp64"};

// One entry of a case's "budgets": nullopt when it is not an object (the checker holds why).
std::optional<Budget> parse_budget(Checker& ck, const ojson& b, const std::string& bf) {
  if (!b.is_object()) {
    ck.fail(bf, "expected an object",
            R"(write {"measure": "bytes_sent", "factor": 1.05, "points": 1})");
    return std::nullopt;
  }
  ck.known_keys(b, bf, {"measure", "factor", "points", "min_factor", "below"});
  Budget bud;
  if (!b.contains("measure") || !b.at("measure").is_string() ||
      b.at("measure").get<std::string>().empty())
    ck.fail(bf + ".measure", "missing or not a string",
            "name the value the case passes to ctx.measure(), e.g. \"bytes_sent\"");
  else
    bud.measure = b.at("measure").get<std::string>();
  if (!b.contains("factor"))
    ck.fail(bf + ".factor", "missing", "give the allowed ratio to the reference, e.g. 1.05");
  else if (auto f = ck.number(b, "factor", bf, 0, true))
    bud.factor = *f;
  if (!b.contains("points"))
    ck.fail(bf + ".points", "missing", "give the budget's points, e.g. 1");
  else if (auto p = ck.number(b, "points", bf, 0))
    bud.points = *p;
  if (b.contains("min_factor")) {
    if (auto f = ck.number(b, "min_factor", bf, 0)) {
      bud.min_factor = *f;
      if (*f > bud.factor)
        ck.fail(bf + ".min_factor", fmt::format("{:g} is above factor {:g}", *f, bud.factor),
                "a floor must lie at or below the budget; lower min_factor");
    }
  }
  if (b.contains("below")) {
    if (!b.at("below").is_string())
      ck.fail(bf + ".below", "expected a string", "say what a measure under the floor means");
    else
      bud.below = b.at("below").get<std::string>();
    if (!b.contains("min_factor"))
      ck.fail(bf + ".below", "given without min_factor",
              "add \"min_factor\": 1.0 or drop \"below\"");
  }
  return bud;
}

void parse_case(Checker& ck, Rubric& r, ChapterSpec& ch, const std::string& name, const ojson& v,
                const std::string& field) {
  CaseSpec c;
  c.name = name;
  c.chapter = ch.name;
  c.time_limit_s = r.time_limit_s;
  c.memory_mb = r.memory_mb;
  if (!v.is_object()) {
    ck.fail(field, "expected an object, got " + v.dump(),
            R"(write {"points": 1, "visibility": "visible"})");
    return;
  }
  ck.known_keys(v, field,
                {"points", "visibility", "dtype", "tolerance", "values", "time_limit_s",
                 "memory_mb", "budgets", "description"});
  if (auto p = ck.number(v, "points", field, 0)) c.points = *p;
  if (auto vis = ck.visibility(v, field)) c.visibility = *vis;
  if (v.contains("dtype")) {
    const auto& d = v.at("dtype");
    if (d.is_string() && kDtypes.count(d.get<std::string>()))
      c.dtype = d.get<std::string>();
    else
      ck.fail(field + ".dtype", "unknown dtype " + d.dump(), "use \"bf16\", \"fp32\" or \"fp64\"");
  }
  if (v.contains("tolerance")) c.tolerance = ck.tolerance(v.at("tolerance"), field + ".tolerance");
  if (v.contains("values")) {
    const auto& vals = v.at("values");
    if (!vals.is_object())
      ck.fail(field + ".values", "expected an object of value name -> tolerance",
              R"(write {"bubble": {"rtol": 1e-9}})");
    else
      for (const auto& [vn, tv] : vals.items())
        c.values[vn] = ck.tolerance(tv, field + ".values." + vn);
  }
  if (auto t = ck.number(v, "time_limit_s", field, 0, true)) c.time_limit_s = *t;
  if (auto m = ck.number(v, "memory_mb", field, 16)) c.memory_mb = *m;
  if (v.contains("budgets")) {
    const auto& bs = v.at("budgets");
    if (!bs.is_array()) {
      ck.fail(field + ".budgets", "expected an array",
              R"(write [{"measure": "bytes_sent", "factor": 1.05, "points": 1}])");
    } else {
      for (std::size_t i = 0; i < bs.size(); ++i)
        if (auto b = parse_budget(ck, bs[i], fmt::format("{}.budgets[{}]", field, i)))
          c.budgets.push_back(*b);
    }
  }
  ch.cases.push_back(std::move(c));
}

}  // namespace

double CaseSpec::max_score() const {
  double s = points;
  for (const auto& b : budgets) s += b.points;
  return s;
}

Tolerance Rubric::tolerance_for(const CaseSpec& c, const std::string& value,
                                const std::string& emitted_dtype) const {
  std::string dt = c.dtype.value_or(emitted_dtype);
  auto it = dtype_tolerance.find(dt);
  Tolerance t = it != dtype_tolerance.end() ? it->second : dtype_tolerance.at("fp64");
  auto apply = [&](const PartialTolerance& p) {
    if (p.rtol) t.rtol = *p.rtol;
    if (p.atol) t.atol = *p.atol;
  };
  apply(c.tolerance);
  // A value's own name wins; otherwise its last dotted part, so that the values a case emits
  // per point ("tp2_pp2.activation_peak_bytes") can share one entry ("activation_peak_bytes").
  if (auto v = c.values.find(value); v != c.values.end()) {
    apply(v->second);
  } else if (const auto dot = value.rfind('.'); dot != std::string::npos) {
    if (auto w = c.values.find(value.substr(dot + 1)); w != c.values.end()) apply(w->second);
  }
  return t;
}

const ChapterSpec* Rubric::chapter(const std::string& name) const {
  for (const auto& c : chapters)
    if (c.name == name) return &c;
  return nullptr;
}

namespace {

// The fields are read in the README's order, each check beside the field it reads, so a field and
// its rule are found together.

ojson parse_document(const std::string& text, const std::string& file) {
  try {
    return ojson::parse(text);
  } catch (const ojson::parse_error& e) {
    throw RubricError(fmt::format(
        "{}: not valid JSON: {}; fix: correct the syntax at that position", file, e.what()));
  }
}

void parse_hint_cost(Checker& ck, const ojson& h, Rubric& r) {
  bool ok = h.is_array() && h.size() == 3;
  for (std::size_t i = 0; ok && i < 3; ++i) ok = h[i].is_number() && h[i].get<double>() >= 0;
  if (ok)
    for (std::size_t i = 0; i < 3; ++i) r.hint_cost[i] = h[i].get<double>();
  else
    ck.fail("hint_cost", "expected three numbers >= 0, got " + h.dump(),
            "write the points a TODO costs when its highest opened hint is level 1, 2 or 3, e.g. "
            "[0, 0.25, 0.5]");
}

void parse_defaults(Checker& ck, const ojson& d, Rubric& r) {
  if (!d.is_object()) {
    ck.fail("defaults", "expected an object", R"(write {"time_limit_s": 10, "memory_mb": 2048})");
    return;
  }
  ck.known_keys(d, "defaults", {"time_limit_s", "memory_mb", "tolerance"});
  if (auto t = ck.number(d, "time_limit_s", "defaults", 0, true)) r.time_limit_s = *t;
  if (auto m = ck.number(d, "memory_mb", "defaults", 16)) r.memory_mb = *m;
  if (!d.contains("tolerance")) return;
  const auto& td = d.at("tolerance");
  if (!td.is_object()) {
    ck.fail("defaults.tolerance", "expected an object of dtype -> tolerance",
            R"(write {"fp32": {"rtol": 1e-5, "atol": 1e-6}})");
    return;
  }
  for (const auto& [dt, tv] : td.items()) {
    if (!kDtypes.count(dt)) {
      ck.fail("defaults.tolerance." + dt, "unknown dtype", "use bf16, fp32 or fp64");
      continue;
    }
    PartialTolerance p = ck.tolerance(tv, "defaults.tolerance." + dt);
    if (p.rtol) r.dtype_tolerance[dt].rtol = *p.rtol;
    if (p.atol) r.dtype_tolerance[dt].atol = *p.atol;
  }
}

// A chapter's "files": plain names directly inside its folder.
void parse_chapter_files(Checker& ck, const ojson& fs, const std::string& field, ChapterSpec& ch) {
  bool ok = fs.is_array() && !fs.empty();
  for (const auto& f : fs) ok = ok && f.is_string();
  if (!ok) {
    ck.fail(field + ".files", "expected a non-empty array of file names",
            R"(list the editable files, e.g. ["formulas.cpp"])");
    return;
  }
  for (const auto& f : fs) {
    std::string s = f.get<std::string>();
    if (!plain_name(s))
      ck.fail(field + ".files", "'" + s + "' is not a plain file name",
              "name a file directly inside the chapter folder");
    else
      ch.files.push_back(s);
  }
}

// One entry of "chapters"; case_names holds the cases of the chapters read so far (a case belongs
// to one chapter). A partial rubric (an overlay) may leave out "files".
void parse_chapter(Checker& ck, Rubric& r, const std::string& cname, const ojson& cv, bool partial,
                   std::set<std::string>& case_names) {
  std::string field = "chapters." + cname;
  ChapterSpec ch;
  ch.name = cname;
  ch.title = cname;
  ch.skeleton = "chapters/" + cname;
  if (!cv.is_object()) {
    ck.fail(field, "expected an object", R"(write {"files": ["formulas.cpp"], "cases": {}})");
    return;
  }
  ck.known_keys(cv, field, {"title", "files", "skeleton", "cases"});
  if (cv.contains("title")) {
    if (cv.at("title").is_string())
      ch.title = cv.at("title").get<std::string>();
    else
      ck.fail(field + ".title", "expected a string", "write a title such as \"11.1 Memory\"");
  }
  if (cv.contains("skeleton")) {
    if (cv.at("skeleton").is_string())
      ch.skeleton = cv.at("skeleton").get<std::string>();
    else
      ck.fail(field + ".skeleton", "expected a string",
              "give the folder of pristine files relative to the project root");
  }
  if (cv.contains("files"))
    parse_chapter_files(ck, cv.at("files"), field, ch);
  else if (!partial)
    ck.fail(field + ".files", "missing",
            R"(list the student-editable files, e.g. "files": ["formulas.cpp"])");
  if (cv.contains("cases")) {
    if (!cv.at("cases").is_object()) {
      ck.fail(field + ".cases", "expected an object of case name -> settings",
              R"(write {"11_1.bytes": {"points": 1}})");
    } else {
      for (const auto& [n, v] : cv.at("cases").items()) {
        if (!case_names.insert(n).second)
          ck.fail(field + ".cases." + n, "case listed in two chapters", "keep it in one chapter");
        parse_case(ck, r, ch, n, v, field + ".cases." + n);
      }
    }
  }
  r.chapters.push_back(std::move(ch));
}

}  // namespace

Rubric parse_rubric(const std::string& text, const std::string& file, bool partial) {
  Checker ck{file, {}};
  const ojson doc = parse_document(text, file);
  Rubric r;
  r.dtype_tolerance = {{"bf16", {1e-2, 1e-2}}, {"fp32", {1e-5, 1e-6}}, {"fp64", {1e-9, 1e-12}}};
  r.sources.push_back(file);
  if (!doc.is_object())
    throw RubricError(
        file + ": top level: expected an object; fix: start the file with {\"chapters\": {...}}");
  ck.known_keys(
      doc, "(top)",
      {"version", "seed", "defaults", "chapters", "gpu_labs", "hint_cost", "description"});
  if (doc.contains("hint_cost")) parse_hint_cost(ck, doc.at("hint_cost"), r);
  if (doc.contains("gpu_labs")) {
    r.gpu_labs.emplace();
    parse_gpu_labs(ck, doc.at("gpu_labs"), *r.gpu_labs);
  }
  if (doc.contains("seed")) {
    if (doc.at("seed").is_number_unsigned())
      r.seed = doc.at("seed").get<std::uint64_t>();
    else
      ck.fail("seed", "expected a non-negative integer, got " + doc.at("seed").dump(),
              "write a seed such as 20251129");
  }
  if (doc.contains("defaults")) parse_defaults(ck, doc.at("defaults"), r);
  if (!doc.contains("chapters") || !doc.at("chapters").is_object()) {
    ck.fail("chapters", "missing or not an object",
            R"(add "chapters": {"11_1_memory": {"files": [...], "cases": {...}}})");
  } else {
    std::set<std::string> case_names;
    for (const auto& [cname, cv] : doc.at("chapters").items())
      parse_chapter(ck, r, cname, cv, partial, case_names);
  }
  if (!ck.errors.empty()) {
    std::string all = fmt::format("{} problem{} in the rubric:", ck.errors.size(),
                                  ck.errors.size() == 1 ? "" : "s");
    for (const auto& e : ck.errors) all += "\n  " + e;
    throw RubricError(all);
  }
  return r;
}

Rubric load_rubric(const std::filesystem::path& file) { return load_rubrics(file, {}); }

Rubric load_rubrics(const std::filesystem::path& main,
                    const std::vector<std::filesystem::path>& extra) {
  auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    if (!in) throw RubricError(p.string() + ": cannot be read; fix: check the path");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::string main_text = read(main);
  parse_rubric(main_text, main.string());  // reports problems against the right file
  ojson merged = ojson::parse(main_text);
  std::vector<std::string> sources{main.string()};
  for (const auto& p : extra) {
    std::string text = read(p);
    parse_rubric(text, p.string(), true);
    ojson add = ojson::parse(text);
    for (const auto& [k, v] : add.items()) {
      if (k == "chapters") continue;
      if (k == "defaults" && merged.contains("defaults"))
        merged["defaults"].merge_patch(v);
      else
        merged[k] = v;
    }
    if (add.contains("chapters"))
      for (const auto& [cn, cv] : add["chapters"].items()) {
        auto& dst = merged["chapters"][cn];
        for (const auto& [k, v] : cv.items()) {
          if (k == "cases")
            for (const auto& [n, c] : v.items()) dst["cases"][n] = c;
          else
            dst[k] = v;
        }
      }
    sources.push_back(p.string());
  }
  std::string label = main.string();
  for (std::size_t i = 1; i < sources.size(); ++i) label += " + " + sources[i];
  Rubric r = parse_rubric(merged.dump(), label);
  r.sources = sources;
  return r;
}

}  // namespace mgpu::grade
