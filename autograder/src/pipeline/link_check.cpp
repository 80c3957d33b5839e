// nm on the chapter libraries of both trees, and on the shared libraries the grader itself runs
// with (the same C and C++ libraries the case programs load): see link_check.hpp for the rule.
#include "pipeline/link_check.hpp"

#include <cxxabi.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "sandbox/runner.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

enum class Strength { strong, weak };

// Defined symbols with external linkage, per object: member name -> symbol -> strength.
using Objects = std::map<std::string, std::map<std::string, Strength>>;

// nm's one-letter kinds of a defined global symbol (lower case is local, and is skipped).
std::optional<Strength> global_kind(char kind) {
  switch (kind) {
    case 'T':
    case 'D':
    case 'B':
    case 'R':
    case 'G':
    case 'S':
    case 'C':
    case 'A':
    case 'i':  // an indirect function: global, and replaces the real one like any strong symbol
      return Strength::strong;
    case 'W':
    case 'V':
    case 'u':  // unique global (static locals of inline functions): merged like COMDAT
      return Strength::weak;
    default:
      return std::nullopt;
  }
}

// `nm --defined-only -P -A FILE [--dynamic]`, parsed. Lines are "FILE[MEMBER]: NAME KIND VALUE
// SIZE" for an archive, "FILE: NAME KIND ..." otherwise; a versioned dynamic name loses "@...".
Objects defined_symbols(const fs::path& file, bool dynamic, std::string& error) {
  RunSpec spec;
  spec.exe = "nm";
  spec.args = {"--defined-only", "-P", "-A"};
  if (dynamic) spec.args.push_back("-D");
  spec.args.push_back(file.string());
  spec.isolate = false;
  spec.wall_s = 60;
  spec.output_cap = 256ull << 20;
  const RunOutcome o = run_process(spec);
  Objects out;
  if (!o.started || !o.exited || o.exit_code != 0 || o.out_truncated) {
    error = fmt::format("nm {} failed: {}{}", file.string(), o.start_error, o.err.substr(0, 300));
    return out;
  }
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find("]: ");
    std::string member, rest;
    if (colon != std::string::npos) {
      const auto open = line.rfind('[', colon);
      member = line.substr(open + 1, colon - open - 1);
      rest = line.substr(colon + 3);
    } else {
      const auto c = line.find(": ");
      if (c == std::string::npos) continue;
      rest = line.substr(c + 2);
    }
    std::istringstream fields(rest);
    std::string name, kind;
    if (!(fields >> name >> kind) || kind.size() != 1) continue;
    const auto strength = global_kind(kind[0]);
    if (!strength) continue;
    if (const auto at = name.find('@'); at != std::string::npos) name.resize(at);
    auto [slot, fresh] = out[member].try_emplace(name, *strength);
    if (!fresh && *strength == Strength::strong) slot->second = Strength::strong;  // strong wins
  }
  return out;
}

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && d ? std::string(d.get()) : name;
}

// The archives libmgpu_*.a that `target` links, relative to the tree, from the LINK_LIBRARIES of
// its build statement in build.ninja; the runtime's, the harness's and the case objects' (the
// trusted tree's own, in a grading tree) are left out.
std::vector<std::string> linked_archives(const fs::path& tree, const std::string& target) {
  std::ifstream in(tree / "build.ninja");
  std::vector<std::string> out;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("build ")) {
      inside = line.starts_with("build bin/" + target + ":");
      continue;
    }
    if (!inside || !line.starts_with("  LINK_LIBRARIES = ")) continue;
    std::istringstream items(line.substr(19));
    for (std::string item; items >> item;) {
      const std::string base = fs::path(item).filename().string();
      if (base.starts_with("libmgpu_") && base.ends_with(".a") && base != "libmgpu_runtime.a" &&
          base != "libmgpu_case_harness.a" && !base.starts_with("libmgpu_cases_"))
        out.push_back(item);
    }
    break;
  }
  return out;
}

// Strong definitions of what every case program links besides the chapters: the runtime, the
// harness, and the C, C++ and math libraries (the ones this grader runs with: the same system).
const std::set<std::string>& protected_symbols(const fs::path& reference_tree) {
  static std::mutex mu;
  static std::map<fs::path, std::set<std::string>> cache;
  std::lock_guard lock(mu);
  auto [it, fresh] = cache.try_emplace(reference_tree);
  if (!fresh) return it->second;
  std::vector<std::pair<fs::path, bool>> files;
  for (const char* lib : {"runtime/libmgpu_runtime.a", "autograder/libmgpu_case_harness.a"})
    if (fs::exists(reference_tree / lib)) files.emplace_back(reference_tree / lib, false);
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> seen;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string base = fs::path(path).filename().string();
    for (const char* lib : {"libc.so", "libm.so", "libstdc++.so", "libgcc_s.so"})
      if (base.starts_with(lib) && seen.insert(path).second) files.emplace_back(path, true);
  }
  for (const auto& [file, dynamic] : files) {
    std::string error;
    for (const auto& [member, symbols] : defined_symbols(file, dynamic, error))
      for (const auto& [name, strength] : symbols)
        if (strength == Strength::strong) it->second.insert(name);
  }
  return it->second;
}

