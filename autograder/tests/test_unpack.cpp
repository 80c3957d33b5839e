// Hostile uploads and hostile bytes: zips and folders that break an unpacking rule are rejected
// with a message naming the entry, nothing of them is written outside the scratch folder, the
// gradebook keeps its columns, and output that is not UTF-8 cannot stop a report being written.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <zip.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "commands/batch.hpp"
#include "helpers.hpp"
#include "pipeline/build.hpp"
#include "pipeline/stage.hpp"
#include "pipeline/unpack.hpp"
#include "report/report.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

struct ZipEntry {
  std::string name;
  std::string content;
  std::uint32_t mode = S_IFREG | 0644;
};

// A zip written with libzip, Unix modes included, so a test can say exactly what an entry claims.
fs::path make_zip(const fs::path& path, const std::vector<ZipEntry>& entries) {
  fs::create_directories(path.parent_path());
  fs::remove(path);
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z != nullptr);
  for (const auto& e : entries) {
    zip_int64_t idx = -1;
    if (!e.name.empty() && e.name.back() == '/') {
      idx = zip_dir_add(z, e.name.c_str(), ZIP_FL_ENC_UTF_8);
    } else {
      zip_source_t* src =
          zip_source_buffer(z, e.content.data(), e.content.size(), 0);  // read at zip_close
      REQUIRE(src != nullptr);
      idx = zip_file_add(z, e.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    }
    REQUIRE_MESSAGE(idx >= 0, e.name << ": " << zip_strerror(z));
    zip_file_set_external_attributes(z, static_cast<zip_uint64_t>(idx), 0, ZIP_OPSYS_UNIX,
                                     e.mode << 16);
  }
  REQUIRE(zip_close(z) == 0);
  return path;
}

// The zip an attacker makes with the standard tool: its only entry is `chapters ->
// ../../solutions`.
fs::path symlink_zip(const fs::path& dir) {
  fs::path src = dir / "link-src";
  fs::create_directories(src);
  fs::create_directory_symlink("../../solutions", src / "chapters");
  fs::path zip = dir / "symlink.zip";
  REQUIRE(std::system(("cd " + src.string() + " && zip -q --symlinks " + zip.string() + " chapters")
                          .c_str()) == 0);
  return zip;
}

// The rejection's message, or "" when there was none.
template <class F>
std::string rejection(F&& f) {
  try {
    f();
  } catch (const RejectedSubmission& e) {
    return e.what();
  }
  return "";
}

std::size_t entries_in(const fs::path& d) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(d)) ++n;
  return n;
}

const std::string kToyA = "double toy_scale(double x, int k) { return x * k; }\n";

}  // namespace

TEST_CASE("valid_utf8 keeps valid text and replaces each invalid sequence by one U+FFFD") {
  CHECK(valid_utf8("plain ascii\n") == "plain ascii\n");
  const std::string ok = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E";  // é, €, 𝄞
  CHECK(valid_utf8(ok) == ok);
  CHECK(valid_utf8("a\xFF\xFE"
                   "b") == "a" + kReplacement + kReplacement + "b");
  CHECK(valid_utf8("cut \xE2\x82") == "cut " + kReplacement);  // a character cut at the end
  CHECK(valid_utf8("\xE2\x82"
                   "x") == kReplacement + "x");                  // ... or in the middle
  CHECK(valid_utf8("\xC0\xAF") == kReplacement + kReplacement);  // overlong '/'
  CHECK(valid_utf8("\xED\xA0\x80") == kReplacement + kReplacement + kReplacement);  // a surrogate
  CHECK(valid_utf8("\xF4\x90\x80\x80").find('\xF4') == std::string::npos);    // beyond U+10FFFF
  CHECK(valid_utf8(std::string("nul\0ok", 6)) == std::string("nul\0ok", 6));  // NUL is valid UTF-8
}

