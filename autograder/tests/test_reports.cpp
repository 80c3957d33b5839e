// Report formats: Gradescope's results.json has its required fields with the right types, and
// the JUnit XML is well-formed with one testcase per case and a failure for each lost point.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>

#include "gradescope_schema.hpp"
#include "helpers.hpp"
#include "report/report.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

Grade sample_grade() {
  Grade g;
  g.submission = "alice.zip";
  g.seed = 42;
  g.execution_seconds = 3.6;
  g.timings = {{"build", 2.0}, {"total", 3.6}};
  ChapterGrade a;
  a.name = "11_5_pipeline";
  a.title = "11.5 Pipeline parallelism";
  a.cases.push_back({"11_5.bubble", a.name, Visibility::visible, Status::passed, 2, 2, "",
                     "max abs error 0", 0.1});
  a.cases.push_back({"11_5.in_flight", a.name, Visibility::hidden, Status::wrong, 0, 1,
                     "gpipe outside tolerance", "gpipe[0]: got 3, expected <4> & \"5\"\x01", 0.2});
  a.cases.push_back({"11_5.sum", a.name, Visibility::after_due_date, Status::passed, 1, 2,
                     "correct, but over budget", "", 0.1});
  ChapterGrade b;
  b.name = "11_2_data_parallel";
  b.title = "11.2 Data parallelism";
  b.build_failed = true;
  b.build_error = "chapters/11_2_data_parallel/formulas.cpp:3:1: error: expected ';'";
  b.cases.push_back({"11_2.ring", b.name, Visibility::visible, Status::build_failed, 0, 3,
                     b.build_error, b.build_error, 0});
  g.chapters = {a, b};
  return g;
}

