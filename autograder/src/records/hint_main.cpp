// mgpu-hint: `./mgpu hint`, the hints beside the exercises, a level at a time, with a record of
// what was opened (hint_book.hpp). ./mgpu runs it in the checkout's root, passing the folder the
// command was typed in as MGPU_CALLER_PWD.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>

#include "records/hint_book.hpp"
#include "records/records.hpp"

namespace fs = std::filesystem;
using namespace mgpu::grade;

namespace {

const char* kUsage = R"(usage: ./mgpu hint CHAPTER [TODO] [--level 1|2|3]
       ./mgpu hint --check [CHAPTER...]

Hints for the TODOs of a chapter (11_2, 11.2, 11_2_data_parallel) or a GPU lab (tp_ffn), in
three levels: 1 the idea, 2 the shape of the solution, 3 where to look: the README section or
paper that holds the concept, or the visible test that isolates the step. A TODO's id is the last
word in its comment's parentheses, and in what a test prints for an unfinished one:
TODO(11.2 ring_reduce_scatter) and "not implemented: 11.2 ring_reduce_scatter" are both
`./mgpu hint 11_2 ring_reduce_scatter`.
  ./mgpu hint 11_2                      the chapter's TODOs in order, with the levels you have read
  ./mgpu hint 11_2 plan_buckets         level 1, or the highest level you have read so far
  ./mgpu hint 11_2 plan_buckets --level 2   the next level; it opens once level 1 has been read
Every hint shown is added to .mgpu/hints.tsv (chapter, TODO, level, UTC time), which your
submission includes: your instructor sees which hints you opened. MGPU_HINTS_LOG names
another record file.
--check (for authors) checks that every TODO id in the skeleton files has a hints.md section
with all three levels, that every section belongs to a TODO, and that every NotImplemented in
the skeletons names a TODO; it exits 1 on any problem.
)";

// A refusal: printed as "mgpu: hint: ..." and exit status 2.
struct Refusal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every exercise folder, by the name the record uses: a chapter's folder name
// (11_2_data_parallel) or gpu_labs/<lab> for a lab (the folders with a main.cpp).
std::vector<std::string> exercise_folders() {
  std::vector<std::string> chapters, labs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("chapters", ec))
    if (e.is_directory()) chapters.push_back(e.path().filename().string());
  for (const auto& e : fs::directory_iterator("gpu_labs", ec))
    if (e.is_directory() && fs::exists(e.path() / "main.cpp"))
      labs.push_back("gpu_labs/" + e.path().filename().string());
  std::sort(chapters.begin(), chapters.end());
  std::sort(labs.begin(), labs.end());
  chapters.insert(chapters.end(), labs.begin(), labs.end());
  return chapters;
}

fs::path folder_of(const std::string& name) {
  return name.rfind("gpu_labs/", 0) == 0 ? fs::path(name) : fs::path("chapters") / name;
}

std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += "\n  " + n;
  return s;
}

// The folder ARG names: its full name, a lab's name alone (tp_ffn), or a prefix that ends where
// an underscore follows (11_2, 11.2). Anything else is refused with the names that exist.
std::string exercise_of(const std::string& given) {
  std::string arg = given;
  while (!arg.empty() && arg.back() == '/') arg.pop_back();
  if (arg.rfind("chapters/", 0) == 0) arg = arg.substr(9);
  std::replace(arg.begin(), arg.end(), '.', '_');
  const auto names = exercise_folders();
  std::vector<std::string> matches;
  for (const auto& name : names) {
    const std::string base = name.rfind("gpu_labs/", 0) == 0 ? name.substr(9) : name;
    if (arg == name || arg == base) return name;
    if (base.rfind(arg + "_", 0) == 0) matches.push_back(name);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.size() > 1)
    throw Refusal(
        fmt::format("'{}' fits several chapters; name one of:{}", given, listed(matches)));
  throw Refusal(
      fmt::format("no chapter or lab is called '{}'; name one of:{}", given, listed(names)));
}

// The record: MGPU_HINTS_LOG (relative to where ./mgpu was called from) or the default.
fs::path hints_record() { return record_path("MGPU_HINTS_LOG", kHintsRecord); }

// TODO id -> the highest level of it the record says was read, for one exercise.
std::map<std::string, int> levels_read(const std::string& exercise) {
  std::map<std::string, int> seen;
  std::ifstream in(hints_record());
  for (std::string line; std::getline(in, line);)
    if (const auto r = parse_record_line(line); r && r->chapter == exercise)
      seen[r->todo] = std::max(seen[r->todo], r->level);
  return seen;
}

int check(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  if (args.empty()) names = exercise_folders();
  for (const auto& a : args) names.push_back(exercise_of(a));
  bool any = false;
  for (const auto& name : names) {
    const fs::path dir = folder_of(name);
    const auto problems = hint_drift(dir, (dir / "hints.md").generic_string());
    for (const auto& p : problems) fmt::print("{}\n", p);
    any = any || !problems.empty();
    if (problems.empty() && read_hint_text(dir))
      fmt::print("ok   {}: {} TODOs, three levels each, and NotImplemented names only them\n", name,
                 skeleton_todo_ids(dir).size());
  }
  return any ? 1 : 0;
}

