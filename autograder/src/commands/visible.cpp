// Visible tests in the student distribution. They run with the same isolation as graded cases,
// with roomier limits, since a whole chapter's tests run in one program.
#include "commands/visible.hpp"

#include <fmt/format.h>

#include <regex>

#include "pipeline/pristine.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {

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
    VisibleChapter v;
    v.name = ch->name;
    if (!fs::is_directory(project.root / "chapters" / ch->name / "tests")) {
      v.summary = "no visible tests";
      out.push_back(v);
      continue;
    }
    TargetBuild b =
        err.empty() ? build_target(tree, "test_" + ch->name, opts.jobs, project, st.chapters_dir)
                    : TargetBuild{false, "the build could not be configured", err, 0};
    if (!b.ok) {
      v.build_failed = true;
      v.build_error = b.first_error;
      out.push_back(v);
      continue;
    }
    RunSpec rs;
    rs.exe = fs::absolute(tree / "bin" / ("test_" + ch->name));
    rs.args = {"--no-intro", "--force-colors=false"};
    rs.wall_s = 300;
    rs.memory_bytes = 8ull << 30;
    rs.drop_privileges = opts.drop_privileges;
    RunOutcome o = run_process(rs);
    static const std::regex summary(
        R"(test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed)");
    std::smatch m;
    if (std::regex_search(o.out, m, summary)) {
      v.cases = std::stoi(m[1]);
      v.passed = std::stoi(m[2]);
      v.failed = std::stoi(m[3]);
      v.summary = fmt::format("{} of {} test cases pass", v.passed, v.cases);
    } else if (o.timed_out) {
      v.summary = "the tests did not finish within 300 s";
    } else {
      v.summary = o.signal ? "the tests crashed: " + signal_description(o.signal)
                           : "the tests gave no summary";
    }
    out.push_back(v);
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
  }
  s += "\nGraded cases need the reference solutions, which this distribution does not include.\n"
       "Your points come from your instructor's grader; the tests above check the same properties\n"
       "without the reference, so passing them is the way to prepare.\n";
  return s;
}

}  // namespace mgpu::grade