TEST_CASE("truncate_utf8 never cuts inside a character") {
  const std::string euro =
      "a\xE2\x82\xAC"
      "b";  // a € b: 5 bytes
  CHECK(truncate_utf8(euro, 10) == euro);
  CHECK(truncate_utf8(euro, 5) == euro);
  CHECK(truncate_utf8(euro, 4) == "a\xE2\x82\xAC");
  CHECK(truncate_utf8(euro, 3) == "a");
  CHECK(truncate_utf8(euro, 2) == "a");
  CHECK(truncate_utf8(euro, 1) == "a");
  CHECK(truncate_utf8(euro, 0) == "");
  CHECK(truncate_utf8("\xF0\x9D\x84\x9E", 3) == "");
}

TEST_CASE("every report is written, as valid UTF-8, from feedback holding invalid bytes") {
  Grade g;
  g.submission = "sub\xFF";
  g.notes = {"note \xE2\x82"};
  ChapterGrade ch;
  ch.name = "toy_a";
  ch.title = "toy A";
  ch.build_error = "error: \xC0\xAF";
  CaseGrade c;
  c.name = "toy_a.scale";
  c.chapter = "toy_a";
  c.status = Status::wrong;
  c.max_score = 2;
  c.reason = std::string(200, 'x') + "\xE2\x82\xAC";  // the terminal shortens it: no cut euro
  c.feedback = "stdout: \xFF\xFE then a cut euro \xE2\x82";
  ch.cases.push_back(c);
  g.chapters.push_back(ch);

  std::string json, gradescope;
  REQUIRE_NOTHROW(json = json_report(g).dump());
  REQUIRE_NOTHROW(gradescope = gradescope_report(g).dump());
  auto j = nlohmann::json::parse(json);  // the parser rejects invalid UTF-8
  CHECK(j["chapters"][0]["cases"][0]["feedback"] ==
        "stdout: " + kReplacement + kReplacement + " then a cut euro " + kReplacement);
  CHECK(nlohmann::json::parse(gradescope)["tests"][0]["output"].get<std::string>().find(
            kReplacement) != std::string::npos);
  std::string junit = junit_report(g), table = terminal_report(g, false, false);
  CHECK(valid_utf8(junit) == junit);
  CHECK(junit.find(kReplacement) != std::string::npos);
  CHECK(valid_utf8(table) == table);
}

TEST_CASE("a zip of plain files is extracted, folders and all") {
  fs::path dir = fresh_dir("unpack_good");
  fs::path zip = make_zip(dir / "good.zip", {{"chapters/", "", S_IFDIR | 0755},
                                             {"chapters/toy_a/toy_a.cpp", kToyA},
                                             {"./chapters/toy_b/toy_b.cpp", "// b\n"},
                                             {"notes\\readme.txt", "windows separators\n"}});
  extract_zip(zip, dir / "out");
  CHECK(read_text(dir / "out/chapters/toy_a/toy_a.cpp") == kToyA);
  CHECK(read_text(dir / "out/chapters/toy_b/toy_b.cpp") == "// b\n");
  CHECK(fs::is_regular_file(dir / "out/notes/readme.txt"));
  // A second extraction starts from an empty folder: nothing of an earlier upload survives.
  extract_zip(make_zip(dir / "other.zip", {{"x.cpp", "x"}}), dir / "out");
  CHECK(entries_in(dir / "out") == 1);
}

TEST_CASE("a zip whose only entry is the symlink chapters -> ../../solutions is rejected") {
  fs::path dir = fresh_dir("unpack_symlink");
  std::string why = rejection([&] { extract_zip(symlink_zip(dir), dir / "out"); });
  INFO(why);
  CHECK(why.find("`chapters`") != std::string::npos);
  CHECK(why.find("symbolic link") != std::string::npos);
  CHECK(why.find("fix:") != std::string::npos);
  CHECK(entries_in(dir / "out") == 0);
  // A link that libzip writes the same way, and a device node, are refused too.
  CHECK(!rejection([&] {
           extract_zip(
               make_zip(dir / "l.zip", {{"toy_a/toy_a.cpp", "/etc/passwd", S_IFLNK | 0777}}),
               dir / "out");
         }).empty());
  std::string dev = rejection([&] {
    extract_zip(make_zip(dir / "d.zip", {{"null", "", S_IFCHR | 0666}}), dir / "out");
  });
  CHECK(dev.find("device") != std::string::npos);
}

