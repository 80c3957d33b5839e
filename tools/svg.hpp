// What the tools' hand-written SVG figures share: text escaped for XML.
#pragma once

#include <string>

namespace mgpu::tools {

/// `s` with &, <, > and " written as XML entities, for SVG text and attribute values.
inline std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace mgpu::tools
