// release, submit and gradescope-bundle. What ships is what was committed (git's HEAD), never the
// working tree: an instructor's finished chapters, uncommitted edits and stray files stay home.
#include "commands/distribute.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "commands/reference_leaks.hpp"
#include "pipeline/pristine.hpp"
#include "records/hint_book.hpp"
#include "records/predictions.hpp"
#include "report/hints.hpp"
#include "sandbox/runner.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

enum class Audience { students, gradescope };

// Which committed files go to whom.
bool ships(const fs::path& rel, Audience a) {
  const std::string s = rel.generic_string();
  auto under = [&](std::string_view dir) { return s.rfind(dir, 0) == 0; };
  if (under("build/") || under(".cache/") || under("autograder/private/")) return false;
  // Chaffs and wheats prove the grader; grading needs neither.
  if (under("autograder/chaff/") || under("autograder/wheat/")) return false;
  if (a == Audience::gradescope) return true;
  // Students get no reference and no graded cases: the cases cannot run without the reference,
  // and the hidden ones must stay unknown. The Gradescope and PrairieLearn scripts are the
  // instructor's. The grader's and the runtime's own tests prove the instructor's machinery, not
  // the student's work, and some of them solve a TODO on the way (an attack fixture runs a ring
  // all-reduce; a traffic test derives what each ring step sends): students build and run their
  // chapters' tests.
  return !(under("solutions/") || under("autograder/cases/") || under("autograder/gradescope/") ||
           under("autograder/prairielearn/") || under("autograder/tests/") ||
           under("runtime/tests/"));
}

void run_or_throw(const std::string& exe, const std::vector<std::string>& args, const fs::path& cwd,
                  const std::string& what) {
  RunSpec spec;
  spec.exe = exe;
  spec.args = args;
  spec.isolate = false;
  spec.cwd = cwd;
  spec.wall_s = 600;
  spec.output_cap = 16 << 20;
  RunOutcome o = run_process(spec);
  if (!o.started)
    throw std::runtime_error(fmt::format("{}: {} (is {} installed?)", what, o.start_error, exe));
  if (!o.exited || o.exit_code != 0)
    throw std::runtime_error(fmt::format("{} failed:\n{}{}", what, o.out, o.err));
}

// Tracked files whose working copy or index differs from HEAD, among those that would ship.
std::vector<std::string> uncommitted(const Project& project, Audience a) {
  RunOutcome o =
      run_git(project, {"status", "--porcelain=v1", "-z", "--untracked-files=no"}, 16 << 20);
  if (!o.exited || o.exit_code != 0) throw std::runtime_error("git status failed: " + o.err);
  std::vector<std::string> files;
  std::size_t pos = 0;
  while (pos < o.out.size()) {
    std::size_t end = o.out.find('\0', pos);
    if (end == std::string::npos) end = o.out.size();
    const std::string entry = o.out.substr(pos, end - pos);
    pos = end + 1;
    if (entry.size() < 4) continue;
    if (entry[0] == 'R' || entry[0] == 'C')
      pos = o.out.find('\0', pos) + 1;  // the rename's old name follows
    if (ships(entry.substr(3), a)) files.push_back(entry.substr(3));
  }
  return files;
}

// HEAD exported into scratch/export. Shipped files with uncommitted changes are refused, naming
// them, unless allow_dirty; then they ship as committed and are listed in left_out.
fs::path export_head(const Project& project, Audience a, const fs::path& scratch, bool allow_dirty,
                     std::vector<std::string>& left_out, const std::string& what) {
  const std::string commit = head_commit(project);
  if (commit.empty())
    throw std::runtime_error(
        fmt::format("{}: {} is not a git checkout with a commit; {} ships what was committed", what,
                    project.root.string(), what));
  left_out = uncommitted(project, a);
  if (!left_out.empty() && !allow_dirty) {
    std::string list;
    for (const auto& f : left_out) list += "\n  " + f;
    throw std::runtime_error(fmt::format(
        "{}: these files have uncommitted changes, and {} ships only what was committed:{}\n"
        "Commit them (or stash them), or pass --allow-dirty to ship the committed versions.",
        what, what, list));
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  fs::create_directories(scratch / "export");
  export_commit(project, commit, scratch / "export");
  return scratch / "export";
}

// The starting files students edit, as committed, in autograder/skeleton/: the grader fills what
// a submission leaves out from them (pristine.hpp).
void write_skeleton(const fs::path& exported, const fs::path& out) {
  std::error_code ec;
  for (const char* top : {"chapters", "gpu_labs"})
    for (const auto& d : fs::directory_iterator(exported / top, ec)) {
      if (!d.is_directory()) continue;
      for (const auto& f : fs::directory_iterator(d.path())) {
        const auto ext = f.path().extension();
        if (!f.is_regular_file() || (ext != ".cpp" && ext != ".cu")) continue;
        const fs::path dst = out / kShippedSkeleton / fs::relative(f.path(), exported);
        fs::create_directories(dst.parent_path());
        fs::copy_file(f.path(), dst, fs::copy_options::overwrite_existing);
      }
    }
}

// Copies every shipped file of exported into out, in the audience's version. Returns the count.
std::size_t copy_shipped(const fs::path& exported, const fs::path& out, Audience a) {
  std::size_t count = 0;
  for (const auto& e : fs::recursive_directory_iterator(exported)) {
    if (e.is_symlink() || !e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), exported);
    if (!ships(rel, a)) continue;
    const fs::path dst = out / rel;
    fs::create_directories(dst.parent_path());
    if (a == Audience::students && rel.filename() == "hints.md") {
      // Hints open a level at a time through `./mgpu hint`, never by reading the file.
      const fs::path sealed = out / rel.parent_path() / kSealedHints;
      write_text(sealed, seal_hints(read_text(e.path())));
      fs::permissions(sealed, fs::status(e.path()).permissions());
      ++count;
      continue;
    }
    if (a == Audience::students && rel.extension() == ".md")
      write_text(dst, student_markdown(read_text(e.path()), rel.generic_string()));
    else if (a == Audience::students && rel == "CMakePresets.json")
      write_text(dst, student_presets(read_text(e.path())));
    else
      fs::copy_file(e.path(), dst, fs::copy_options::overwrite_existing);
    fs::permissions(dst, fs::status(e.path()).permissions());
    ++count;
  }
  return count;
}

}  // namespace