TEST_CASE("a zip with a `..` or absolute path is rejected before anything is written") {
  fs::path dir = fresh_dir("unpack_traversal");
  // The harmless entry comes first: it must not be written either.
  std::string why = rejection([&] {
    extract_zip(
        make_zip(dir / "evil.zip", {{"toy_a/toy_a.cpp", kToyA}, {"../evil.cpp", "int evil;"}}),
        dir / "out");
  });
  INFO(why);
  CHECK(why.find("`../evil.cpp`") != std::string::npos);
  CHECK(why.find("..") != std::string::npos);
  CHECK(!fs::exists(dir / "evil.cpp"));
  CHECK(entries_in(dir / "out") == 0);
  CHECK(!rejection([&] {
           extract_zip(make_zip(dir / "deep.zip", {{"a/../../evil.cpp", "x"}}), dir / "out");
         }).empty());
  std::string abs = rejection([&] {
    extract_zip(make_zip(dir / "abs.zip", {{"/tmp/evil.cpp", "x"}}), dir / "out");
  });
  CHECK(abs.find("absolute") != std::string::npos);
}

TEST_CASE("zip bombs stop at the caps: one file, all files, number of entries") {
  fs::path dir = fresh_dir("unpack_bomb");
  // 2 MiB of zeros deflate to a few KiB: the cap is counted on what comes out, not on the header.
  std::string big(kMaxSubmissionFileBytes + 1, '\0');
  std::string why = rejection([&] {
    extract_zip(make_zip(dir / "bomb.zip", {{"toy_a/toy_a.cpp", big}}), dir / "out");
  });
  INFO(why);
  CHECK(fs::file_size(dir / "bomb.zip") < 64 * 1024);
  CHECK(why.find("`toy_a/toy_a.cpp`") != std::string::npos);
  CHECK(why.find("1 MiB") != std::string::npos);

  std::string just_under(kMaxSubmissionFileBytes, 'a');
  std::vector<ZipEntry> many;
  for (std::uint64_t i = 0; i * kMaxSubmissionFileBytes <= kMaxSubmissionBytes; ++i)
    many.push_back({fmt::format("f{}.txt", i), just_under});
  std::string total =
      rejection([&] { extract_zip(make_zip(dir / "total.zip", many), dir / "out"); });
  CHECK(total.find("16 MiB") != std::string::npos);

  std::vector<ZipEntry> crowd;
  for (std::size_t i = 0; i <= kMaxSubmissionEntries; ++i)
    crowd.push_back({fmt::format("f{}.txt", i), ""});
  std::string count =
      rejection([&] { extract_zip(make_zip(dir / "crowd.zip", crowd), dir / "out"); });
  CHECK(count.find("at most 200") != std::string::npos);
}

TEST_CASE("a file that is not a zip is an error, not a rejection") {
  fs::path dir = fresh_dir("unpack_notzip");
  write_text(dir / "broken.zip", "this is not a zip");
  try {
    extract_zip(dir / "broken.zip", dir / "out");
    FAIL("a broken zip was extracted");
  } catch (const RejectedSubmission& e) {
    FAIL("a broken zip is the grader's error, not the student's attack: " << e.what());
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("as a zip file") != std::string::npos);
  }
}