// Why a symbol the student's object defines is refused, or nullopt when it is allowed. in_ref: how
// the reference's object for the same source defines it, if it does.
std::optional<std::string> refusal(const std::string& name, Strength strength,
                                   std::optional<Strength> in_ref,
                                   const std::set<std::string>& guarded,
                                   const std::string& source) {
  if (in_ref && (strength == Strength::weak || *in_ref == Strength::strong)) return std::nullopt;
  // The compiler's own weak pointer to the C++ personality routine, in every object whose
  // code can throw (a skeleton's NotImplemented) even where the reference's cannot.
  const bool compiler_made = name == "DW.ref.__gxx_personality_v0";
  const bool mangled = name.starts_with("_Z");
  if (!in_ref && strength == Strength::weak && (mangled || compiler_made) && !guarded.count(name))
    return std::nullopt;
  if (in_ref)
    return "a strong definition of what the reference defines only as inline or template code";
  if (guarded.count(name))
    return "it replaces the runtime's, the harness's or the C/C++ library's own";
  return "the reference's " + source + " defines no such global symbol";
}

// The student's objects of one chapter archive against the reference's, object by object.
void check_objects(const Objects& own, const Objects& ref, const std::string& chapter,
                   const std::set<std::string>& guarded, LinkCheck& check) {
  for (const auto& [member, symbols] : own) {
    // data_parallel.cpp.o: the object of data_parallel.cpp
    const std::string source =
        member.ends_with(".o") ? member.substr(0, member.size() - 2) : member;
    const auto r = ref.find(member);
    for (const auto& [name, strength] : symbols) {
      std::optional<Strength> in_ref;
      if (r != ref.end())
        if (auto s = r->second.find(name); s != r->second.end()) in_ref = s->second;
      if (auto why = refusal(name, strength, in_ref, guarded, source))
        check.refused.push_back(
            {fmt::format("chapters/{}/{}", chapter, source), demangle(name), *why});
    }
  }
}

// Fails check with the first refused symbol and a log of them all (the first 20).
void explain_refusals(LinkCheck& check) {
  check.ok = false;
  const auto& first = check.refused.front();
  check.first_error = fmt::format(
      "{} defines `{}` with external linkage, which a submission may not ({}); make it static "
      "or put it in an anonymous namespace",
      first.file, first.symbol, first.why);
  check.log = fmt::format(
      "Refused before any case ran: the submission's object files define global symbols that the "
      "reference's do not. Such a definition can take the place of the C library's, the C++ "
      "library's or the course runtime's own function inside the case program. Give each "
      "helper of your own internal linkage (`static`, or inside `namespace {{ ... }}`), and do "
      "not define functions of the runtime or of the system libraries.\n");
  std::size_t shown = 0;
  for (const auto& s : check.refused) {
    if (++shown > 20) {
      check.log += fmt::format("  ... and {} more\n", check.refused.size() - 20);
      break;
    }
    check.log += fmt::format("  {}: `{}` ({})\n", s.file, s.symbol, s.why);
  }
}

}  // namespace

LinkCheck check_submission_symbols(const fs::path& student_tree, const fs::path& reference_tree,
                                   const std::string& target) {
  LinkCheck check;
  const auto& guarded = protected_symbols(reference_tree);
  for (const auto& archive : linked_archives(student_tree, target)) {
    const fs::path ref_archive = reference_tree / archive;
    const fs::path own_archive = student_tree / archive;
    std::error_code ec;
    for (const fs::path& needed : {ref_archive, own_archive})
      if (!fs::exists(needed, ec)) {  // unchecked is unlinked: fail closed
        check.ok = false;
        check.first_error = fmt::format(
            "the submission's symbols could not be checked: {} is missing", needed.string());
        check.log = check.first_error;
        return check;
      }
    // libmgpu_<chapter>.a
    std::string chapter = fs::path(archive).filename().string();
    chapter = chapter.substr(8, chapter.size() - 10);
    std::string error;
    const Objects ref = defined_symbols(ref_archive, false, error);
    const Objects own = defined_symbols(own_archive, false, error);
    if (!error.empty()) {
      check.ok = false;
      check.first_error = "the submission's symbols could not be checked: " + error;
      check.log = check.first_error;
      return check;
    }
    check_objects(own, ref, chapter, guarded, check);
  }
  if (!check.refused.empty()) explain_refusals(check);
  return check;
}

}  // namespace mgpu::grade
