// Chaffs and wheats: load, stage as submissions, grade, judge. A chaff is stored as an edit of the
// reference, not a copy, so it stays a one-line mistake when the reference changes around it, and
// an edit whose text no longer exists fails loudly instead of silently testing nothing.
#include "commands/proof.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

// A filter is a prefix of the chapter ("11_2") or of chapter/name ("11_2_data_parallel/ring_").
bool matches(const std::string& chapter, const std::string& name,
             const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  const std::string id = chapter + "/" + name;
  return std::any_of(filters.begin(), filters.end(),
                     [&](const std::string& f) { return id.rfind(f, 0) == 0; });
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where,
                         std::vector<std::string>& errors) {
  if (!j.contains(key) || !j.at(key).is_string() || j.at(key).get<std::string>().empty()) {
    errors.push_back(fmt::format("{}: \"{}\" missing or not a non-empty string", where, key));
    return "";
  }
  return j.at(key).get<std::string>();
}

// A proof's "edits": each {file, find, replace[, all]} on one of the chapter's files.
std::vector<Edit> parse_edits(const nlohmann::json& j, const std::string& where,
                              const std::string& chapter, const ChapterSpec* spec,
                              std::vector<std::string>& errors) {
  std::vector<Edit> edits;
  if (!j.contains("edits") || !j.at("edits").is_array() || j.at("edits").empty()) {
    errors.push_back(where + ": \"edits\" must be a non-empty array of {file, find, replace}");
    return edits;
  }
  for (std::size_t i = 0; i < j.at("edits").size(); ++i) {
    const auto& e = j.at("edits")[i];
    std::string ew = fmt::format("{}: edits[{}]", where, i);
    if (!e.is_object()) {
      errors.push_back(ew + ": expected {file, find, replace}");
      continue;
    }
    Edit ed;
    ed.file = string_field(e, "file", ew, errors);
    ed.find = string_field(e, "find", ew, errors);
    if (!e.contains("replace") || !e.at("replace").is_string())
      errors.push_back(ew + ": \"replace\" missing or not a string");
    else
      ed.replace = e.at("replace").get<std::string>();
    ed.all = e.value("all", false);
    if (spec && !ed.file.empty() &&
        std::find(spec->files.begin(), spec->files.end(), ed.file) == spec->files.end())
      errors.push_back(
          fmt::format("{}: {} is not one of chapter {}'s files", ew, ed.file, chapter));
    edits.push_back(std::move(ed));
  }
  return edits;
}

// A chaff's "must_lose": cases of its chapter.
std::vector<std::string> parse_must_lose(const nlohmann::json& j, const std::string& where,
                                         const std::string& chapter, const ChapterSpec* spec,
                                         std::vector<std::string>& errors) {
  std::vector<std::string> must_lose;
  if (!j.contains("must_lose") || !j.at("must_lose").is_array() || j.at("must_lose").empty()) {
    errors.push_back(where +
                     ": \"must_lose\" must name the cases the mistake must cost, e.g. "
                     "[\"11_2.ring_all_reduce_fp32\"]");
    return must_lose;
  }
  for (const auto& c : j.at("must_lose")) {
    std::string name = c.is_string() ? c.get<std::string>() : c.dump();
    bool known = spec && std::any_of(spec->cases.begin(), spec->cases.end(),
                                     [&](const CaseSpec& s) { return s.name == name; });
    if (!known)
      errors.push_back(fmt::format("{}: must_lose names {}, which is not a case of chapter {}",
                                   where, name, chapter));
    must_lose.push_back(name);
  }
  return must_lose;
}

