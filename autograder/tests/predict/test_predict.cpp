// `./mgpu predict`: the questions read from a README (fixtures/README.md uses every rule of
// README.md beside this file), malformed READMEs named by file and line, the record, the
// command run on a fixture checkout, and the grader's report and submission of the record.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "commands/distribute.hpp"
#include "records/predictions.hpp"
#include "records/records.hpp"
#include "report/hints.hpp"
#include "report/report.hpp"

using namespace mgpu::grade;
namespace fs = std::filesystem;

namespace {

const fs::path kFixture = fs::path(MGPU_PREDICT_FIXTURES) / "fixtures" / "README.md";

// A fresh folder of this test's own.
fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("mgpu-test-predict-" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void put(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The message read_questions throws for a README holding text.
std::string error_for(const std::string& text) {
  const fs::path f = scratch("malformed") / "README.md";
  put(f, text);
  try {
    read_questions(f);
  } catch (const PredictError& e) {
    return e.what();
  }
  return "(no error)";
}

struct Outcome {
  int rc = -1;
  std::string out, err;
};

// Runs mgpu-predict with args in checkout, as ./mgpu does (the root as the working folder).
Outcome predict(const fs::path& checkout, const std::string& args, const fs::path& record) {
  const fs::path out = checkout / "out.txt", err = checkout / "err.txt";
  const std::string cmd = "cd '" + checkout.string() + "' && MGPU_PREDICTIONS_LOG='" +
                          record.string() + "' '" + MGPU_PREDICT_EXE + "' " + args + " >'" +
                          out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read(out), read(err)};
}

}  // namespace

TEST_CASE("the questions of a README: numbered items in predict sections, with their commands") {
  const auto qs = read_questions(kFixture);
  std::vector<int> numbers;
  for (const auto& q : qs) numbers.push_back(q.number);
  // Not the items before the section, in its code fence or answer, nor under "Your TODO list";
  // 8, outside every predict section, says "predict" in its first line.
  CHECK(numbers == std::vector<int>{1, 2, 3, 8, 5, 6});
  CHECK(qs[0].text.rfind("Four stages: how many micro-batches", 0) == 0);
  CHECK(qs[0].measures.empty());
  // The first paragraph, its lines joined; the annotation is no part of the text.
  CHECK(qs[1].text ==
        "Four stages and eight micro-batches: predict the bubble, then run the pipeline tool.");
  REQUIRE(qs[1].measures.size() == 1);
  CHECK(qs[1].measures[0].command ==
        R"(printf 'schedule gpipe\nbubble fraction: 0.2727 (3/11)\n')");
  CHECK(qs[1].measures[0].label == "bubble fraction");
  // The line numbers a student is pointed to are the file's own.
  std::ifstream in(kFixture);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  CHECK(lines.at(static_cast<std::size_t>(qs[1].line - 1)).rfind("2. Four stages", 0) == 0);
  CHECK(lines.at(static_cast<std::size_t>(qs[1].measures[0].line - 1)).find("<!-- predict:") !=
        std::string::npos);
  // Two annotations on one question; the command's own pipe stays in the command.
  REQUIRE(qs[3].measures.size() == 1);
  CHECK(qs[3].measures[0].label == "peak bytes per rank");
  REQUIRE(qs[4].measures.size() == 2);
  CHECK(qs[4].measures[1].command == R"(printf 'x 1\n' | sed 's/x/1F1B stage 0 idle fraction/')");
  CHECK(qs[4].measures[1].label == "1f1b STAGE 0 idle fraction");
}

TEST_CASE("a README that cannot be read as questions is an error naming the file and line") {
  CHECK(error_for("# 11.9\n\n## Predict, then run\n\nNo numbered item here.\n")
            .find("README.md: no predict-then-run questions found") != std::string::npos);
  CHECK(error_for("## Predict\n\n1. one\n\n2. two\n\n1. again\n")
            .find("README.md:7: question 1 again (the first is on line 3)") != std::string::npos);
  CHECK(error_for("## Predict\n\n1. one\n<!-- predict: ./mgpu plan -->\n")
            .find("README.md:4: a predict annotation needs a command and") != std::string::npos);
  CHECK(error_for("## Predict\n\n1. one\n<!-- predict: | bubble -->\n")
            .find("README.md:4: a predict annotation needs a command") != std::string::npos);
  CHECK(error_for("## Predict\n\n1. one\n<!-- predict: ./mgpu plan | bubble\n")
            .find("README.md:4: a predict annotation must close on its line") != std::string::npos);
  CHECK(error_for("<!-- predict: ./mgpu plan | bubble -->\n## Predict\n\n1. one\n")
            .find("README.md:1: a predict annotation outside every question") != std::string::npos);
  CHECK(error_for("## Predict\n\n1. one\n\n## Other\n\n<!-- predict: ./mgpu plan | x -->\n")
            .find("README.md:7: a predict annotation outside every question") != std::string::npos);
  CHECK(
      error_for("## Predict\n\n1. one\n\n## TODO\n\n2. a TODO\n<!-- predict: ./mgpu plan | x -->\n")
          .find("README.md:8: a predict annotation outside every question") != std::string::npos);
  // Other comments are no annotations.
  CHECK(error_for("## Predict\n\n<!-- a note -->\n1. one\n") == "(no error)");
  try {
    read_questions(scratch("absent") / "README.md");
    FAIL("a missing README was read");
  } catch (const PredictError& e) {
    CHECK(std::string(e.what()).find("absent/README.md: cannot be read") != std::string::npos);
  }
}

TEST_CASE("the measured value is the number right after the label, on the label's line") {
  const std::string out = "schedule gpipe (p=4)\nbubble fraction: 0.2727 (3/11)\nmemory 12%\n";
  CHECK(measured_value(out, "bubble fraction") == "0.2727");
  CHECK(measured_value(out, "BUBBLE FRACTION") == "0.2727");
  CHECK(measured_value(out, "bubble") == std::nullopt);  // a word between label and value
  CHECK(measured_value(out, "memory") == "12%");
  CHECK(measured_value("time 1.5e+03 s", "time") == "1.5e+03");
  CHECK(measured_value("peak -\nlater 5", "peak") == std::nullopt);  // not from the next line
  CHECK(measured_value("total = -2.5e-3 s", "total") == "-2.5e-3");
  // A row that waits for a chapter function names it; its section number is no measurement.
  CHECK(measured_value("Pipeline bubble: finish 11.5 gpipe_bubble_fraction", "pipeline bubble") ==
        std::nullopt);
  CHECK(measured_value(out, "absent") == std::nullopt);
}

TEST_CASE("the record: appended in order, the latest value wins, malformed lines are counted") {
  const fs::path record = scratch("record") / "sub" / "predictions.tsv";
  CHECK(read_predictions(record).empty());
  append_prediction(record, {"11_5_pipeline", 2, "about\t0.27\n", "2026-12-01T10:00:00Z"});
  append_prediction(record, {"11_5_pipeline", 2, "0.2727", "2026-12-01T10:01:00Z"});
  append_prediction(record, {"11_3_zero", 1, "8 GPUs", utc_now()});
  CHECK(read(record).rfind("11_5_pipeline\t2\tabout 0.27 \t2026-12-01T10:00:00Z\n", 0) == 0);
  std::ofstream(record, std::ios::app) << "garbage line\n11_5\tx\t1\tt\n\n";
  int skipped = -1;
  const auto lines = read_predictions(record, &skipped);
  CHECK(lines.size() == 3);
  CHECK(skipped == 2);
  CHECK(latest_prediction(lines, "11_5_pipeline", 2) == "0.2727");
  CHECK(latest_prediction(lines, "11_3_zero", 1) == "8 GPUs");
  CHECK(latest_prediction(lines, "11_3_zero", 2) == std::nullopt);
  CHECK(utc_now().size() == 20);
}

TEST_CASE("mgpu predict lists, records, refuses to measure before a prediction, then measures") {
  const fs::path checkout = scratch("checkout");
  fs::create_directories(checkout / "chapters" / "11_9_fixture");
  fs::copy_file(kFixture, checkout / "chapters" / "11_9_fixture" / "README.md");
  fs::create_directories(checkout / "chapters" / "11_8_other");
  put(checkout / "chapters" / "11_8_other" / "README.md", "# no questions\n");
  const fs::path record = checkout / "rec" / "predictions.tsv";

  Outcome o = predict(checkout, "11.9", record);
  INFO(o.out);
  INFO(o.err);
  CHECK(o.rc == 0);
  CHECK(o.out.find("chapters/11_9_fixture/README.md") != std::string::npos);
  CHECK(o.out.find("  2  -             yes  Four stages and eight") != std::string::npos);

  o = predict(checkout, "11_9 2", record);  // measuring first is refused
  CHECK(o.rc == 2);
  CHECK(o.err.find("predict first: ./mgpu predict 11_9_fixture 2 VALUE") != std::string::npos);
  CHECK(!fs::exists(record));

  o = predict(checkout, "11_9 2 0.25 or so", record);
  CHECK(o.rc == 0);
  CHECK(read(record).rfind("11_9_fixture\t2\t0.25 or so\t20", 0) == 0);
  o = predict(checkout, "11_9_fixture", record);
  CHECK(o.out.find("  2  0.25 or so    yes") != std::string::npos);

  o = predict(checkout, "11_9 2", record);
  CHECK(o.rc == 0);
  CHECK(o.out.find("bubble fraction: 0.2727 (3/11)") != std::string::npos);  // the run, shown
  CHECK(o.out.find(
            "bubble fraction                           measured 0.2727      yours 0.25 or so") !=
        std::string::npos);

  predict(checkout, "11_9 5 0.27", record);
  o = predict(checkout, "11_9 5", record);
  CHECK(o.rc == 0);
  CHECK(o.out.find("measured 0.2725") != std::string::npos);
  CHECK(o.out.find("measured 1 ") != std::string::npos);

  predict(checkout, "11_9 6 3", record);
  o = predict(checkout, "11_9 6", record);
  CHECK(o.rc == 1);
  // Each line speaks to the student: what their output lacks, or which of their functions the
  // row waits for and the hint to open, never the README's line.
  CHECK(o.out.find("not measured: its output above has no number after 'peak'") !=
        std::string::npos);
  CHECK(o.out.find("not measured: it needs your 11.9 peak_bytes, not written yet; write it, then "
                   "ask again (./mgpu hint 11.9 peak_bytes if you are stuck)") !=
        std::string::npos);
  CHECK(o.out.find("not measured: it needs your 11.9 total_bytes") != std::string::npos);
  // The README's place is named once, in the question's heading, and not in any line above.
  CHECK(o.out.find("README.md:") == o.out.rfind("README.md:"));

  o = predict(checkout, "11_9 1", record);  // no command: says so
  CHECK(o.rc == 0);
  CHECK(o.out.find("names no command to measure") != std::string::npos);

  o = predict(checkout, "11_9 4 1", record);
  CHECK(o.rc == 2);
  CHECK(o.err.find("has no question '4'; its questions are 1, 2, 3, 8, 5, 6") != std::string::npos);
  o = predict(checkout, "11_7", record);
  CHECK(o.rc == 2);
  CHECK(o.err.find("no chapter is called '11_7'; name one of:\n  11_8_other\n  11_9_fixture") !=
        std::string::npos);
  o = predict(checkout, "11_8", record);
  CHECK(o.rc == 2);
  CHECK(o.err.find("chapters/11_8_other/README.md: no predict-then-run questions") !=
        std::string::npos);
  CHECK(read_predictions(record).size() == 3);
}

TEST_CASE("the grader reports the latest prediction per chapter, unscored, and submit packs it") {
  const Rubric r = parse_rubric(
      R"({"chapters": {"11_5_pipeline": {"files": ["a.cpp"], "cases": {"11_5.x": {"points": 2}}},
                       "11_3_zero": {"files": ["b.cpp"], "cases": {"11_3.x": {"points": 1}}}}})",
      "r.json");
  const fs::path dir = scratch("grade");
  put(dir / "predictions.tsv",
      "11_5\t2\t0.25\t2026-12-01T10:00:00Z\n"
      "11_5_pipeline\t2\t0.2727\t2026-12-01T10:01:00Z\n"
      "11_5\t5\tthe same\t2026-12-01T10:02:00Z\n"
      "11_9_unknown\t1\tx\t2026-12-01T10:03:00Z\n");
  std::vector<std::string> notes;
  const PredictionsMade made = read_predictions_by_chapter(dir / "predictions.tsv", r, notes);
  CHECK(made.size() == 1);
  CHECK(made.at("11_5_pipeline") == std::map<int, std::string>{{2, "0.2727"}, {5, "the same"}});
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("1 line(s) of the prediction record") != std::string::npos);

  Grade g;
  g.submission = "sub";
  ChapterGrade ch;
  ch.name = ch.title = "11_5_pipeline";
  CaseGrade c;
  c.name = "11_5.x";
  c.status = Status::passed;
  c.score = c.max_score = 2;
  ch.cases.push_back(c);
  g.chapters.push_back(ch);
  apply_predictions(g.chapters, made);
  CHECK(g.score() == 2);  // not scored
  CHECK(
      terminal_report(g, false, false).find("  predictions: 2: 0.2727, 5: the same (not scored)") !=
      std::string::npos);
  CHECK(json_report(g)["chapters"][0]["predictions"]["2"] == "0.2727");
  CHECK(gradescope_report(g)["output"].get<std::string>().find(
            "11_5_pipeline: predictions: 2: 0.2727, 5: the same (not scored)") !=
        std::string::npos);

  // submit: the record travels with the chapter files.
  const fs::path checkout = dir / "checkout";
  put(checkout / "chapters" / "11_5_pipeline" / "a.cpp", "// mine\n");
  put(checkout / kPredictionsRecord, "11_5_pipeline\t2\t0.27\t2026-12-01T10:00:00Z\n");
  const auto files = write_submission(r, checkout / "chapters", dir / "upload.zip");
  CHECK(files.back() == ".mgpu/predictions.tsv");
}

