// Reading what a case program or GPU lab wrote to the grader's result descriptor. Those bytes
// come from the student's process, so nothing about them is trusted: before any parsing the
// nesting depth, the UTF-8 and the number of documents are checked by a flat scan (a parser or a
// copy of a parsed value that recurses on the document's depth would overflow the grader's stack
// on two million '['), then every field is read by typed access into a fresh document of the one
// shape the judge reads. Anything else is a problem named in one line, never an exception.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mgpu::grade {

/// The deepest result the grader reads: the harness writes 4 levels (document, values, value,
/// data array); the cache entry around a stored result adds one.
inline constexpr std::size_t kResultMaxDepth = 16;
/// The longest status, message, exception type or value name kept from a result, in bytes.
inline constexpr std::size_t kResultMaxText = 4000;

/// A document checked by scan_json and parsed, or the problem.
struct ParsedJson {
  bool ok = false;
  nlohmann::json doc;
  std::string problem;  ///< when !ok: "is nested deeper than 16 levels (at byte 17)"
};

/// One result the judge can read: `doc` holds only
///   status (string), message and type (strings, when given), and for status "ok"
///   values: {name: {data: N | [N...], dtype?: string, index?: string} | [N...]} (cases use the
///   object form, GPU labs the array form), measures: {name: N},
/// where N is a number or "nan", "inf", "-inf"; strings are cut to kResultMaxText.
struct ParsedResult {
  bool ok = false;
  nlohmann::json doc;
  std::string problem;  ///< when !ok: "has a message that is not a string"
};

/// The flat scan: empty when `bytes` is valid UTF-8, nested at most max_depth deep and holds no
/// second document after a first one closed; otherwise what is wrong and where. Linear, no
/// recursion, no allocation beyond the answer.
std::string scan_json(std::string_view bytes, std::size_t max_depth);

/// scan_json, then the parse; never throws.
ParsedJson parse_json_bounded(std::string_view bytes, std::size_t max_depth);

/// Checks the shape of a parsed result (of bounded depth) and copies what the judge reads into
/// a fresh document; never throws.
ParsedResult validate_result(const nlohmann::json& doc);

/// The whole path for the bytes of a result descriptor: parse_json_bounded with kResultMaxDepth,
/// then validate_result; never throws.
ParsedResult parse_result(std::string_view bytes);

}  // namespace mgpu::grade