Proof parse_proof(const fs::path& file, bool chaff, const std::string& chapter,
                  const ChapterSpec* spec, std::vector<std::string>& errors) {
  Proof p;
  p.chaff = chaff;
  p.chapter = chapter;
  p.name = file.stem().string();
  p.file = file;
  const std::string where = file.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(file));
  } catch (const std::exception& e) {
    errors.push_back(fmt::format("{}: not valid JSON: {}", where, e.what()));
    return p;
  }
  if (!j.is_object()) {
    errors.push_back(where + ": expected an object with description, edits" +
                     (chaff ? " and must_lose" : ""));
    return p;
  }
  for (const auto& [k, v] : j.items())
    if (k != "description" && k != "edits" && !(chaff && k == "must_lose"))
      errors.push_back(fmt::format("{}: unknown field \"{}\"", where, k));
  if (!spec) errors.push_back(fmt::format("{}: the rubric has no chapter {}", where, chapter));
  p.description = string_field(j, "description", where, errors);
  p.edits = parse_edits(j, where, chapter, spec, errors);
  if (chaff) p.must_lose = parse_must_lose(j, where, chapter, spec, errors);
  return p;
}

// Replaces per the edit; throws when the text is not where the edit says it is.
std::string apply(const Edit& e, std::string text, const Proof& p, std::size_t index) {
  std::size_t count = 0;
  for (std::size_t pos = text.find(e.find); pos != std::string::npos;
       pos = text.find(e.find, pos + e.find.size()))
    ++count;
  if (count == 0 || (!e.all && count != 1))
    throw std::runtime_error(
        fmt::format("{}: edits[{}]: its \"find\" text occurs {} times in solutions/{}/{} ({}); "
                    "update it to the reference's current text",
                    p.file.string(), index, count, p.chapter, e.file,
                    e.all ? "needs at least one" : "needs exactly one, or \"all\": true"));
  std::string out;
  std::size_t from = 0;
  for (std::size_t pos = text.find(e.find); pos != std::string::npos;
       pos = text.find(e.find, from)) {
    out += text.substr(from, pos - from) + e.replace;
    from = pos + e.find.size();
  }
  return out + text.substr(from);
}

}  // namespace

std::vector<Proof> load_proofs(const Project& project, const Rubric& rubric,
                               const std::vector<std::string>& filters) {
  std::vector<Proof> proofs;
  std::vector<std::string> errors;
  for (bool chaff : {true, false}) {
    fs::path top = project.root / "autograder" / (chaff ? "chaff" : "wheat");
    if (!fs::is_directory(top)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(top))
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string chapter = f.parent_path().filename().string();
      if (f.parent_path().parent_path() != top) {
        errors.push_back(
            fmt::format("{}: put it directly in {}/<chapter>/", f.string(), top.string()));
        continue;
      }
      if (!matches(chapter, f.stem().string(), filters)) continue;
      proofs.push_back(parse_proof(f, chaff, chapter, rubric.chapter(chapter), errors));
    }
  }
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += "\n  " + e;
    throw std::runtime_error("chaff: the chaff and wheat files have problems:" + all);
  }
  return proofs;
}

void stage_proof(const Proof& p, const Project& project, const Rubric& rubric,
                 const fs::path& dir) {
  // Every chapter is the reference, so chapters another links (exercises) do not stop at a
  // skeleton's NotImplemented; only p's chapter carries the edits.
  for (const auto& ch : rubric.chapters)
    for (const auto& file : ch.files) {
      std::string text = read_text(project.root / "solutions" / ch.name / file);
      if (ch.name == p.chapter)
        for (std::size_t i = 0; i < p.edits.size(); ++i)
          if (p.edits[i].file == file) text = apply(p.edits[i], std::move(text), p, i);
      write_if_changed(dir / "chapters" / ch.name / file, text);
    }
}

