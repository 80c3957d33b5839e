// reference_leaks (reference_leaks.hpp): windows of solved reference lines, looked up in every
// shipped file.
#include "commands/reference_leaks.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "records/hint_book.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

bool source_file(const fs::path& p) {
  const auto ext = p.extension();
  return ext == ".cpp" || ext == ".cu" || ext == ".hpp" || ext == ".cuh" || ext == ".h";
}

// The line without its `//` comment (one outside a string literal) and without any spacing, so
// that re-indenting or re-wrapping a copied line does not hide it.
std::string normalized(const std::string& line) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"' && (i == 0 || line[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && c == '/' && i + 1 < line.size() && line[i + 1] == '/') break;
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

// A line that says something: a statement, not a brace, a keyword alone or a comment's middle.
bool substantive(const std::string& norm) {
  if (norm.size() < 12 || norm.rfind("*", 0) == 0 || norm.rfind("/*", 0) == 0) return false;
  return std::any_of(norm.begin(), norm.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// The file's lines as a student can read them: sealed hints as `./mgpu hint` shows them.
std::vector<std::string> lines_of(const fs::path& p) {
  std::string text = read_text(p);
  if (p.filename() == kSealedHints) text = unseal_hints(text);
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(normalized(l));
  return lines;
}

// Calls visit(key, line) for every kWindow consecutive substantive lines: key the lines joined,
// line the 1-based number of the first. A line for which breaks(line) holds ends the run.
template <class Breaks, class Visit>
void windows_of(const std::vector<std::string>& lines, Breaks&& breaks, Visit&& visit) {
  std::vector<std::size_t> run;  // indices of the run's lines
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!substantive(lines[i])) continue;
    if (breaks(lines[i])) {
      run.clear();
      continue;
    }
    run.push_back(i);
    if (run.size() < kWindow) continue;
    std::string key;
    for (auto j = run.end() - kWindow; j != run.end(); ++j) key += lines[*j] + '\n';
    visit(key, run[run.size() - kWindow] + 1);
  }
}

// The lines a student is given beside `solved`: the files of its skeleton's folder (its tests
// left out) and, for a GPU lab, the labs' common code that every skeleton builds on.
std::set<std::string> given_lines(const fs::path& exported, const fs::path& solved_rel) {
  // solutions/11_2_data_parallel/ring.cpp -> chapters/11_2_data_parallel/ring.cpp;
  // solutions/gpu_labs/tp_ffn/x.cu -> gpu_labs/tp_ffn/x.cu.
  fs::path rel;
  for (auto it = std::next(solved_rel.begin()); it != solved_rel.end(); ++it) rel /= *it;
  const bool lab = rel.begin() != rel.end() && *rel.begin() == "gpu_labs";
  if (!lab) rel = "chapters" / rel;
  std::set<std::string> given;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(exported / rel.parent_path(), ec))
    if (e.is_regular_file() && source_file(e.path()))
      for (auto& l : lines_of(e.path())) given.insert(std::move(l));
  if (lab)
    for (const auto& e : fs::recursive_directory_iterator(exported / "gpu_labs/common", ec))
      if (e.is_regular_file() && source_file(e.path()))
        for (auto& l : lines_of(e.path())) given.insert(std::move(l));
  return given;
}

}  // namespace

std::vector<ReferenceLeak> reference_leaks(const fs::path& exported, const fs::path& shipped) {
  // Every window of kWindow solved lines -> where it starts in the reference.
  std::map<std::string, std::string> windows;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(exported / "solutions", ec)) {
    if (!e.is_regular_file() || !source_file(e.path())) continue;
    const fs::path rel = fs::relative(e.path(), exported);
    const auto given = given_lines(exported, rel);
    windows_of(
        lines_of(e.path()), [&](const std::string& l) { return given.count(l) > 0; },
        [&](const std::string& key, std::size_t line) {
          windows.emplace(key, rel.generic_string() + ":" + std::to_string(line));
        });
  }
  std::vector<ReferenceLeak> leaks;
  if (windows.empty()) return leaks;
  for (const auto& e : fs::recursive_directory_iterator(shipped, ec)) {
    if (!e.is_regular_file() || e.is_symlink() || e.file_size() > (4u << 20)) continue;
    const std::string name = fs::relative(e.path(), shipped).generic_string();
    windows_of(
        lines_of(e.path()), [](const std::string&) { return false; },
        [&](const std::string& key, std::size_t line) {
          if (const auto hit = windows.find(key); hit != windows.end())
            leaks.push_back({name + ":" + std::to_string(line), hit->second});
        });
  }
  return leaks;
}

}  // namespace mgpu::grade
