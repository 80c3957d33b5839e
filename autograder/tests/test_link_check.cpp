// The link-time check (link_check.hpp) on objects compiled here: a submission's file may define
// globally only what the reference's same file defines; its own helpers need internal linkage,
// and a definition of a C library, C++ library or runtime function is refused by name, while the
// inline and template code every C++ file emits (weak, merged by the linker) passes.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <map>

#include "helpers.hpp"
#include "pipeline/link_check.hpp"
#include "sandbox/runner.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

// Compiles `source` as <tree>/<archive>'s member x.cpp.o (-O0: every inline function and template
// instantiation it uses is emitted as a weak symbol, as a student's unoptimised build would).
void archive(const fs::path& tree, const std::string& archive, const std::string& source) {
  const fs::path dir = tree / fs::path(archive).parent_path();
  fs::create_directories(dir);
  put(dir / "x.cpp", source);
  for (const auto& [exe, args] :
       {std::pair<std::string, std::vector<std::string>>{
            "c++",
            {"-std=c++20", "-O0", "-c", (dir / "x.cpp").string(), "-o",
             (dir / "x.cpp.o").string()}},
        {"ar", {"rcs", (tree / archive).string(), (dir / "x.cpp.o").string()}}}) {
    RunSpec spec;
    spec.exe = exe;
    spec.args = args;
    spec.isolate = false;
    spec.wall_s = 120;
    spec.merge_output = true;
    const RunOutcome o = run_process(spec);
    INFO(o.out);
    REQUIRE(o.exit_code == 0);
  }
}

// A tree whose case program cases_x links chapters/libmgpu_x.a and the runtime.
void tree_with(const fs::path& tree, const std::string& chapter_source) {
  fs::remove_all(tree);
  fs::create_directories(tree);
  put(tree / "build.ninja",
      "build bin/cases_other: CXX_EXECUTABLE_LINKER__cases_other_Release o.o\n"
      "  LINK_LIBRARIES = chapters/libmgpu_other.a\n\n"
      "build bin/cases_x: CXX_EXECUTABLE_LINKER__cases_x_Release c.o\n"
      "  FLAGS = -O2\n"
      "  LINK_LIBRARIES = autograder/libmgpu_case_harness.a  chapters/libmgpu_x.a  "
      "runtime/libmgpu_runtime.a\n");
  archive(tree, "chapters/libmgpu_x.a", chapter_source);
  archive(tree, "runtime/libmgpu_runtime.a",
          "namespace mgpu { int runtime_count() { return 3; } }\n");
}

const std::string kReference = R"(#include <vector>
namespace mgpu::x {
double scale(double a, int k) {
  std::vector<double> v(static_cast<unsigned>(k), a);
  double s = 0;
  for (double e : v) s += e;
  return s;
}
}  // namespace mgpu::x
)";

// The reference's file with `extra` added at the end.
LinkCheck check_with(const std::string& name, const std::string& extra) {
  const fs::path base = work() / "link_check" / name;
  tree_with(base / "reference", kReference);
  tree_with(base / "student", kReference + extra);
  return check_submission_symbols(base / "student", base / "reference", "cases_x");
}

}  // namespace

TEST_CASE("the link check passes the reference's own symbols, static helpers and template code") {
  const LinkCheck same = check_with("same", "");
  CHECK(same.ok);
  const LinkCheck own = check_with("own_helpers", R"(
#include <algorithm>
#include <string>
namespace mgpu::x {
struct Pair { double a, b; };  // a type of its own: its vector's code is weak, merged by the linker
static double twice(double v) { return 2 * v; }
namespace { double thrice(double v) { return 3 * v; } }
double spread(int n) {
  std::vector<Pair> p;
  for (int i = 0; i < n; ++i) p.push_back({twice(i), thrice(i)});
  std::sort(p.begin(), p.end(), [](const Pair& l, const Pair& r) { return l.a > r.a; });
  return p.empty() ? 0 : p.front().a + static_cast<double>(std::to_string(n).size());
}
}  // namespace mgpu::x
)");
  INFO(own.log);
  // `spread` is global and the reference has none: that one is refused, and only that one.
  REQUIRE(own.refused.size() == 1);
  CHECK(own.refused[0].symbol == "mgpu::x::spread(int)");
  CHECK(own.refused[0].file == "chapters/x/x.cpp");
}

TEST_CASE("a file that throws where the reference's cannot passes (the skeleton's case)") {
  const fs::path base = work() / "link_check" / "throws";
  tree_with(base / "reference", "namespace mgpu::x { int add(int a, int b) { return a + b; } }\n");
  tree_with(base / "student", R"(#include <stdexcept>
namespace mgpu::x { int add(int, int) { throw std::runtime_error("not implemented"); } }
)");
  const LinkCheck c = check_submission_symbols(base / "student", base / "reference", "cases_x");
  INFO(c.log);
  CHECK(c.ok);
}

TEST_CASE("the link check refuses a global helper, naming the file, the symbol and the fix") {
  const LinkCheck c = check_with("helper", "double helper(double v) { return v + 1; }\n");
  REQUIRE_FALSE(c.ok);
  CHECK(c.first_error.find("chapters/x/x.cpp") != std::string::npos);
  CHECK(c.first_error.find("helper(double)") != std::string::npos);
  CHECK(c.first_error.find("static") != std::string::npos);
  CHECK(c.first_error.find("anonymous namespace") != std::string::npos);
}

TEST_CASE("the link check refuses the C library's, the C++ library's and the runtime's functions") {
  const std::map<std::string, std::pair<std::string, std::string>> attacks{
      {"write",
       {"#include <unistd.h>\nextern \"C\" ssize_t write(int, const void*, size_t n) { return "
        "static_cast<ssize_t>(n); }\n",
        "write"}},
      {"weak_malloc",
       {"#include <cstddef>\nextern \"C\" __attribute__((weak)) void* malloc(std::size_t) { "
        "return nullptr; }\n",
        "malloc"}},
      {"operator_new",
       {"#include <new>\n#include <cstdlib>\nvoid* operator new(std::size_t n) { return "
        "std::calloc(1, n); }\n",
        "operator new(unsigned long)"}},
      {"runtime_strong",
       {"namespace mgpu { int runtime_count() { return 7; } }\n", "runtime_count"}},
      // Weak, mangled, as template code is: still refused, the runtime defines it strongly.
      {"runtime_weak",
       {"namespace mgpu { __attribute__((weak)) int runtime_count() { return 7; } }\n",
        "runtime_count"}}};
  for (const auto& [name, attack] : attacks) {
    const LinkCheck c = check_with(name, attack.first);
    INFO(name << ": " << c.log);
    CHECK_FALSE(c.ok);
    bool named = false;
    for (const auto& r : c.refused)
      named = named || r.symbol.find(attack.second) != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("the link check checks only the archives the case program links") {
  const fs::path base = work() / "link_check" / "other";
  tree_with(base / "reference", kReference);
  tree_with(base / "student", kReference);
  // A foreign symbol in a chapter cases_x does not link costs cases_x nothing.
  archive(base / "reference", "chapters/libmgpu_other.a", "int other() { return 1; }\n");
  archive(base / "student", "chapters/libmgpu_other.a",
          "int other() { return 1; }\nint extra() { return 2; }\n");
  CHECK(check_submission_symbols(base / "student", base / "reference", "cases_x").ok);
  CHECK_FALSE(check_submission_symbols(base / "student", base / "reference", "cases_other").ok);
}
