// `./mgpu hint`: levels open in order, every hint shown is recorded (in a record of the test's
// own, via MGPU_HINTS_LOG), unknown chapters and TODOs are named with the valid ones, the listing
// shows what was read; every TODO id in every skeleton file has a hints section with all three
// levels (`--check`), every NotImplemented a skeleton throws names a TODO that `./mgpu hint`
// opens, and the check itself catches drift on a tiny tree of its own.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "records/hint_book.hpp"

using namespace mgpu::grade;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = MGPU_SOURCE_ROOT;

// A fresh folder of this test's own.
fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("mgpu-test-hint-" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  int rc = -1;
  std::string out, err;
};

// Runs mgpu-hint in checkout as ./mgpu does (the root as the working folder), with the record
// at `record`.
Outcome hint(const std::string& args, const fs::path& record, const fs::path& checkout = kRoot) {
  const fs::path work = record.parent_path();
  const fs::path out = work / "out.txt", err = work / "err.txt";
  const std::string cmd = "cd '" + checkout.string() + "' && MGPU_HINTS_LOG='" + record.string() +
                          "' '" + MGPU_HINT_EXE + "' " + args + " >'" + out.string() + "' 2>'" +
                          err.string() + "'";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read(out), read(err)};
}

// The level column of the record, e.g. "1 2 2 3".
std::string levels(const fs::path& record) {
  std::ifstream in(record);
  std::string all;
  for (std::string line; std::getline(in, line);)
    if (const auto r = parse_record_line(line))
      all += (all.empty() ? "" : " ") + std::to_string(r->level);
  return all;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("levels open one after another, and every hint shown is recorded in order") {
  const fs::path record = scratch("levels") / "hints.tsv";
  auto r = hint("11_2 ring_reduce_scatter --level 2", record);
  CHECK(r.rc == 2);
  CHECK_MESSAGE(has(r.err, "--level 1"), "the refusal says which level to read first: " << r.err);
  CHECK(levels(record).empty());

  r = hint("11_2 ring_reduce_scatter", record);
  REQUIRE(r.rc == 0);
  CHECK(has(r.out, "hint 1 of 3"));
  CHECK(has(r.out, "Follow one chunk"));                        // level 1's text
  CHECK_FALSE(has(r.out, "should own the full sum of chunk"));  // not level 3's
  const auto first = parse_record_line(read(record).substr(0, read(record).find('\n')));
  REQUIRE(first);
  CHECK(first->chapter == "11_2_data_parallel");
  CHECK(first->todo == "ring_reduce_scatter");
  CHECK(first->level == 1);
  CHECK(std::regex_match(first->time, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));

  CHECK(hint("11_2 ring_reduce_scatter --level 3", record).rc == 2);
  r = hint("11_2 ring_reduce_scatter --level 2", record);
  CHECK((r.rc == 0 && has(r.out, "hint 2 of 3")));
  r = hint("11_2 ring_reduce_scatter", record);  // no level: the highest read so far, again
  CHECK(has(r.out, "hint 2 of 3"));
  r = hint("11.2 'TODO(11.2 ring_reduce_scatter):' --level=3", record);  // a comment copied whole
  CHECK((r.rc == 0 && has(r.out, "hint 3 of 3")));
  CHECK(has(r.out, "should own the full sum of chunk"));
  CHECK(levels(record) == "1 2 2 3");
}

TEST_CASE("GPU labs have hints too, recorded as gpu_labs/<lab>") {
  const fs::path record = scratch("lab") / "hints.tsv";
  REQUIRE(hint("tp_ffn forward", record).rc == 0);
  const auto line = parse_record_line(read(record).substr(0, read(record).find('\n')));
  REQUIRE(line);
  CHECK(line->chapter == "gpu_labs/tp_ffn");
  CHECK(line->todo == "forward");
  CHECK(line->level == 1);
}

TEST_CASE(
    "unknown TODOs, chapters and levels are named with what exists, and nothing is recorded") {
  const fs::path record = scratch("names") / "hints.tsv";
  auto r = hint("11_2 ring_reduce", record);
  CHECK(r.rc == 2);
  CHECK(has(r.err, "no TODO 'ring_reduce'"));
  CHECK(has(r.err, "ring_all_gather"));
  CHECK(has(r.err, "plan_buckets"));
  r = hint("11_42 foo", record);
  CHECK(r.rc == 2);
  CHECK(has(r.err, "'11_42'"));
  CHECK(has(r.err, "11_5_pipeline"));
  CHECK(has(r.err, "gpu_labs/zero3"));
  CHECK(hint("11_2 ring_reduce_scatter --level 4", record).rc == 2);
  CHECK(hint("11_2 --level 2", record).rc == 2);
  CHECK(hint("11_2 a b", record).rc == 2);
  CHECK(hint("11_2 --frobnicate", record).rc == 2);
  CHECK(levels(record).empty());
}

TEST_CASE("the listing gives a chapter's TODOs in order with the highest level read") {
  const fs::path record = scratch("listing") / "hints.tsv";
  std::ofstream(record) << format_record_line({"11_2_data_parallel", "ring_reduce_scatter", 3,
                                               "2026-01-01T00:00:00Z"})
                        << "\n";
  const auto r = hint("11_2", record);
  REQUIRE(r.rc == 0);
  CHECK(std::regex_search(r.out, std::regex(R"(\n  ring_reduce_scatter +3 )")));
  CHECK(std::regex_search(r.out, std::regex(R"(\n  plan_buckets +- )")));
  // One line per hints.md section, between a heading, a column line and the closing line.
  const std::string book = read(kRoot / "chapters/11_2_data_parallel/hints.md");
  const auto sections = parse_hint_book(book).sections;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  CHECK(lines.size() == sections.size() + 3);
  REQUIRE(lines.size() > 2);
  CHECK(lines[2].rfind("  ring_all_reduce_bytes_per_rank ", 0) == 0);  // the README's first TODO
}

TEST_CASE("every TODO of every skeleton has a hints section with levels 1, 2 and 3") {
  const fs::path record = scratch("check") / "hints.tsv";
  const auto r = hint("--check", record);
  CHECK_MESSAGE(r.rc == 0, "hints and skeletons disagree:\n" << r.out << r.err);
  CHECK(has(r.out, "ok   11_7_3d_and_experts: "));
  CHECK(has(r.out, "ok   gpu_labs/tp_ffn: "));
}

namespace {

// Where a skeleton sits: "11_2_data_parallel" for chapters/11_2_data_parallel/..., "tp_ffn" for
// gpu_labs/tp_ffn/..., and the prefix its TODOs use there ("11.2", "exercises", "gpu tp_ffn").
struct Exercise {
  std::string arg, prefix;
};

Exercise exercise_of(const fs::path& relative) {
  const auto top = relative.begin()->string();
  const auto folder = std::next(relative.begin())->string();
  if (top == "gpu_labs") return {folder, "gpu " + folder};
  // 11_2_data_parallel -> 11.2; a folder without a section number (exercises) is its own prefix.
  static const std::regex numbered(R"((\d+)_(\d+)_.*)");
  std::smatch m;
  if (std::regex_match(folder, m, numbered)) return {folder, m[1].str() + "." + m[2].str()};
  return {folder, folder};
}

}  // namespace

TEST_CASE("every NotImplemented in the skeletons names a TODO that ./mgpu hint opens") {
  // The whole message a test prints for an unfinished body, pasted into ./mgpu hint, must open
  // that exercise's hints: scanned here independently of --check, over every source file under
  // chapters/ and gpu_labs/ except the tests.
  const fs::path record = scratch("thrown") / "hints.tsv";
  static const std::regex call(R"re(NotImplemented\s*\(\s*"([^"\\]*)"\s*\))re");
  static const std::regex any_call(R"(NotImplemented\s*\()");
  int seen = 0;
  for (const char* top : {"chapters", "gpu_labs"}) {
    for (auto it = fs::recursive_directory_iterator(kRoot / top);
         it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() && it->path().filename() == "tests") {
        it.disable_recursion_pending();
        continue;
      }
      const auto ext = it->path().extension();
      if (!it->is_regular_file() ||
          (ext != ".cpp" && ext != ".cu" && ext != ".hpp" && ext != ".cuh" && ext != ".h"))
        continue;
      const fs::path rel = fs::relative(it->path(), kRoot);
      const std::string text = read(it->path());
      const auto calls = std::distance(std::sregex_iterator(text.begin(), text.end(), any_call),
                                       std::sregex_iterator());
      const auto literals = std::distance(std::sregex_iterator(text.begin(), text.end(), call),
                                          std::sregex_iterator());
      CHECK_MESSAGE(calls == literals,
                    rel.generic_string() << ": a NotImplemented whose argument is not one literal");
      for (std::sregex_iterator m(text.begin(), text.end(), call), end; m != end; ++m) {
        ++seen;
        const std::string named = (*m)[1].str();
        const Exercise ex = exercise_of(rel);
        const auto space = named.find_last_of(' ');
        const std::string prefix = space == std::string::npos ? "" : named.substr(0, space);
        CHECK_MESSAGE(prefix == ex.prefix, rel.generic_string()
                                               << ": NotImplemented(\"" << named
                                               << "\") should start with \"" << ex.prefix << " \"");
        std::string quoted = "not implemented: " + named;  // as a failing test prints it
        for (std::size_t q = quoted.find('\''); q != std::string::npos;
             q = quoted.find('\'', q + 4))
          quoted.replace(q, 1, "'\\''");
        const auto r = hint(ex.arg + " '" + quoted + "'", record);
        CHECK_MESSAGE(r.rc == 0, rel.generic_string()
                                     << ": NotImplemented(\"" << named
                                     << "\") is no TODO ./mgpu hint " << ex.arg
                                     << " knows: " << r.err.substr(0, r.err.find('\n')));
      }
    }
  }
  CHECK(seen > 100);  // the scan found the skeletons' throws at all
}

TEST_CASE("the drift check reports a NotImplemented that names no TODO, by file and line") {
  const fs::path fake = scratch("thrown-fake");
  fs::create_directories(fake / "chapters/c1");
  std::ofstream(fake / "chapters/c1/c1.cpp") << R"src(// TODO(c1 alpha): first
void a() { throw NotImplemented("c1 alpha"); }
void b() { throw NotImplemented("c1 alpha (bf16)"); }
void c() {
  throw NotImplemented(
      "c1 gamma");
}
void d() { throw NotImplemented(name); }
)src";
  std::ofstream(fake / "chapters/c1/hints.md")
      << "## alpha: a\n### 1\none\n### 2\ntwo\n### 3\nthree\n";
  const auto r = hint("--check", fake / "hints.tsv", fake);
  CHECK(r.rc == 1);
  CHECK_FALSE(has(r.out, "c1.cpp:2:"));
  CHECK(has(r.out, "chapters/c1/c1.cpp:3: NotImplemented(\"c1 alpha (bf16)\") names no TODO"));
  CHECK(has(r.out, "chapters/c1/c1.cpp:5: NotImplemented(\"c1 gamma\") names no TODO"));
  CHECK(has(r.out, "chapters/c1/c1.cpp:8: NotImplemented takes one string literal"));
  CHECK(has(r.out, "such as \"c1 alpha\""));
}

