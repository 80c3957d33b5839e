// hints.md and the hint record (hint_book.hpp).
#include "records/hint_book.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The lines of body without the blank ones at either end, joined by newlines.
std::string trimmed_block(const std::vector<std::string>& body) {
  auto first = std::find_if_not(body.begin(), body.end(), blank);
  auto last = std::find_if_not(body.rbegin(), body.rend(), blank).base();
  std::string text;
  for (auto it = first; it < last; ++it) text += (text.empty() ? "" : "\n") + *it;
  return text;
}

}  // namespace

const HintSection* HintBook::find(const std::string& id) const {
  for (const auto& s : sections)
    if (s.id == id) return &s;
  return nullptr;
}

HintBook parse_hint_book(const std::string& text) {
  HintBook book;
  // Per section: the body lines of each level, and any level heading that is not 1, 2 or 3.
  std::vector<std::array<std::vector<std::string>, 3>> bodies;
  std::map<std::string, std::string> unknown_levels;
  std::set<std::string> repeated;
  int section = -1, level = -1;  // where body lines go; level -1: nowhere
  bool fence = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fence = !fence;  // the fence line itself is text
    if (!fence && line.rfind("## ", 0) == 0) {
      const std::string rest = line.substr(3);
      const auto colon = rest.find(':');
      const std::string id = trim(rest.substr(0, colon));
      const std::string title = colon == std::string::npos ? "" : trim(rest.substr(colon + 1));
      const auto it = std::find_if(book.sections.begin(), book.sections.end(),
                                   [&](const HintSection& s) { return s.id == id; });
      if (it == book.sections.end()) {
        book.sections.push_back({id, title, {}});
        bodies.emplace_back();
        section = static_cast<int>(book.sections.size()) - 1;
      } else {
        repeated.insert(id);
        it->title = title;
        section = static_cast<int>(it - book.sections.begin());
      }
      level = -1;
      continue;
    }
    if (!fence && line.rfind("### ", 0) == 0) {
      const std::string name = trim(line.substr(4));
      level = name == "1" ? 0 : name == "2" ? 1 : name == "3" ? 2 : -1;
      if (level < 0 && section >= 0)
        unknown_levels[book.sections[static_cast<std::size_t>(section)].id] +=
            fmt::format(" \"{}\"", name);
      continue;
    }
    if (section >= 0 && level >= 0)
      bodies[static_cast<std::size_t>(section)][static_cast<std::size_t>(level)].push_back(line);
  }
  for (std::size_t i = 0; i < book.sections.size(); ++i) {
    HintSection& s = book.sections[i];
    std::string missing;
    for (std::size_t l = 0; l < 3; ++l) {
      s.levels[l] = trimmed_block(bodies[i][l]);
      if (s.levels[l].empty()) missing += fmt::format(" {}", l + 1);
    }
    if (!missing.empty())
      book.problems.push_back(fmt::format("{}: level{} missing or empty", s.id, missing));
    if (const auto it = unknown_levels.find(s.id); it != unknown_levels.end())
      book.problems.push_back(
          fmt::format("{}: unknown level{} (use ### 1, ### 2, ### 3)", s.id, it->second));
    if (repeated.count(s.id))
      book.problems.push_back(fmt::format("{}: more than one section", s.id));
  }
  return book;
}

