// What the tools' tests share: running a command line in-process, checking a refusal, and a
// deliberately small XML reader for the SVG figures.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tools_test {

/// A command line's exit status and what it printed.
struct Run {
  int status;       ///< exit status
  std::string out;  ///< standard output
  std::string err;  ///< standard error
};

/// Runs `cli(args, out, err)` (run_plan_cli, run_pipeline_cli, ...) and keeps what it printed.
template <class Cli>
Run run_cli(Cli cli, const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = cli(args, out, err);
  return {status, out.str(), err.str()};
}

/// Checks that `args` are refused with exit status `usage` and a message containing `fix`, and
/// that nothing was printed on standard output.
template <class Cli>
void check_refused(Cli cli, int usage, const std::vector<std::string>& args,
                   const std::string& fix) {
  const Run r = run_cli(cli, args);
  std::string line;
  for (const auto& a : args) line += a + " ";
  CAPTURE(line);
  CAPTURE(r.err);
  CHECK(r.status == usage);
  CHECK(r.err.find(fix) != std::string::npos);
  CHECK(r.out.empty());
}

/// One XML element: its name and attributes.
struct Element {
  std::string name;                               ///< tag name
  std::map<std::string, std::string> attributes;  ///< attribute values by name
};

/// Every element of `xml` in document order; `root` receives the root's name. Checks that tags
/// nest and close and that there is one root; text content is skipped, an XML declaration is
/// allowed before the root, comments and doctypes are not expected.
inline std::vector<Element> parse_xml(const std::string& xml, std::string& root) {
  std::vector<Element> elements;
  std::vector<std::string> open;
  const std::regex attribute(R"re(([A-Za-z_:][-\w:.]*)\s*=\s*"([^"]*)")re");
  std::size_t at = 0;
  while ((at = xml.find('<', at)) != std::string::npos) {
    const std::size_t end = xml.find('>', at);
    REQUIRE(end != std::string::npos);
    std::string tag = xml.substr(at + 1, end - at - 1);
    at = end + 1;
    if (tag.rfind('?', 0) == 0) {
      CHECK(elements.empty());
      continue;
    }
    if (tag.rfind('/', 0) == 0) {
      REQUIRE_FALSE(open.empty());
      CHECK(open.back() == tag.substr(1));
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    Element e;
    e.name = tag.substr(0, tag.find_first_of(" \t\n"));
    for (std::sregex_iterator it(tag.begin(), tag.end(), attribute), stop; it != stop; ++it)
      e.attributes[(*it)[1]] = (*it)[2];
    if (open.empty() && root.empty())
      root = e.name;
    else
      REQUIRE_FALSE(open.empty());  // one root: nothing outside it
    if (!self_closing) open.push_back(e.name);
    elements.push_back(std::move(e));
  }
  CHECK(open.empty());
  return elements;
}

}  // namespace tools_test