TEST_CASE("the drift check reports a TODO without hints, a stale section and an empty level") {
  const fs::path fake = scratch("fake");
  fs::create_directories(fake / "chapters/c1");
  std::ofstream(fake / "chapters/c1/c1.cpp") << "// TODO(c1 alpha): first\n"
                                                "// TODO(c1 beta): second\nint f();\n";
  std::ofstream(fake / "chapters/c1/hints.md") << R"(# preamble, never shown
## alpha: the first
### 1
one
```
## not a section: a line inside a code fence
```
### 2
two
### 3

## gamma: no such TODO
### 1
x
### 4
)";
  const auto r = hint("--check", fake / "hints.tsv", fake);
  CHECK(r.rc == 1);
  CHECK(has(r.out, "no section '## beta"));
  CHECK(has(r.out, "section 'gamma' matches no TODO"));
  CHECK(has(r.out, "alpha: level 3 missing"));
  CHECK(has(r.out, "gamma: unknown level \"4\""));
  CHECK_FALSE(has(r.out, "not a section"));
  // The fenced lines are level 1's text, fences and all.
  const auto book = parse_hint_book(read(fake / "chapters/c1/hints.md"));
  REQUIRE(book.find("alpha"));
  CHECK(book.find("alpha")->levels[0] ==
        "one\n```\n## not a section: a line inside a code fence\n```");
}

TEST_CASE("a record line round-trips, and a malformed one is no line") {
  const HintRecordLine line{"gpu_labs/zero3", "step", 2, "2026-12-01T18:00:00Z"};
  const auto back = parse_record_line(format_record_line(line));
  REQUIRE(back);
  CHECK(back->chapter == line.chapter);
  CHECK(back->todo == line.todo);
  CHECK(back->level == 2);
  CHECK(back->time == line.time);
  CHECK_FALSE(parse_record_line("11_2\tx\t4\tt"));
  CHECK_FALSE(parse_record_line("11_2\t\t1\tt"));
  CHECK_FALSE(parse_record_line("just words"));
}
