// Hints a student opened: the record `./mgpu hint` writes is read per rubric chapter, priced by
// the rubric's hint_cost (nothing by default), shown in every report, and packed by submit.
#include <doctest/doctest.h>

#include <fstream>

#include "commands/distribute.hpp"
#include "helpers.hpp"
#include "records/predictions.hpp"
#include "report/hints.hpp"
#include "report/report.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

const char* kHintRubric = R"({"hint_cost": [0, 0.5, 1.5],
  "chapters": {"11_2_data_parallel": {"files": ["a.cpp"], "cases": {"11_2.x": {"points": 2}}},
               "11_3_zero": {"files": ["b.cpp"], "cases": {"11_3.x": {"points": 1}}}},
  "gpu_labs": {"files": {"tp_ffn": ["tp_ffn.cpp"]}, "cases": {"gpu.tp_ffn": {"lab": "tp_ffn"}}}})";

ChapterGrade chapter(const std::string& name, double points) {
  ChapterGrade ch;
  ch.name = name;
  ch.title = name;
  CaseGrade c;
  c.name = name + ".x";
  c.status = Status::passed;
  c.score = c.max_score = points;
  ch.cases.push_back(c);
  return ch;
}

}  // namespace

TEST_CASE(
    "the rubric's hint_cost is three prices, none by default, and a wrong one is named with a "
    "fix") {
  CHECK(parse_rubric(R"({"chapters": {}})", "r.json").hint_cost == std::array<double, 3>{0, 0, 0});
  CHECK(parse_rubric(kHintRubric, "r.json").hint_cost == std::array<double, 3>{0, 0.5, 1.5});
  try {
    parse_rubric(R"({"chapters": {}, "hint_cost": [1, -1]})", "r.json");
    FAIL("a malformed hint_cost was accepted");
  } catch (const RubricError& e) {
    CHECK(std::string(e.what()).find("r.json: hint_cost: expected three numbers >= 0") !=
          std::string::npos);
  }
}

TEST_CASE(
    "the record is read per chapter, keeping each TODO's highest level, what fits nothing is "
    "noted") {
  const Rubric r = parse_rubric(kHintRubric, "r.json");
  fs::path dir = fresh_dir("hints_record");
  put(dir / "hints.tsv",
      "11_2\tring reduce-scatter\t1\t2026-11-30T10:00:00Z\n"
      "11_2_data_parallel\tring reduce-scatter\t2\t2026-11-30T10:05:00Z\n"
      "11_2\tring reduce-scatter\t1\t2026-11-30T10:09:00Z\n"
      "11_3_zero\tshard\t3\t2026-11-30T11:00:00Z\n"
      "tp_ffn\tforward\t1\t2026-11-30T12:00:00Z\n"
      "11_9_unknown\tx\t1\t2026-11-30T12:00:00Z\n"
      "11_3_zero\tshard\t7\t2026-11-30T12:00:00Z\n");
  std::vector<std::string> notes;
  const HintsSeen seen = read_hints(dir / "hints.tsv", r, notes);
  CHECK(seen.at("11_2_data_parallel").at("ring reduce-scatter") == 2);
  CHECK(seen.at("11_3_zero").at("shard") == 3);
  CHECK(seen.at("gpu_labs").at("tp_ffn: forward") == 1);
  CHECK(seen.size() == 3);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("2 line(s)") != std::string::npos);
  CHECK(notes[0].find("11_9_unknown") != std::string::npos);

  std::vector<std::string> none;
  CHECK(read_hints(dir / "missing.tsv", r, none).empty());
  CHECK(none.empty());

  // Priced: level 2 costs 0.5 and level 3 costs 1.5; a chapter never drops below 0.
  std::vector<ChapterGrade> chapters{chapter("11_2_data_parallel", 2), chapter("11_3_zero", 1),
                                     chapter("gpu_labs", 3)};
  apply_hints(chapters, seen, r);
  CHECK(chapters[0].hint_cost == 0.5);
  CHECK(chapters[0].score() == 1.5);
  CHECK(chapters[1].hint_cost == 1.5);
  CHECK(chapters[1].score() == 0);
  CHECK(chapters[2].score() == 3);  // level 1 is free here
  CHECK(hints_summary(chapters[0]) == "ring reduce-scatter (level 2); -0.5 points");

  Grade g;
  g.submission = "sub";
  g.chapters = chapters;
  CHECK(g.score() == 4.5);
  CHECK(terminal_report(g, false, false)
            .find("  hints opened: ring reduce-scatter (level 2); -0.5 points") !=
        std::string::npos);
  const auto j = json_report(g);
  CHECK(j["chapters"][0]["hints"]["ring reduce-scatter"] == 2);
  CHECK(j["chapters"][0]["hint_cost"] == 0.5);
  const auto gs = gradescope_report(g);
  CHECK(gs["score"] == 4.5);
  CHECK(gs["output"].get<std::string>().find(
            "11_3_zero: hints opened: shard (level 3); -1.5 points") != std::string::npos);
}

TEST_CASE("a graded submission's hint and prediction records reach the report, submit packs it" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("hints_grade");
  fs::path sub = toy_submission(dir / "sub", "");
  fs::copy_file(fixtures() / "toy/solution/toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp",
                fs::copy_options::overwrite_existing);
  put(sub / kHintsRecord, "toy_a\tscale\t2\t2026-11-30T10:00:00Z\n");
  put(sub / kPredictionsRecord, "toy_a\t2\t0.27\t2026-11-30T09:00:00Z\n");  // never priced
  put(dir / "priced.json", R"({"chapters": {}, "hint_cost": [0, 1, 2]})");
  fs::path json = dir / "grade.json";
  RunOutcome o = grader(toy_args({"grade", sub.string(), "--json", json.string(), "--rubric",
                                  (dir / "priced.json").string()}));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  CHECK(o.out.find("hints opened: scale (level 2); -1 points") != std::string::npos);
  CHECK(o.out.find("predictions: 2: 0.27 (not scored)") != std::string::npos);
  const auto j = nlohmann::json::parse(read_text(json));
  CHECK(chapter_score(j, "toy_a") == 4);  // 5 points less the level-2 hint
  CHECK(j["score"].get<double>() == j["max_score"].get<double>() - 1);

  // submit: the record travels with the chapter files.
  fs::path checkout = dir / "checkout";
  fs::create_directories(checkout / "chapters" / "toy_a");
  put(checkout / "chapters" / "toy_a" / "toy_a.cpp", "// mine\n");
  put(checkout / kHintsRecord, "toy_a\tscale\t1\t2026-11-30T10:00:00Z\n");
  Rubric r = load_rubrics(this_project().root / "autograder" / "rubric.json",
                          {fixtures() / "toy" / "rubric.json"});
  auto files = write_submission(r, checkout / "chapters", dir / "upload.zip");
  CHECK(files.back() == ".mgpu/hints.tsv");
}
