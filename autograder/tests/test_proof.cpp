// Chaffs and wheats: a malformed file is rejected with every problem named, an edit applies only
// where its text is, and the verdict follows the named cases (chaff) or the chapter total (wheat).
#include <doctest/doctest.h>

#include "commands/proof.hpp"
#include "helpers.hpp"
#include "pipeline/build.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

const char* kProofRubric = R"({"chapters": {"toy_a": {"files": ["toy_a.cpp"], "cases": {
    "toy_a.add": {"points": 2}, "toy_a.bytes": {"points": 1}}}}})";

// A project root holding one chapter's reference and the given chaff/wheat files.
Project fake_project(const std::string& name,
                     const std::vector<std::pair<std::string, std::string>>& files) {
  fs::path root = fresh_dir("proof_" + name);
  write_text(root / "solutions/toy_a/toy_a.cpp", "int add(int a, int b) { return a + b; }\n");
  for (const auto& [rel, text] : files) write_text(root / rel, text);
  Project p;
  p.root = root;
  return p;
}

Grade grade_with(std::vector<std::pair<double, double>> scores) {
  Grade g;
  ChapterGrade ch;
  ch.name = "toy_a";
  const char* names[] = {"toy_a.add", "toy_a.bytes"};
  for (std::size_t i = 0; i < scores.size(); ++i) {
    CaseGrade c;
    c.name = names[i];
    c.score = scores[i].first;
    c.max_score = scores[i].second;
    c.status = c.score < c.max_score ? Status::wrong : Status::passed;
    c.reason = c.score < c.max_score ? "sum: outside tolerance" : "";
    ch.cases.push_back(c);
  }
  g.chapters.push_back(ch);
  return g;
}

}  // namespace

TEST_CASE(
    "a chaff's edit is applied to the reference, and stale text is an error naming the file") {
  Rubric r = parse_rubric(kProofRubric, "t.json");
  Project p = fake_project(
      "edit",
      {{"autograder/chaff/toy_a/minus.json",
        R"({"description": "subtracts", "must_lose": ["toy_a.add"],
                                         "edits": [{"file": "toy_a.cpp", "find": "a + b", "replace": "a - b"}]})"},
       {"autograder/wheat/toy_a/swapped.json",
        R"({"description": "b + a", "edits": [{"file": "toy_a.cpp", "find": "a + b", "replace": "b + a"}]})"}});
  auto proofs = load_proofs(p, r, {});
  REQUIRE(proofs.size() == 2);
  CHECK(proofs[0].chaff);
  CHECK_FALSE(proofs[1].chaff);
  fs::path out = p.root / "staged";
  stage_proof(proofs[0], p, r, out);
  CHECK(read_text(out / "chapters/toy_a/toy_a.cpp") == "int add(int a, int b) { return a - b; }\n");

  Proof stale = proofs[0];
  stale.edits[0].find = "a * b";
  CHECK_THROWS_WITH_AS(
      stage_proof(stale, p, r, out),
      doctest::Contains("edits[0]: its \"find\" text occurs 0 times in solutions/toy_a/toy_a.cpp"),
      std::runtime_error);
}