ProofResult judge_proof(const Proof& p, const Grade& g) {
  ProofResult r;
  const ChapterGrade* ch = nullptr;
  for (const auto& c : g.chapters)
    if (c.name == p.chapter) ch = &c;
  const std::string id = p.chapter + "/" + p.name;
  if (!ch) {
    r.line = fmt::format("ERROR    {}: its chapter was not graded", id);
    return r;
  }
  if (ch->build_failed) {
    r.line =
        fmt::format("BROKEN   {}: does not compile, so it proves nothing: {}", id, ch->build_error);
    return r;
  }
  // A case the reference itself failed judged nothing: it neither catches a chaff nor passes a
  // wheat.
  std::string unjudged;
  for (const auto& c : ch->cases)
    if (c.status == Status::reference_error) unjudged += (unjudged.empty() ? "" : ", ") + c.name;
  if (!p.chaff) {
    r.held = ch->score() == ch->max_score() && unjudged.empty();
    if (!unjudged.empty()) {
      r.line =
          fmt::format("ERROR    {}: the reference failed {}, so nothing was judged", id, unjudged);
      return r;
    }
    if (r.held) {
      r.line = fmt::format("accepted {}: {:g}/{:g}", id, ch->score(), ch->max_score());
    } else {
      std::string lost;
      for (const auto& c : ch->cases)
        if (c.score < c.max_score)
          lost += fmt::format("\n           {} {}: {}", c.name, status_name(c.status), c.reason);
      r.line = fmt::format("REJECTED {} (a right answer lost points: {:g}/{:g}):{}", id,
                           ch->score(), ch->max_score(), lost);
    }
    return r;
  }
  std::string caught, missed;
  for (const auto& name : p.must_lose) {
    const CaseGrade* cg = nullptr;
    for (const auto& c : ch->cases)
      if (c.name == name) cg = &c;
    if (cg && cg->status != Status::reference_error && cg->score < cg->max_score)
      caught += fmt::format("\n           {} {}: {}", name, status_name(cg->status),
                            cg->reason.substr(0, 200));
    else
      missed += (missed.empty() ? "" : ", ") + name;
  }
  r.held = missed.empty();
  r.line = r.held ? fmt::format("caught   {} ({}):{}", id, p.description, caught)
                  : fmt::format("MISSED   {} ({}): full marks on {}", id, p.description, missed);
  return r;
}

std::vector<std::string> whole_chapters(const Rubric& rubric,
                                        const std::vector<std::string>& filters) {
  std::vector<std::string> whole;
  for (const auto& f : filters)
    if (f.find('/') != std::string::npos) return whole;
  for (const auto& ch : rubric.chapters)
    if (filters.empty() || std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
          return ch.name.rfind(f, 0) == 0;
        }))
      whole.push_back(ch.name);
  return whole;
}

std::vector<const CaseSpec*> unproved_cases(const std::vector<Proof>& proofs, const Rubric& rubric,
                                            const std::vector<std::string>& chapters) {
  std::vector<const CaseSpec*> unproved;
  for (const auto& name : chapters) {
    const ChapterSpec* ch = rubric.chapter(name);
    if (!ch) continue;
    for (const auto& c : ch->cases)
      if (std::none_of(proofs.begin(), proofs.end(), [&](const Proof& p) {
            return p.chaff &&
                   std::find(p.must_lose.begin(), p.must_lose.end(), c.name) != p.must_lose.end();
          }))
        unproved.push_back(&c);
  }
  return unproved;
}