TEST_CASE("a folder submission with a link anywhere, a special file or over the caps is rejected") {
  fs::path dir = fresh_dir("unpack_folder");
  fs::path sub = toy_submission(dir / "sub", "wrong_answer");
  CHECK_NOTHROW(check_submission_folder(sub));

  fs::create_directory_symlink("../../solutions", sub / "chapters");
  std::string why = rejection([&] { check_submission_folder(sub); });
  INFO(why);
  CHECK(why.find("`chapters`") != std::string::npos);
  CHECK(why.find("symbolic link") != std::string::npos);
  fs::remove(sub / "chapters");

  fs::create_symlink("toy_a.cpp", sub / "toy_a/inside.cpp");  // even one that points inside
  CHECK(rejection([&] { check_submission_folder(sub); }).find("toy_a/inside.cpp") !=
        std::string::npos);
  fs::remove(sub / "toy_a/inside.cpp");

  fs::create_hard_link(sub / "toy_a/toy_a.cpp", sub / "toy_a/twin.cpp");
  CHECK(rejection([&] { check_submission_folder(sub); }).find("hard link") != std::string::npos);
  fs::remove(sub / "toy_a/twin.cpp");

  REQUIRE(::mkfifo((sub / "pipe").c_str(), 0644) == 0);
  CHECK(rejection([&] { check_submission_folder(sub); }).find("`pipe`") != std::string::npos);
  fs::remove(sub / "pipe");

  std::ofstream(sub / "big.bin") << std::string(kMaxSubmissionFileBytes + 1, 'x');
  CHECK(rejection([&] { check_submission_folder(sub); }).find("`big.bin`") != std::string::npos);
  fs::remove(sub / "big.bin");

  for (std::size_t i = 0; i < kMaxSubmissionEntries; ++i)
    std::ofstream(sub / fmt::format("f{}.txt", i));
  CHECK(rejection([&] { check_submission_folder(sub); }).find("at most 200") != std::string::npos);
}

TEST_CASE("a rejected submission's grade: every case rejected, 0 points, its maximum kept") {
  Rubric r = load_rubrics(this_project().root / "autograder" / "rubric.json",
                          {fixtures() / "toy" / "rubric.json"});
  auto chapters = select_chapters(r, {"toy_"});
  Grade g;
  g.submission = "evil.zip";
  g = rejected_grade(std::move(g), chapters, "evil.zip: `../evil.cpp` climbs out");
  CHECK(g.score() == 0);
  CHECK(g.max_score() == 6);
  CHECK(g.notes.front().find("rejected-submission") == 0);
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases) {
      CHECK(c.status == Status::rejected_submission);
      CHECK(c.reason.find("../evil.cpp") != std::string::npos);
    }
  CHECK(case_status(json_report(g), "toy_a.scale") == "rejected-submission");
}

TEST_CASE("every gradebook row has exactly the header's columns") {
  Grade g;
  g.seed = 7;
  for (std::string name : {"toy_a", "toy_b", "gpu_labs"}) {  // grade_submission adds gpu_labs last
    ChapterGrade ch;
    ch.name = name;
    CaseGrade c;
    c.name = name + ".x";
    c.max_score = 1;
    c.status = name == "toy_b" ? Status::wrong : Status::passed;
    c.score = name == "toy_b" ? 0 : 1;
    ch.cases.push_back(c);
    g.chapters.push_back(ch);
  }
  for (const std::vector<std::string>& blocks :
       {std::vector<std::string>{"toy_a", "toy_b", "gpu_labs"},
        std::vector<std::string>{"toy_a", "toy_b"}}) {
    auto header = csv_header(blocks);
    auto row = csv_row("alice", g, blocks);
    REQUIRE(row.size() == header.size());
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == "toy_b") CHECK(row[i] == "0");
      if (header[i] == "gpu_labs") CHECK(row[i] == "1");
      if (header[i] == "failed_cases") CHECK(row[i] == "toy_b.x:wrong");
      if (header[i] == "status") CHECK(row[i] == "graded");
      if (header[i] == "seed") CHECK(row[i] == "7");
    }
  }
  Grade rejected = rejected_grade(Grade{}, {}, "x.zip: `chapters` is a symbolic link");
  ChapterGrade ch;
  ch.name = "toy_a";
  ch.cases.push_back(
      {"toy_a.x", "toy_a", Visibility::visible, Status::rejected_submission, 0, 2, "why", "", 0});
  rejected.chapters.push_back(ch);
  auto row = csv_row("mallory", rejected, {"toy_a", "toy_b"});
  const auto header = csv_header({"toy_a", "toy_b"});
  REQUIRE(row.size() == header.size());
  auto cell = [&](const std::string& column) {
    return row.at(
        static_cast<std::size_t>(std::find(header.begin(), header.end(), column) - header.begin()));
  };
  CHECK(cell("toy_b") == "");         // not in the grade
  CHECK(cell("failed_cases") == "");  // none listed: the status says it all
  CHECK(cell("hints") == "");
  CHECK(cell("status") == "rejected-submission: why");
  CHECK(csv_field("bad \xFF") == "bad " + kReplacement);
}