TEST_CASE("a malformed chaff is rejected with every problem named") {
  Rubric r = parse_rubric(kProofRubric, "t.json");
  Project p =
      fake_project("bad", {{"autograder/chaff/toy_a/bad.json",
                            R"({"edits": [{"file": "other.cpp", "find": "x", "replace": "y"}],
                                        "must_lose": ["toy_a.nope"], "colour": 1})"}});
  std::string msg;
  try {
    load_proofs(p, r, {});
  } catch (const std::runtime_error& e) {
    msg = e.what();
  }
  CHECK(msg.find("\"description\" missing") != std::string::npos);
  CHECK(msg.find("other.cpp is not one of chapter toy_a's files") != std::string::npos);
  CHECK(msg.find("must_lose names toy_a.nope, which is not a case of chapter toy_a") !=
        std::string::npos);
  CHECK(msg.find("unknown field \"colour\"") != std::string::npos);
}

TEST_CASE(
    "a chaff is caught only when every named case loses points, a wheat only with full marks") {
  Proof chaff;
  chaff.chapter = "toy_a";
  chaff.name = "minus";
  chaff.description = "subtracts";
  chaff.must_lose = {"toy_a.add", "toy_a.bytes"};
  ProofResult both = judge_proof(chaff, grade_with({{0, 2}, {0, 1}}));
  CHECK(both.held);
  CHECK(both.line.find("toy_a.add wrong: sum: outside tolerance") != std::string::npos);
  ProofResult one = judge_proof(chaff, grade_with({{0, 2}, {1, 1}}));
  CHECK_FALSE(one.held);
  CHECK(one.line.find("MISSED") == 0);
  CHECK(one.line.find("full marks on toy_a.bytes") != std::string::npos);

  Proof wheat = chaff;
  wheat.chaff = false;
  CHECK(judge_proof(wheat, grade_with({{2, 2}, {1, 1}})).held);
  ProofResult rejected = judge_proof(wheat, grade_with({{2, 2}, {0, 1}}));
  CHECK_FALSE(rejected.held);
  CHECK(rejected.line.find("REJECTED toy_a/minus") == 0);

  Grade broken = grade_with({{0, 2}});
  broken.chapters[0].build_failed = true;
  CHECK_FALSE(judge_proof(chaff, broken).held);
}

TEST_CASE("a case no chaff must lose is unproved, checked for chapters whose every proof ran") {
  Rubric r = parse_rubric(kProofRubric, "t.json");
  Project p = fake_project("coverage", {{"autograder/chaff/toy_a/minus.json",
                                         R"({"description": "subtracts", "must_lose": ["toy_a.add"],
            "edits": [{"file": "toy_a.cpp", "find": "a + b", "replace": "a - b"}]})"},
                                        {"autograder/wheat/toy_a/swapped.json",
                                         R"({"description": "b + a",
            "edits": [{"file": "toy_a.cpp", "find": "a + b", "replace": "b + a"}]})"}});
  const auto proofs = load_proofs(p, r, {});
  const auto unproved = unproved_cases(proofs, r, {"toy_a"});
  REQUIRE(unproved.size() == 1);
  CHECK(unproved[0]->name == "toy_a.bytes");
  CHECK(unproved[0]->chapter == "toy_a");

  CHECK(whole_chapters(r, {}) == std::vector<std::string>{"toy_a"});
  CHECK(whole_chapters(r, {"toy"}) == std::vector<std::string>{"toy_a"});
  CHECK(whole_chapters(r, {"11_2"}).empty());
  // A filter naming single proofs runs part of a chapter: its coverage is not judged.
  CHECK(whole_chapters(r, {"toy_a/minus"}).empty());
}

TEST_CASE("a proof's slot keeps the previous proof's objects, never a student's") {
  // The stamp configure_tree writes; the second line marks a tree configured for a proof.
  const std::string trusted_stamp = "-DMGPU_IMPL=student\n# trusted: the instructor's proof\n";
  auto slot = [](const std::string& name, const std::string& stamp) {
    fs::path base = fresh_dir("claim_" + name);
    write_text(base / "build" / "mgpu-grade-configure.txt", stamp);
    write_text(base / "build" / "bin" / "cases_toy_a", "program");
    write_text(base / "build" / "libmgpu_toy_a.a", "archive");
    write_text(base / "occupant", "/proofs/first");
    return base;
  };
  SUBCASE("one proof after another: everything stays, ninja rebuilds what changed") {
    fs::path base = slot("proofs", trusted_stamp);
    claim_student_folder(base, "/proofs/second", true);
    CHECK(fs::exists(base / "build" / "bin" / "cases_toy_a"));
    CHECK(fs::exists(base / "build" / "libmgpu_toy_a.a"));
    CHECK(read_text(base / "occupant") == "/proofs/second");
  }
  SUBCASE("a submission after a proof: the proof's programs and archives go") {
    fs::path base = slot("student_after_proof", trusted_stamp);
    claim_student_folder(base, "/uploads/alice.zip", false);
    CHECK_FALSE(fs::exists(base / "build" / "bin" / "cases_toy_a"));
    CHECK_FALSE(fs::exists(base / "build" / "libmgpu_toy_a.a"));
  }
  SUBCASE("a proof after a submission: the submission's programs and archives go") {
    fs::path base = slot("proof_after_student", "-DMGPU_IMPL=student\n");
    claim_student_folder(base, "/proofs/second", true);
    CHECK_FALSE(fs::exists(base / "build" / "bin" / "cases_toy_a"));
    CHECK_FALSE(fs::exists(base / "build" / "libmgpu_toy_a.a"));
    CHECK(read_text(base / "occupant") == "/proofs/second");
  }
}