namespace {

// The files of a folder with one of these extensions, in name order.
std::vector<fs::path> files_of(const fs::path& folder, std::initializer_list<const char*> exts) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const auto ext = e.path().extension().string();
    if (e.is_regular_file() &&
        std::any_of(exts.begin(), exts.end(), [&](const char* x) { return ext == x; }))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string text_of(const fs::path& file) {
  std::ifstream in(file);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// The words of s, joined by single spaces.
std::string words_of(const std::string& s) {
  std::istringstream in(s);
  std::string all;
  for (std::string w; in >> w;) all += (all.empty() ? "" : " ") + w;
  return all;
}

// A TODO comment; its first group is what the parentheses hold.
const std::regex& todo_comment() {
  static const std::regex todo(R"(TODO\(([^)]*)\))");
  return todo;
}

// What is inside each TODO(...) of the skeleton files, words single-spaced, first appearance
// first: "11.2 ring_reduce_scatter". The id is its last word.
std::vector<std::string> skeleton_todos(const fs::path& folder) {
  const std::regex& todo = todo_comment();
  std::vector<std::string> todos;
  for (const auto& f : files_of(folder, {".cpp", ".cu"})) {
    const std::string text = text_of(f);
    for (std::sregex_iterator it(text.begin(), text.end(), todo), end; it != end; ++it) {
      const std::string t = words_of((*it)[1].str());
      if (!t.empty() && std::find(todos.begin(), todos.end(), t) == todos.end()) todos.push_back(t);
    }
  }
  return todos;
}

// Every NotImplemented( of the folder's sources (headers too, in case a skeleton body sits in
// one) whose argument is not a string literal naming one of `todos`, as "file:line: ..." lines.
// A test that reaches an unfinished body prints "not implemented: <that text>", and the student
// types its last word into `./mgpu hint`: the two must not drift apart.
std::vector<std::string> misnamed_throws(const fs::path& folder,
                                         const std::vector<std::string>& todos) {
  static const std::regex call(R"(NotImplemented\s*\()");
  static const std::regex literal(R"re(\s*"([^"\\]*)"\s*\))re");
  const std::regex& todo = todo_comment();
  std::vector<std::string> problems;
  for (const auto& f : files_of(folder, {".cpp", ".cu", ".hpp", ".cuh", ".h"})) {
    const std::string text = text_of(f);
    // The TODOs of this file by position: the one just above a throw is the likely name.
    std::vector<std::pair<std::ptrdiff_t, std::string>> above;
    for (std::sregex_iterator it(text.begin(), text.end(), todo), end; it != end; ++it)
      above.emplace_back(it->position(), words_of((*it)[1].str()));
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) {
      const auto at = static_cast<std::ptrdiff_t>(it->position() + it->length());
      std::string example = todos.empty() ? "<where> <id>" : todos.front();
      for (const auto& [pos, words] : above)
        if (pos < at) example = words;
      const auto line = 1 + std::count(text.begin(), text.begin() + at, '\n');
      const std::string where = fmt::format("{}:{}", f.generic_string(), line);
      std::smatch m;
      if (!std::regex_search(text.cbegin() + at, text.cend(), m, literal,
                             std::regex_constants::match_continuous)) {
        problems.push_back(fmt::format(
            "{}: NotImplemented takes one string literal, the words of a TODO (\"{}\"), so that "
            "this check can read it",
            where, example));
        continue;
      }
      const std::string named = m[1].str();
      if (std::find(todos.begin(), todos.end(), named) == todos.end())
        problems.push_back(fmt::format(
            "{}: NotImplemented(\"{}\") names no TODO here; a failing test prints that text and "
            "`./mgpu hint` takes its last word, so write the words of one of this folder's "
            "TODO(...) comments, such as \"{}\"",
            where, named, example));
    }
  }
  return problems;
}

}  // namespace

std::vector<std::string> skeleton_todo_ids(const fs::path& folder) {
  std::vector<std::string> ids;
  for (const auto& t : skeleton_todos(folder)) {
    const std::string id = t.substr(t.find_last_of(' ') + 1);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

namespace {

const std::string kSealedHeader = "mgpu sealed hints 1\n";

// The same bytes XORed with a fixed xorshift stream: applying it twice gives the text back.
std::string xor_stream(std::string bytes) {
  std::uint32_t state = 0x9e3779b9u;
  for (char& c : bytes) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    c = static_cast<char>(static_cast<unsigned char>(c) ^ (state & 0xffu));
  }
  return bytes;
}

}  // namespace

std::string seal_hints(const std::string& text) { return kSealedHeader + xor_stream(text); }

std::string unseal_hints(const std::string& sealed) {
  if (sealed.rfind(kSealedHeader, 0) != 0)
    throw std::runtime_error(
        fmt::format("{} is not a sealed hints file (its first line should be '{}')", kSealedHints,
                    kSealedHeader.substr(0, kSealedHeader.size() - 1)));
  return xor_stream(sealed.substr(kSealedHeader.size()));
}

std::optional<std::string> read_hint_text(const fs::path& folder) {
  std::error_code ec;
  if (fs::is_regular_file(folder / "hints.md", ec)) return text_of(folder / "hints.md");
  if (fs::is_regular_file(folder / kSealedHints, ec))
    return unseal_hints(text_of(folder / kSealedHints));
  return std::nullopt;
}

std::vector<std::string> hint_drift(const fs::path& folder, const std::string& shown) {
  const auto todos = skeleton_todos(folder);
  const auto ids = skeleton_todo_ids(folder);
  std::vector<std::string> problems = misnamed_throws(folder, todos);
  const auto text = read_hint_text(folder);
  if (!text) {
    if (ids.empty()) return problems;
    std::string list;
    for (const auto& id : ids) list += (list.empty() ? "" : " ") + id;
    problems.push_back(fmt::format("{}: missing; the skeletons have TODOs {}", shown, list));
    return problems;
  }
  const HintBook book = parse_hint_book(*text);
  for (const auto& id : ids)
    if (book.find(id) == nullptr)
      problems.push_back(fmt::format("{}: no section '## {}: ...' for TODO {}", shown, id, id));
  for (const auto& s : book.sections)
    if (std::find(ids.begin(), ids.end(), s.id) == ids.end())
      problems.push_back(
          fmt::format("{}: section '{}' matches no TODO in the skeleton files", shown, s.id));
  for (const auto& p : book.problems) problems.push_back(fmt::format("{}: {}", shown, p));
  return problems;
}

std::string format_record_line(const HintRecordLine& line) {
  return fmt::format("{}\t{}\t{}\t{}", line.chapter, line.todo, line.level, line.time);
}

std::optional<HintRecordLine> parse_record_line(const std::string& line) {
  std::istringstream fields(line);
  HintRecordLine r;
  std::string level;
  std::getline(fields, r.chapter, '\t');
  std::getline(fields, r.todo, '\t');
  std::getline(fields, level, '\t');
  std::getline(fields, r.time, '\t');
  if (r.chapter.empty() || r.todo.empty() || (level != "1" && level != "2" && level != "3"))
    return std::nullopt;
  r.level = level[0] - '0';
  return r;
}

}  // namespace mgpu::grade