std::string student_markdown(std::string text, const std::string& file) {
  const std::string drop_open = "<!-- instructor-only -->",
                    drop_close = "<!-- /instructor-only -->";
  for (std::size_t at; (at = text.find(drop_open)) != std::string::npos;) {
    std::size_t end = text.find(drop_close, at);
    if (end == std::string::npos)
      throw std::runtime_error(
          fmt::format("{}: '{}' without a closing '{}'", file, drop_open, drop_close));
    end += drop_close.size();
    if (end < text.size() && text[end] == '\n') ++end;
    text.erase(at, end - at);
  }
  const std::string show_open = "<!-- student-only\n", show_close = "-->";
  for (std::size_t at; (at = text.find(show_open)) != std::string::npos;) {
    std::size_t end = text.find(show_close, at + show_open.size());
    if (end == std::string::npos)
      throw std::runtime_error(
          fmt::format("{}: '<!-- student-only' without a closing '-->'", file));
    std::size_t after = end + show_close.size();
    if (after < text.size() && text[after] == '\n') ++after;
    text.replace(at, after - at, text.substr(at + show_open.size(), end - at - show_open.size()));
  }
  return text;
}

std::string student_presets(const std::string& json) {
  auto doc = nlohmann::ordered_json::parse(json);
  // A configure preset goes when it, or one it inherits from, builds the reference.
  std::map<std::string, nlohmann::ordered_json> by_name;
  for (const auto& p : doc["configurePresets"]) by_name[p.value("name", "")] = p;
  std::function<bool(const std::string&)> reference = [&](const std::string& name) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) return false;
    const auto& p = it->second;
    if (p.contains("cacheVariables") && p["cacheVariables"].value("MGPU_IMPL", "") == "solution")
      return true;
    if (!p.contains("inherits")) return false;
    if (p["inherits"].is_string()) return reference(p["inherits"].get<std::string>());
    for (const auto& parent : p["inherits"])
      if (reference(parent.get<std::string>())) return true;
    return false;
  };
  std::set<std::string> gone;
  auto& configure = doc["configurePresets"];
  for (auto it = configure.begin(); it != configure.end();) {
    if (reference(it->value("name", ""))) {
      gone.insert(it->value("name", ""));
      it = configure.erase(it);
    } else {
      ++it;
    }
  }
  for (const char* kind : {"buildPresets", "testPresets"}) {
    if (!doc.contains(kind)) continue;
    auto& list = doc[kind];
    for (auto it = list.begin(); it != list.end();)
      it = gone.count(it->value("configurePreset", "")) ? list.erase(it) : it + 1;
  }
  return doc.dump(2) + "\n";
}

Shipment write_release(const Project& project, const fs::path& out, bool allow_dirty) {
  if (fs::exists(out) && !fs::is_empty(out))
    throw std::runtime_error(
        fmt::format("release: {} exists and is not empty; choose a new folder", out.string()));
  Shipment s;
  const fs::path scratch = fs::absolute(out).parent_path() /
                           fmt::format(".{}.export", fs::absolute(out).filename().string());
  const fs::path exported =
      export_head(project, Audience::students, scratch, allow_dirty, s.left_out, "release");
  s.files = copy_shipped(exported, out, Audience::students);
  write_skeleton(exported, out);
  const auto leaks = reference_leaks(exported, out);
  std::error_code ec;
  fs::remove_all(scratch, ec);
  if (!leaks.empty()) {
    std::string list;
    for (const auto& l : leaks) list += fmt::format("\n  {} repeats {}", l.shipped, l.reference);
    fs::remove_all(out, ec);
    throw std::runtime_error(fmt::format(
        "release: the student's copy would carry reference solutions' code ({} lines "
        "in a row):{}\nRewrite those lines, or keep their files out of the release (ships() in "
        "autograder/src/commands/distribute.cpp); nothing was written.",
        kWindow, list));
  }
  return s;
}