void list(const std::string& arg, const fs::path& dir, const HintBook& book,
          const std::map<std::string, int>& seen) {
  fmt::print("Hints for {}, TODOs in the order to do them (read: the highest level you opened):\n",
             dir.generic_string());
  std::size_t width = 4;
  for (const auto& s : book.sections) width = std::max(width, s.id.size());
  fmt::print("  {:<{}}  {:<4}  {}\n", "TODO", width, "read", "what");
  for (const auto& s : book.sections) {
    const auto it = seen.find(s.id);
    fmt::print("  {:<{}}  {:<4}  {}\n", s.id, width,
               it == seen.end() ? "-" : std::to_string(it->second), s.title);
  }
  fmt::print("Open one: ./mgpu hint {} <TODO>   (level 1 first; --level 2 and 3 open after it)\n",
             arg);
}

int show(const std::string& arg, const std::string& exercise, const fs::path& dir,
         const HintBook& book, const std::string& todo, int level) {
  const HintSection* section = book.find(todo);
  if (section == nullptr) {
    std::string ids;
    for (const auto& s : book.sections) ids += "\n  " + s.id;
    throw Refusal(
        fmt::format("{} has no TODO '{}'. Its TODOs:{}", dir.generic_string(), todo, ids));
  }
  const auto seen = levels_read(exercise);
  const int read = seen.count(todo) ? seen.at(todo) : 0;
  if (level == 0) level = std::max(read, 1);
  if (level > read + 1)
    throw Refusal(
        fmt::format("level {0} of {1} opens after level {2}; read that first:\n"
                    "  ./mgpu hint {3} {1} --level {2}",
                    level, todo, level - 1, arg));
  const std::string& text = section->levels[static_cast<std::size_t>(level - 1)];
  if (text.empty())
    throw Refusal(
        fmt::format("{}: the hints have no text for level {} of {} (run ./mgpu hint --check)",
                    dir.generic_string(), level, todo));
  const fs::path record = hints_record();
  std::error_code ec;
  if (record.has_parent_path()) fs::create_directories(record.parent_path(), ec);
  std::ofstream out(record, std::ios::app);
  out << format_record_line({exercise, todo, level, utc_now()}) << '\n';
  if (!out.flush())
    throw Refusal(
        fmt::format("cannot add to the hint record {}; make its folder writable (or set "
                    "MGPU_HINTS_LOG)",
                    record.string()));
  fmt::print("== {} {}, hint {} of 3: {}\n\n{}\n\n", exercise, todo, level, section->title, text);
  if (level < 3)
    fmt::print("(More: ./mgpu hint {} {} --level {})\n", arg, todo, level + 1);
  else
    fmt::print("(That was the last level.)\n");
  return 0;
}

int run(int argc, char** argv) {
  std::vector<std::string> rest;
  std::string level_text;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    }
    if (a == "--check") return check({argv + i + 1, argv + argc});
    if (a == "--level") {
      if (i + 1 >= argc) throw Refusal("--level needs 1, 2 or 3");
      level_text = argv[++i];
    } else if (a.rfind("--level=", 0) == 0) {
      level_text = a.substr(8);
    } else if (!a.empty() && a[0] == '-') {
      throw Refusal(fmt::format("unknown option '{}' (see ./mgpu hint --help)", a));
    } else {
      rest.push_back(a);
    }
  }
  if (rest.size() > 2) {
    std::string got;
    for (const auto& r : rest) got += (got.empty() ? "" : " ") + r;
    throw Refusal(fmt::format("one CHAPTER and one TODO id at most (got: {})", got));
  }
  if (rest.empty()) {
    std::cerr << kUsage << "\nChapters and labs:" << listed(exercise_folders()) << "\n";
    return 2;
  }
  if (!level_text.empty() && level_text != "1" && level_text != "2" && level_text != "3")
    throw Refusal(fmt::format("--level is 1, 2 or 3, not '{}'", level_text));
  const int level = level_text.empty() ? 0 : level_text[0] - '0';
  const std::string& arg = rest[0];
  const std::string exercise = exercise_of(arg);
  const fs::path dir = folder_of(exercise);
  const auto text = read_hint_text(dir);
  if (!text)
    throw Refusal(fmt::format("{} has no hints yet; ask your instructor", dir.generic_string()));
  const HintBook book = parse_hint_book(*text);
  if (rest.size() == 1) {
    if (level != 0)
      throw Refusal(
          fmt::format("--level goes with a TODO id: ./mgpu hint {} <TODO> --level {}", arg, level));
    list(arg, dir, book, levels_read(exercise));
    return 0;
  }
  // A TODO copied whole works too: "TODO(11.2 ring_reduce_scatter):" means ring_reduce_scatter.
  std::string todo = rest[1];
  if (todo.rfind("TODO(", 0) == 0) todo = todo.substr(5);
  todo = todo.substr(0, todo.find(')'));
  if (const auto space = todo.find_last_of(' '); space != std::string::npos)
    todo = todo.substr(space + 1);
  return show(arg, exercise, dir, book, todo, level);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a Refusal, or a file that could not be read
    std::cerr << "mgpu: hint: " << e.what() << "\n";
    return 2;
  }
}