bool xmllint_available() { return std::system("command -v xmllint >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("Gradescope results.json has score, execution_time, output, visibility and typed tests") {
  nlohmann::json j = gradescope_report(sample_grade());
  REQUIRE(j["score"].is_number());
  CHECK(j["score"].get<double>() == 3);
  CHECK(j["execution_time"].is_number_integer());
  CHECK(j["output"].is_string());
  CHECK(j["output"].get<std::string>().find("11_2_data_parallel does not compile") !=
        std::string::npos);
  CHECK(j["visibility"] == "visible");
  REQUIRE(j["tests"].is_array());
  REQUIRE(j["tests"].size() == 4);
  const std::set<std::string> visibilities{"visible", "hidden", "after_due_date",
                                           "after_published"};
  for (const auto& t : j["tests"]) {
    CHECK(t["name"].is_string());
    CHECK(t["number"].is_string());
    CHECK(t["score"].is_number());
    CHECK(t["max_score"].is_number());
    CHECK((t["status"] == "passed" || t["status"] == "failed"));
    CHECK(t["output"].is_string());
    CHECK(visibilities.count(t["visibility"].get<std::string>()) == 1);
  }
  CHECK(j["tests"][0]["status"] == "passed");
  CHECK(j["tests"][1]["status"] == "failed");
  CHECK(j["tests"][1]["visibility"] == "hidden");
  CHECK(j["tests"][2]["status"] == "failed");  // lost budget points
  CHECK(j["tests"][2]["visibility"] == "after_due_date");
  CHECK(j["tests"][3]["number"] == "2.1");
  CHECK(gradescope_schema_errors(j).empty());
}

TEST_CASE(
    "with hidden tests the student sees the visible subtotal, not a total that gives the hidden "
    "ones away") {
  nlohmann::json j = gradescope_report(sample_grade());
  const std::string out = j["output"];
  INFO(out);
  CHECK(out.find("Visible tests: 2 of 5 points") !=
        std::string::npos);                               // 11_5.bubble 2/2 and 11_2.ring 0/3
  CHECK(out.find("3 more points") != std::string::npos);  // one hidden, one after the due date
  CHECK(out.find("Score") == std::string::npos);
  CHECK(out.find("of 8") == std::string::npos);
  // Every text is plain text: `std::vector<double>` in a compiler message must not become HTML.
  CHECK(j["output_format"] == "text");
  for (const auto& t : j["tests"]) CHECK(t["output_format"] == "text");
}

TEST_CASE("a secret seed never reaches the student's results.json") {
  Grade g = sample_grade();
  g.hidden_seed = 987654321;
  CHECK(gradescope_report(g).dump().find("987654321") == std::string::npos);
  CHECK(terminal_report(g, false, false).find("987654321") == std::string::npos);
  CHECK(json_report(g)["hidden_seed"] == 987654321);  // the instructor's report keeps it
}

TEST_CASE("the fallback results.json lists every case as failed, with the reason, and conforms") {
  Rubric r = load_rubric(this_project().root / "autograder" / "rubric.json");
  nlohmann::json j = gradescope_fallback(r, "the grader stopped: \xff bad byte");
  CHECK(gradescope_schema_errors(j).empty());
  CHECK(j["score"] == 0);
  CHECK(j["output"].get<std::string>().find("the grader stopped") != std::string::npos);
  std::size_t cases = 0;
  double max = 0;
  for (const auto& ch : r.chapters) {
    cases += ch.cases.size();
    for (const auto& c : ch.cases) max += c.max_score();
  }
  REQUIRE(j["tests"].size() == cases);
  double listed = 0;
  for (const auto& t : j["tests"]) {
    CHECK(t["status"] == "failed");
    CHECK(t["output"] == "the autograder could not run this test");
    listed += t["max_score"].get<double>();
  }
  CHECK(listed == max);
}

TEST_CASE("the schema checker rejects what Gradescope would") {
  CHECK_FALSE(gradescope_schema_errors({{"score", "3"}}).empty());
  CHECK_FALSE(gradescope_schema_errors({{"score", 1}, {"visibility", "secret"}}).empty());
  CHECK_FALSE(
      gradescope_schema_errors({{"score", 1}, {"tests", {{{"status", "skipped"}}}}}).empty());
  CHECK_FALSE(gradescope_schema_errors({{"score", 1}, {"tset", nlohmann::json::array()}}).empty());
  CHECK_FALSE(gradescope_schema_errors({{"output", "no score anywhere"}}).empty());
  CHECK(gradescope_schema_errors({{"score", 1}}).empty());
}

TEST_CASE("JUnit XML is well-formed, escaped, and counts failures") {
  std::string xml = junit_report(sample_grade());
  CHECK(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 0) == 0);
  CHECK(xml.find("<testsuites name=\"mgpu-grade\" tests=\"4\" failures=\"3\" errors=\"0\"") !=
        std::string::npos);
  CHECK(xml.find("<testsuite name=\"11_5_pipeline\" tests=\"3\" failures=\"2\"") !=
        std::string::npos);
  CHECK(xml.find("&lt;4&gt; &amp; &quot;5&quot;") != std::string::npos);
  CHECK(xml.find('\x01') == std::string::npos);
  CHECK(xml.find("type=\"build-failed\"") != std::string::npos);
  // Every opened element is closed in order.
  std::regex tag(R"(<(/?)([a-zA-Z-]+)[^>]*?(/?)>)");
  std::vector<std::string> stack;
  bool balanced = true;
  for (std::sregex_iterator it(xml.begin(), xml.end(), tag), end; it != end; ++it) {
    std::string name = (*it)[2];
    if ((*it)[1] == "/") {
      balanced = balanced && !stack.empty() && stack.back() == name;
      if (!stack.empty()) stack.pop_back();
    } else if ((*it)[3] != "/") {
      stack.push_back(name);
    }
  }
  CHECK(balanced);
  CHECK(stack.empty());
  if (xmllint_available()) {
    fs::path f = testing::fresh_dir("junit") / "report.xml";
    std::ofstream(f) << xml;
    CHECK(std::system(("xmllint --noout " + f.string()).c_str()) == 0);
  }
}

TEST_CASE("the terminal table has a line per case with its reason, and no colour unless asked") {
  std::string t = terminal_report(sample_grade(), false, true);
  MESSAGE(t);
  CHECK(t.find("\033[") == std::string::npos);
  CHECK(t.find("wrong") != std::string::npos);
  CHECK(t.find("gpipe outside tolerance") != std::string::npos);
  CHECK(t.find("build failed: chapters/11_2_data_parallel/formulas.cpp:3:1") != std::string::npos);
  CHECK(t.find("total 3/8") != std::string::npos);
  CHECK(t.find("timings:") != std::string::npos);
  CHECK(terminal_report(sample_grade(), true, false).find("\033[32m") != std::string::npos);
}