namespace {

// The chapters of proofs, in their order.
std::vector<std::string> proof_chapters(const std::vector<Proof>& proofs) {
  std::vector<std::string> chapters;
  for (const auto& p : proofs)
    if (std::find(chapters.begin(), chapters.end(), p.chapter) == chapters.end())
      chapters.push_back(p.chapter);
  return chapters;
}

// Stages, grades and judges proof p in the student tree `slot` with `jobs` workers; `took` gets
// its build and case seconds, so a slow suite shows where.
ProofResult prove(const Proof& p, int slot, int jobs, const Project& project, const Rubric& rubric,
                  Reference& reference, const GradeOptions& opts, std::string& took) {
  fs::path dir = opts.work_dir / "proofs" /
                 safe_name((p.chaff ? "chaff-" : "wheat-") + p.chapter + "-" + p.name);
  stage_proof(p, project, rubric, dir);
  GradeOptions one = opts;
  one.chapters = {p.chapter};
  // A chaff is judged only on the cases it must lose, so only those run; a wheat runs them all.
  if (p.chaff) one.cases = p.must_lose;
  one.jobs = jobs;
  one.trusted_build = true;  // a proof is the instructor's code: it may use the compiler cache
  Grade g = grade_submission(dir, fmt::format("proof-slot-{}", slot), project, rubric, reference,
                             one, false);
  for (const auto& [phase, seconds] : g.timings)
    if (phase == "build" || phase == "student cases")
      took += fmt::format("{}{} {:.1f} s", took.empty() ? " (" : ", ", phase, seconds);
  if (!took.empty()) took += ")";
  return judge_proof(p, g);
}

// Prints every proof's line and the totals; true when every chaff was caught, every wheat
// accepted and every case of the `whole` chapters is some chaff's to lose.
bool summarize(const std::vector<Proof>& proofs, const std::vector<ProofResult>& results,
               const Rubric& rubric, const std::vector<std::string>& whole, std::ostream& out) {
  int chaffs = 0, caught = 0, wheats = 0, accepted = 0;
  for (std::size_t i = 0; i < proofs.size(); ++i) {
    out << results[i].line << "\n";
    (proofs[i].chaff ? chaffs : wheats)++;
    if (results[i].held) (proofs[i].chaff ? caught : accepted)++;
  }
  out << fmt::format("chaff caught: {} of {}, wheat accepted: {} of {}\n", caught, chaffs, accepted,
                     wheats);
  // A case no chaff must lose has never been shown to reject anything: full marks for wrong code
  // there would go unnoticed.
  const std::vector<const CaseSpec*> unproved = unproved_cases(proofs, rubric, whole);
  for (const CaseSpec* c : unproved)
    out << fmt::format("UNPROVED {}: no chaff must lose it; add one to autograder/chaff/{}/\n",
                       c->name, c->chapter);
  return caught == chaffs && accepted == wheats && unproved.empty();
}

}  // namespace

bool run_proofs(const std::vector<Proof>& proofs, const Project& project, const Rubric& rubric,
                const GradeOptions& opts, const std::vector<std::string>& whole,
                std::ostream& out) {
  const std::vector<std::string> chapters = proof_chapters(proofs);
  GradeOptions ref_opts = opts;
  ref_opts.chapters = chapters;
  Reference reference(project, rubric, ref_opts);
  reference.prepare(select_chapters(rubric, chapters), opts);

  // Each worker reuses one student build tree (slot), so a proof recompiles only its edited file.
  std::mutex mu;
  std::vector<ProofResult> results(proofs.size());
  auto prove_one = [&](std::size_t i, int slot, int jobs) {
    const Proof& p = proofs[i];
    std::string took;
    try {
      results[i] = prove(p, slot, jobs, project, rubric, reference, opts, took);
    } catch (const std::exception& e) {
      results[i].line = fmt::format("ERROR    {}/{}: {}", p.chapter, p.name, e.what());
    }
    std::lock_guard lock(mu);
    std::fprintf(stderr, "chaff: %s %s/%s%s\n", results[i].held ? "ok  " : "FAIL",
                 p.chapter.c_str(), p.name.c_str(), took.c_str());
  };
  // Proofs come chapter by chapter. A chapter's first proof runs alone, with every core: its slot
  // compiles the chapter's tree once, and the other slots then find those objects in the compiler
  // cache instead of all compiling the same files at once.
  for (std::size_t first = 0, end; first < proofs.size(); first = end) {
    for (end = first + 1; end < proofs.size() && proofs[end].chapter == proofs[first].chapter;)
      ++end;
    prove_one(first, 0, opts.jobs);
    parallel_for(end - first - 1, opts.jobs,
                 [&](std::size_t i, int slot) { prove_one(first + 1 + i, slot, 1); });
  }
  return summarize(proofs, results, rubric, whole, out);
}

}  // namespace mgpu::grade
