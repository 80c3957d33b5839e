// The result descriptor's bytes into the one shape the judge reads (see result_parse.hpp). Every
// check is a loop or a typed test on one level of the document; nothing here recurses on the
// document's depth, and nothing that can throw (allocation, the parser) escapes.
#include "pipeline/result_parse.hpp"

#include <fmt/format.h>

#include <new>

#include "util.hpp"

namespace mgpu::grade {
namespace {

using json = nlohmann::json;

// The length of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one (a stray
// continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a cut sequence).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto at = [&](std::size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u;
  };
  const unsigned b0 = at(0);
  auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return at(k) >= lo && at(k) <= hi;
  };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (b0 >= 0xE1 && b0 <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (b0 == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// A name from the document, short enough for a one-line reason.
std::string shown(const std::string& name) {
  constexpr std::size_t kShow = 60;
  return name.size() <= kShow ? name : truncate_utf8(name, kShow) + "...";
}

bool is_number_or_special(const json& e) {
  if (e.is_number()) return true;
  if (!e.is_string()) return false;
  const auto& s = e.get_ref<const std::string&>();
  return s == "nan" || s == "inf" || s == "-inf";
}

// A number or an array of numbers, copied element by element; "" when fine, else the problem.
std::string copy_numbers(const json& in, json& out, const std::string& what) {
  if (is_number_or_special(in)) {
    out = in;
    return "";
  }
  if (!in.is_array()) return fmt::format("has {} that is neither a number nor an array", what);
  out = json::array();
  out.get_ref<json::array_t&>().reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!is_number_or_special(in[i]))
      return fmt::format("has {} whose element {} is not a number", what, i);
    out.push_back(in[i]);
  }
  return "";
}

// An optional string field of `obj`: absent is fine; kept cut to kResultMaxText.
std::string copy_string(const json& obj, const char* key, json& out, const std::string& what) {
  auto it = obj.find(key);
  if (it == obj.end()) return "";
  if (!it->is_string()) return fmt::format("has {}{} that is not a string", what, key);
  out[key] = truncate_utf8(it->get_ref<const std::string&>(), kResultMaxText);
  return "";
}

std::string check_name(const std::string& name, const char* section) {
  if (name.size() > kResultMaxText)
    return fmt::format("has a name in {} longer than {} bytes", section, kResultMaxText);
  return "";
}

std::string copy_values(const json& in, json& out) {
  if (!in.is_object()) return "has values that are not an object";
  out = json::object();
  for (auto it = in.begin(); it != in.end(); ++it) {
    const std::string& name = it.key();
    if (std::string p = check_name(name, "values"); !p.empty()) return p;
    const std::string what = fmt::format("a value '{}'", shown(name));
    const json& v = it.value();
    json copy;
    if (v.is_array()) {  // a GPU lab's output
      if (std::string p = copy_numbers(v, copy, what); !p.empty()) return p;
    } else if (v.is_object()) {  // a case's value
      auto data = v.find("data");
      if (data == v.end()) return fmt::format("has {} without data", what);
      json d;
      if (std::string p = copy_numbers(*data, d, what + " whose data"); !p.empty()) return p;
      copy = json::object();
      copy["data"] = std::move(d);
      for (const char* key : {"dtype", "index"})
        if (std::string p = copy_string(v, key, copy, what + " with a "); !p.empty()) return p;
    } else {
      return fmt::format("has {} that is neither an object nor an array", what);
    }
    out[name] = std::move(copy);
  }
  return "";
}

std::string copy_measures(const json& in, json& out) {
  if (!in.is_object()) return "has measures that are not an object";
  out = json::object();
  for (auto it = in.begin(); it != in.end(); ++it) {
    if (std::string p = check_name(it.key(), "measures"); !p.empty()) return p;
    if (!is_number_or_special(it.value()))
      return fmt::format("has a measure '{}' that is not a number", shown(it.key()));
    out[it.key()] = it.value();
  }
  return "";
}

ParsedResult validate_unguarded(const json& doc) {
  ParsedResult r;
  auto fail = [&](std::string problem) {
    r.ok = false;
    r.doc = json();
    r.problem = std::move(problem);
    return r;
  };
  if (!doc.is_object()) return fail("is not a JSON object");
  auto status = doc.find("status");
  if (status == doc.end()) return fail("lacks a status");
  if (!status->is_string()) return fail("has a status that is not a string");
  r.doc = json::object();
  for (const char* key : {"status", "message", "type"})
    if (std::string p = copy_string(doc, key, r.doc, "a "); !p.empty()) return fail(p);
  if (r.doc["status"] == "ok") {
    json values = json::object(), measures = json::object();
    if (auto v = doc.find("values"); v != doc.end())
      if (std::string p = copy_values(*v, values); !p.empty()) return fail(p);
    if (auto m = doc.find("measures"); m != doc.end())
      if (std::string p = copy_measures(*m, measures); !p.empty()) return fail(p);
    r.doc["values"] = std::move(values);
    r.doc["measures"] = std::move(measures);
  }
  r.ok = true;
  return r;
}

}  // namespace

std::string scan_json(std::string_view bytes, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false, closed = false;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_length(bytes, i);
      if (n == 0) return fmt::format("holds invalid UTF-8 at byte {}", i);
      i += n - 1;
      continue;  // outside a string the parser rejects it
    }
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"') {
        in_string = false;
        closed = closed || depth == 0;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (closed)
      return fmt::format("holds more than one JSON document (a second begins at byte {})", i);
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return fmt::format("is nested deeper than {} levels (at byte {})", max_depth, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      closed = --depth == 0;
    }
  }
  if (in_string || depth > 0)
    return fmt::format("is cut short: it ends inside {} (after {} bytes)",
                       in_string ? "a string" : fmt::format("{} open brackets", depth),
                       bytes.size());
  return "";
}

ParsedJson parse_json_bounded(std::string_view bytes, std::size_t max_depth) {
  ParsedJson r;
  try {
    if (bytes.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      r.problem = "is empty";
      return r;
    }
    r.problem = scan_json(bytes, max_depth);
    if (!r.problem.empty()) return r;
    r.doc = json::parse(bytes);
    r.ok = true;
  } catch (const json::exception& e) {
    // The parser's own words, cut short: they quote the token it stopped at.
    r.problem = "is not valid JSON (" + truncate_utf8(e.what(), 200) + ")";
  } catch (const std::bad_alloc&) {
    r.problem = "is too large for the grader to read";
  } catch (const std::exception& e) {
    r.problem = "could not be read (" + truncate_utf8(e.what(), 200) + ")";
  }
  if (!r.ok) r.doc = json();
  return r;
}

ParsedResult validate_result(const json& doc) {
  try {
    return validate_unguarded(doc);
  } catch (const std::bad_alloc&) {
    return {false, json(), "is too large for the grader to read"};
  } catch (const std::exception& e) {
    return {false, json(), "could not be read (" + truncate_utf8(e.what(), 200) + ")"};
  }
}

ParsedResult parse_result(std::string_view bytes) {
  ParsedJson p = parse_json_bounded(bytes, kResultMaxDepth);
  if (!p.ok) return {false, json(), std::move(p.problem)};
  return validate_result(p.doc);
}

}  // namespace mgpu::grade
