// JUnit XML for CI dashboards: a testsuite per chapter, a testcase per case; every status other
// than passed is a <failure> whose type is the status, a reference problem is an <error>, and a
// case not run here (a GPU case without a device) is <skipped/>.
#include <fmt/format.h>

#include "report/report.hpp"

namespace mgpu::grade {
namespace {

std::string xml_escape(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        r += "&amp;";
        break;
      case '<':
        r += "&lt;";
        break;
      case '>':
        r += "&gt;";
        break;
      case '"':
        r += "&quot;";
        break;
      case '\'':
        r += "&apos;";
        break;
      case '\n':
      case '\t':
      case '\r':
        r += static_cast<char>(c);
        break;
      default:
        if (c < 0x20)
          r += fmt::format("&#x{:x};", 0xFFFD);  // control bytes are not allowed in XML 1.0
        else
          r += static_cast<char>(c);
    }
  }
  return r;
}

}  // namespace

std::string junit_report(const Grade& graded) {
  const Grade g = with_valid_utf8(graded);
  std::size_t tests = 0, failures = 0, errors = 0, skips = 0;
  double time = 0;
  std::string suites;
  for (const auto& ch : g.chapters) {
    std::size_t f = 0, e = 0, sk = 0;
    double t = 0;
    std::string cases;
    for (const auto& c : ch.cases) {
      t += c.seconds;
      cases += fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3f}\">\n",
                           xml_escape(c.name), xml_escape(ch.name), c.seconds);
      std::string msg = xml_escape(
          fmt::format("{}{}", status_name(c.status), c.reason.empty() ? "" : ": " + c.reason));
      if (c.status == Status::skipped) {
        ++sk;
        cases += fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(c.reason));
      } else if (c.status == Status::reference_error) {
        ++e;
        cases += fmt::format("      <error message=\"{}\" type=\"reference-error\">{}</error>\n",
                             msg, xml_escape(c.feedback));
      } else if (c.status != Status::passed || c.score < c.max_score) {
        ++f;
        cases += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", msg,
                             status_name(c.status), xml_escape(c.feedback));
      }
      cases += fmt::format("      <system-out>score {:g} of {:g}</system-out>\n    </testcase>\n",
                           c.score, c.max_score);
    }
    suites += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
        "time=\"{:.3f}\">\n{}  </testsuite>\n",
        xml_escape(ch.name), ch.cases.size(), f, e, sk, t, cases);
    tests += ch.cases.size();
    failures += f;
    errors += e;
    skips += sk;
    time += t;
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mgpu-grade\" tests=\"{}\" "
      "failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n{}</testsuites>\n",
      tests, failures, errors, skips, time, suites);
}

}  // namespace mgpu::grade