std::vector<std::string> write_submission(const Rubric& rubric, const fs::path& from,
                                          const fs::path& out) {
  std::vector<std::string> files;
  for (const auto& ch : rubric.chapters)
    for (const auto& f : ch.files) {
      fs::path p = from / ch.name / f;
      if (fs::is_regular_file(p))
        files.push_back((fs::path(from.filename()) / ch.name / f).generic_string());
    }
  // GPU lab files sit beside the chapters folder in a checkout: gpu_labs/<lab>/<file>.
  if (rubric.gpu_labs)
    for (const auto& [lab, lab_files] : rubric.gpu_labs->files)
      for (const auto& f : lab_files)
        if (fs::is_regular_file(from.parent_path() / "gpu_labs" / lab / f))
          files.push_back((fs::path("gpu_labs") / lab / f).generic_string());
  if (files.empty())
    throw std::runtime_error(fmt::format(
        "submit: no editable chapter files under {}; run it in your checkout", from.string()));
  // The hints opened with `./mgpu hint`, for the instructor's report (hints.hpp).
  if (fs::is_regular_file(from.parent_path() / kHintsRecord))
    files.push_back(kHintsRecord.generic_string());
  // And the predictions recorded with `./mgpu predict` (predictions.hpp), reported, not scored.
  if (fs::is_regular_file(from.parent_path() / kPredictionsRecord))
    files.push_back(kPredictionsRecord.generic_string());
  fs::path abs_out = fs::absolute(out);
  std::error_code ec;
  fs::remove(abs_out, ec);
  std::vector<std::string> args{"-q", "-X", abs_out.string()};
  args.insert(args.end(), files.begin(), files.end());
  run_or_throw("zip", args, fs::absolute(from).parent_path(), "zip");
  return files;
}

Shipment write_gradescope_bundle(const Project& project, const BundleOptions& b) {
  if (!project.has_solutions())
    throw std::runtime_error(
        "gradescope-bundle: solutions/ is missing; build the bundle from the instructor's "
        "checkout");
  Shipment s;
  const fs::path exported = export_head(project, Audience::gradescope, b.scratch / "head",
                                        b.allow_dirty, s.left_out, "gradescope-bundle");
  const fs::path tree = b.scratch / "bundle";
  std::error_code ec;
  fs::remove_all(tree, ec);
  s.files = copy_shipped(exported, tree, Audience::gradescope);
  write_skeleton(exported, tree);
  std::string args;
  for (std::size_t i = 0; i < b.rubrics.size(); ++i) {
    fs::path dst = fmt::format("autograder/private/rubric-{}.json", i);
    fs::create_directories((tree / dst).parent_path());
    fs::copy_file(b.rubrics[i], tree / dst);
    args += " --rubric " + dst.string();
  }
  for (std::size_t i = 0; i < b.cases_dirs.size(); ++i) {
    fs::path dst = fmt::format("autograder/private/cases-{}", i);
    fs::create_directories(tree / dst);
    fs::copy(b.cases_dirs[i], tree / dst, fs::copy_options::recursive);
    args += " --cases-dir " + dst.string();
  }
  if (!args.empty()) write_text(tree / "autograder/private/grade-args", args + "\n");
  // The hidden cases' seeds derive from this secret (GradeOptions::hidden_seed); without one
  // given, a fresh random one: nobody, the instructor included, needs to know it.
  std::string secret = b.secret_file.empty() ? "" : read_text(b.secret_file);
  if (secret.empty()) {
    std::random_device rd;
    for (int i = 0; i < 4; ++i) secret += fmt::format("{:08x}", rd());
  }
  fs::create_directories(tree / "autograder/private");
  write_text(tree / "autograder/private/secret", secret);
  for (const char* script : {"setup.sh", "run_autograder"}) {
    fs::copy_file(tree / "autograder/gradescope" / script, tree / script);
    fs::permissions(tree / script, fs::perms::owner_all | fs::perms::group_read |
                                       fs::perms::group_exec | fs::perms::others_read |
                                       fs::perms::others_exec);
  }
  const fs::path abs_out = fs::absolute(b.out);
  fs::remove(abs_out, ec);
  run_or_throw("zip", {"-q", "-r", "-X", abs_out.string(), "."}, tree, "zip");
  return s;
}

}  // namespace mgpu::grade