TEST_CASE(
    "grade-batch: hostile uploads get rejected-submission rows, invalid UTF-8 output still gets a "
    "grade" *
    doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("toy_hostile");
  fs::path subs = dir / "subs";
  fs::create_directories(subs);
  fs::rename(symlink_zip(dir), subs / "symlink.zip");
  make_zip(subs / "traversal.zip", {{"toy_a/toy_a.cpp", kToyA}, {"../evil.cpp", "int evil;"}});
  make_zip(subs / "bomb.zip", {{"toy_a/toy_a.cpp", std::string(2 * kMaxSubmissionFileBytes, ' ')}});
  toy_submission(subs / "folder_link", "");
  fs::create_directory_symlink("../../solutions", subs / "folder_link" / "chapters");
  toy_submission(subs / "invalid_utf8", "invalid_utf8");

  fs::path csv = dir / "grades.csv";
  // With GPU labs selected (skipped here): the gradebook used to get one column more per row.
  RunOutcome o = grader(toy_args({"grade-batch", subs.string(), "--csv", csv.string(), "--reports",
                                  (dir / "reports").string(), "--chapter", "gpu"}),
                        600, {{"MGPU_GRADE_GPU", "0"}});
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  CHECK(!fs::exists(subs / "evil.cpp"));
  CHECK(!fs::exists(dir / "evil.cpp"));

  std::ifstream in(csv);
  std::string line;
  REQUIRE(std::getline(in, line));
  auto header = csv_split(line);
  CHECK(std::find(header.begin(), header.end(), "gpu_labs") != header.end());
  auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  std::map<std::string, std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    auto row = csv_split(line);
    CHECK_MESSAGE(row.size() == header.size(), line);
    rows[row.at(0)] = row;
  }
  REQUIRE(rows.size() == 5);
  const std::map<std::string, std::string> named{{"symlink", "`chapters`"},
                                                 {"traversal", "`../evil.cpp`"},
                                                 {"bomb", "`toy_a/toy_a.cpp`"},
                                                 {"folder_link", "`chapters`"}};
  for (const auto& [sub, entry] : named) {
    const std::string& status = rows[sub].at(col("status"));
    CHECK_MESSAGE(status.rfind("rejected-submission: ", 0) == 0, sub << ": " << status);
    CHECK_MESSAGE(status.find(entry) != std::string::npos, sub << ": " << status);
    CHECK(rows[sub].at(col("score")) == "0");
    auto report = nlohmann::json::parse(read_text(dir / "reports" / (sub + ".json")));
    CHECK(case_status(report, "toy_a.scale") == "rejected-submission");
  }
  const auto& bad = rows["invalid_utf8"];
  CHECK(bad.at(col("status")) == "graded");
  CHECK(bad.at(col("failed_cases")) == "toy_a.scale:wrong");
  CHECK(bad.at(col("toy_b")) == "1");
  auto report = nlohmann::json::parse(read_text(dir / "reports" / "invalid_utf8.json"));
  for (const auto& ch : report["chapters"])
    for (const auto& c : ch["cases"])
      if (c["name"] == "toy_a.scale")
        CHECK(c["feedback"].get<std::string>().find(kReplacement) != std::string::npos);
}