// The course's own questions measure on the reference: each command runs and prints a number
// after its label. A label that drifts from what a tool prints would tell students "not measured"
// for a reason that is not theirs.
TEST_CASE("every question of the course's READMEs measures a number on the reference") {
  const std::map<std::string, std::string> tools = {{"./mgpu plan ", MGPU_PLAN_EXE},
                                                    {"./mgpu pipeline ", MGPU_PIPELINE_EXE}};
  const fs::path root = MGPU_SOURCE_ROOT;
  int measured = 0;
  for (const auto& chapter : fs::directory_iterator(root / "chapters")) {
    const fs::path readme = chapter.path() / "README.md";
    if (!fs::exists(readme) || read(readme).find("<!-- predict:") == std::string::npos) continue;
    for (const auto& q : read_questions(readme))
      for (const auto& m : q.measures) {
        CAPTURE(readme.string());
        CAPTURE(m.line);
        CAPTURE(m.command);
        std::string command;
        for (const auto& [prefix, exe] : tools)
          if (m.command.rfind(prefix, 0) == 0)
            command = "'" + exe + "' " + m.command.substr(prefix.size());
        REQUIRE_MESSAGE(!command.empty(), "a command of a tool this test does not know yet");
        FILE* p = ::popen(("cd '" + root.string() + "' && " + command + " 2>&1").c_str(), "r");
        REQUIRE(p != nullptr);
        std::string out;
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
        CHECK(::pclose(p) == 0);
        CHECK_MESSAGE(measured_value(out, m.label).has_value(), "no number after '" << m.label
                                                                                    << "' in:\n"
                                                                                    << out);
        ++measured;
      }
  }
  CHECK(measured > 30);  // every chapter's questions were found
}
