// Visible tests in the student distribution. They run with the same isolation as graded cases,
// with roomier limits, since a whole chapter's tests run in one program.
#include "commands/visible.hpp"

#include <fmt/format.h>

#include <exception>

#include "pipeline/pristine.hpp"
#include "pipeline/stage.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

/// The value of attribute `name` in the XML element text `element`, or -1.
int xml_count(const std::string& element, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const auto at = element.find(key);
  if (at == std::string::npos) return -1;
  try {
    return std::stoi(element.substr(at + key.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

/// Runs a chapter's built test program, isolated, and reads its report into v.
void run_chapter_tests(const fs::path& exe, const GradeOptions& opts, VisibleChapter& v) {
  RunSpec rs;
  rs.exe = fs::absolute(exe);
  rs.args = {"--no-intro", "--reporters=xml"};
  rs.wall_s = 300;
  rs.memory_bytes = 8ull << 30;
  rs.output_cap = 16ull << 20;  // the report lists every test case; its counts come last
  rs.drop_privileges = opts.drop_privileges;
  RunOutcome o = run_process(rs);
  if (read_doctest_report(o.out, v))
    v.summary = fmt::format("{} of {} test cases pass", v.passed, v.cases);
  else if (o.timed_out)
    v.summary = "the tests did not finish within 300 s";
  else
    v.summary = o.signal ? "the tests crashed: " + signal_description(o.signal)
                         : "the tests gave no summary";
}

}  // namespace

bool read_doctest_report(const std::string& xml, VisibleChapter& v) {
  const std::string tag = "<OverallResultsTestCases ";
  const auto at = xml.rfind(tag);
  if (at == std::string::npos) return false;
  const auto end = xml.find('>', at);
  if (end == std::string::npos) return false;
  const std::string element = xml.substr(at, end - at);
  const int passed = xml_count(element, "successes"), failed = xml_count(element, "failures");
  if (passed < 0 || failed < 0) return false;
  v.passed = passed;
  v.failed = failed;
  v.cases = passed + failed;
  // mgpu::NotImplemented's message, "not implemented: <section> <todo>", as the failure's text.
  const std::string missing = "not implemented: ";
  if (const auto m = xml.find(missing); m != std::string::npos && m < at) {
    const auto from = m + missing.size();
    v.next_todo = xml.substr(from, xml.find_first_of("<\n\"", from) - from);
  }
  return true;
}

std::vector<VisibleChapter> run_visible_tests(const fs::path& submission, const Project& project,
                                              const Rubric& rubric, const GradeOptions& opts) {
  std::vector<VisibleChapter> out;
  fs::path base = opts.work_dir / "student" / "visible";
  Staged st = stage_submission(submission, base / "src", rubric, project,
                               pristine_root(project, opts.work_dir));
  fs::path tree = base / "build";
  std::string err;
  {
    Progress p("configuring the build of your chapters");
    err = configure_tree({tree, "student", st.chapters_dir, {}}, project);
  }
  const auto chapters = select_chapters(rubric, opts.chapters);
  for (std::size_t i = 0; i < chapters.size(); ++i) {
    const auto* ch = chapters[i];
    Progress p(fmt::format("building and running the visible tests of {} ({} of {})", ch->name,
                           i + 1, chapters.size()));
    VisibleChapter& v = out.emplace_back();
    v.name = ch->name;
    if (!fs::is_directory(project.root / "chapters" / ch->name / "tests")) {
      v.summary = "no visible tests";
      continue;
    }
    TargetBuild b =
        err.empty() ? build_target(tree, "test_" + ch->name, opts.jobs, project, st.chapters_dir)
                    : TargetBuild{false, "the build could not be configured", err, 0};
    v.build_failed = !b.ok;
    v.build_error = b.first_error;
    if (b.ok) run_chapter_tests(tree / "bin" / ("test_" + ch->name), opts, v);
  }
  return out;
}

std::string visible_report(const std::vector<VisibleChapter>& chapters, bool colour) {
  const char* green = colour ? "\033[32m" : "";
  const char* red = colour ? "\033[31m" : "";
  const char* reset = colour ? "\033[0m" : "";
  std::string s = "visible tests (this copy has no reference solutions)\n\n";
  for (const auto& v : chapters) {
    bool ok = !v.build_failed && v.cases > 0 && v.failed == 0;
    s += fmt::format("  {}{:<24}{} {}\n", ok ? green : red, v.name, reset,
                     v.build_failed ? "does not compile: " + v.build_error : v.summary);
    if (!v.build_failed && !v.next_todo.empty())
      s += fmt::format("  {:<24} next: not implemented: {} (./mgpu hint {})\n", "", v.next_todo,
                       v.next_todo);
  }
  s += "\nGraded cases need the reference solutions, which this distribution does not include.\n"
       "Your points come from your instructor's grader; the tests above check the same properties\n"
       "without the reference, so passing them is the way to prepare.\n";
  return s;
}

}  // namespace mgpu::grade