TEST_CASE(
    "grade: a submission printing invalid UTF-8 still gets JSON, Gradescope and JUnit reports" *
    doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("toy_invalid_utf8");
  fs::path sub = toy_submission(dir / "sub", "invalid_utf8");
  RunOutcome o =
      grader(toy_args({"grade", sub.string(), "--json", (dir / "g.json").string(), "--gradescope",
                       (dir / "results.json").string(), "--junit", (dir / "junit.xml").string()}));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(dir / "g.json"));  // throws on invalid UTF-8
  CHECK(case_status(j, "toy_a.scale") == "wrong");
  auto gs = nlohmann::json::parse(read_text(dir / "results.json"));
  CHECK(gs["score"].get<double>() == j["score"].get<double>());
  bool replaced = false;
  for (const auto& t : gs["tests"])
    replaced = replaced || t["output"].get<std::string>().find(kReplacement) != std::string::npos;
  CHECK(replaced);
  std::string junit = read_text(dir / "junit.xml");
  CHECK(valid_utf8(junit) == junit);
  CHECK(junit.find(kReplacement) != std::string::npos);
}

TEST_CASE(
    "a GPU lab's files are staged with the chapters: found under gpu_labs/, loose, under a top "
    "folder or in a zip, and the pristine file fills in the rest") {
  fs::path dir = fresh_dir("stage_labs");
  // A pristine copy with one lab of two files and no chapters, and a rubric naming that lab.
  put(dir / "pristine/gpu_labs/lab/ring.cpp", "// ring skeleton\n");
  put(dir / "pristine/gpu_labs/lab/tree.cpp", "// tree skeleton\n");
  fs::create_directories(dir / "pristine/chapters");
  const Rubric rubric = parse_rubric(R"({"chapters": {}, "gpu_labs": {
      "files": {"lab": ["ring.cpp", "tree.cpp"]}, "cases": {"gpu.lab": {"lab": "lab"}}}})",
                                     "r.json");
  auto staged = [&](const fs::path& submission, const std::string& name) {
    const Staged st = stage_submission(submission, dir / "scratch" / name, rubric, this_project(),
                                       dir / "pristine", &*rubric.gpu_labs);
    CHECK(st.gpu_labs_dir == dir / "scratch" / name / "gpu_labs");
    CHECK(read_text(st.gpu_labs_dir / "lab/tree.cpp") == "// tree skeleton\n");  // not submitted
    return read_text(st.gpu_labs_dir / "lab/ring.cpp");
  };
  put(dir / "in_folder/gpu_labs/lab/ring.cpp", "// mine, in gpu_labs\n");
  CHECK(staged(dir / "in_folder", "a") == "// mine, in gpu_labs\n");
  put(dir / "loose/lab/ring.cpp", "// mine, loose\n");
  CHECK(staged(dir / "loose", "b") == "// mine, loose\n");
  put(dir / "under_top/manygpu/gpu_labs/lab/ring.cpp", "// mine, under a top folder\n");
  CHECK(staged(dir / "under_top", "c") == "// mine, under a top folder\n");
  make_zip(dir / "upload.zip", {{"gpu_labs/lab/ring.cpp", "// mine, zipped\n"}});
  CHECK(staged(dir / "upload.zip", "d") == "// mine, zipped\n");
  fs::create_directories(dir / "empty");
  CHECK(staged(dir / "empty", "e") == "// ring skeleton\n");

  // Without the labs graded, nothing of them is staged.
  const Staged st = stage_submission(dir / "in_folder", dir / "scratch/f", rubric, this_project(),
                                     dir / "pristine");
  CHECK(st.gpu_labs_dir.empty());
  CHECK_FALSE(fs::exists(dir / "scratch/f/gpu_labs"));
}
