// One submission from files to grade: stage, configure, build per chapter and per GPU lab, run
// the reference's and the student's programs in isolation, and judge. The chapters' cases and the
// GPU labs (pipeline/gpu_labs.hpp, the lab kind) take the same steps. Phase times go into the
// grade.
#include "grade.hpp"

#include <signal.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "pipeline/compare.hpp"
#include "pipeline/gpu_labs.hpp"
#include "pipeline/link_check.hpp"
#include "pipeline/pristine.hpp"
#include "pipeline/result_parse.hpp"
#include "pipeline/stage.hpp"
#include "pipeline/unpack.hpp"
#include "records/predictions.hpp"
#include "report/hints.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string excerpt(const std::string& label, const std::string& text, bool truncated) {
  if (text.empty()) return "";
  constexpr std::size_t kShow = 2000;
  std::string s = truncate_utf8(text, kShow);  // never half a character
  if (!s.empty() && s.back() != '\n') s += '\n';
  return fmt::format("--- {}{} ---\n{}", label,
                     truncated || text.size() > kShow ? " (truncated)" : "", s);
}

}  // namespace

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t, int)>& f) {
  std::atomic<std::size_t> next{0};
  // A throw on a worker thread would end the grader without a report: the first one stops the
  // loop and is rethrown here, after every thread has finished.
  std::exception_ptr first;
  std::mutex first_mu;
  auto worker = [&](int w) {
    for (std::size_t i; (i = next++) < n;) {
      try {
        f(i, w);
      } catch (...) {
        std::lock_guard lock(first_mu);
        if (!first) first = std::current_exception();
        next = n;
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (int w = 1; w < std::min<int>(jobs, static_cast<int>(n)); ++w) pool.emplace_back(worker, w);
    worker(0);
  }
  if (first) std::rethrow_exception(first);
}

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& f) {
  parallel_for(n, jobs, [&](std::size_t i, int) { f(i); });
}

std::uint64_t derive_seed(const std::string& secret, const std::string& student_id) {
  // Two rounds with a separator, so "ab"+"c" and "a"+"bc" differ; the modulus keeps seeds in
  // the range the case programs and reports use.
  std::uint64_t h = fnv1a64(student_id, fnv1a64(std::string_view("\0", 1), fnv1a64(secret)));
  return fnv1a64(secret, h) % 1000000000ull;
}

GradeOptions GradeOptions::for_student(const std::string& student_id) const {
  GradeOptions o = *this;
  if (!secret.empty()) o.hidden_seed = derive_seed(secret, student_id);
  return o;
}

CaseRun run_case(const fs::path& exe, const CaseSpec& spec, std::uint64_t seed,
                 bool drop_privileges, bool untrusted_code, const fs::path& host) {
  RunSpec rs;
  rs.exe = exe;
  rs.args = {"--case", spec.name, "--result-fd", "3"};
  rs.env = {{"MGPU_CASE_SEED", std::to_string(seed)}};  // not on a command line others can read
  // A student's case runs in the chapter's host program, which holds no chapter code and keeps
  // the books; the student's program runs beside it as each rank (given only that rank's input),
  // each student call and each plain case (autograder/harness/case_main.cpp). The instructor's
  // (the reference, proofs) runs whole, ranks as threads: the same numbers, faster.
  // MGPU_RANKS=processes or threads forces one way for all.
  const char* env = std::getenv("MGPU_RANKS");
  const std::string ranks = env ? env : "";
  if (ranks == "processes" || (ranks != "threads" && untrusted_code)) {
    if (host.empty()) {
      CaseRun r;
      r.status = Status::crashed;
      r.reason = "the grader has no host program " + exe.filename().string() +
                 "_host for this chapter: rebuild the grader's tree";
      return r;
    }
    rs.exe = host;
    rs.companion = exe;
    rs.args.insert(rs.args.end(), {"--rank-program", kCompanionArg});
    // The host holds a socket per rank process: 64 ranks, 11.7's largest drawn grid, need more
    // descriptors than a case's usual 64.
    rs.open_files = kRankProcessOpenFiles;
  }
  rs.result_fd = 3;
  rs.wall_s = spec.time_limit_s;
  rs.memory_bytes = static_cast<std::uint64_t>(spec.memory_mb * 1024 * 1024);
  rs.drop_privileges = drop_privileges;
  return classify_run(run_process(rs), spec.time_limit_s, spec.memory_mb);
}

namespace {

// A case's process that did not end by itself: never started, stopped at a limit, or killed by a
// signal. Fills r's status and reason and returns true then; false for a process that exited.
bool ended_abnormally(const RunOutcome& o, double time_limit_s, double memory_mb, CaseRun& r) {
  if (!o.started) {
    r.status = Status::crashed;
    r.reason = o.start_error;
  } else if (o.timed_out) {
    r.status = Status::timeout;
    r.reason = fmt::format("exceeded the {:g} s time limit and was stopped", time_limit_s);
  } else if (o.memory_exceeded) {
    r.status = Status::out_of_memory;
    r.reason = fmt::format(
        "its processes together held {:.0f} MiB, over the case's {:g} MiB limit, and were stopped",
        static_cast<double>(o.tree_memory_bytes) / (1 << 20), memory_mb);
  } else if (o.disk_exceeded) {
    r.status = Status::disk_limit;
    r.reason = o.disk_use + ", and was stopped";
  } else if (o.signal == SIGXFSZ) {
    r.status = Status::disk_limit;
    r.reason = "wrote a file larger than a case may write and was killed by " +
               signal_description(o.signal);
  } else if (o.signal == SIGXCPU) {
    r.status = Status::timeout;
    r.reason = "exceeded its CPU time limit";
  } else if (o.signal != 0) {
    const bool alloc = o.err.find("bad_alloc") != std::string::npos ||
                       o.err.find("Cannot allocate memory") != std::string::npos;
    r.status = alloc || o.signal == SIGKILL ? Status::out_of_memory : Status::crashed;
    r.reason = r.status == Status::crashed
                   ? "killed by " + signal_description(o.signal)
                   : fmt::format("ran out of memory (limit {:g} MiB) and was killed by {}",
                                 memory_mb, signal_description(o.signal));
  } else {
    return false;
  }
  return true;
}

// The status a well-formed result document reports (parse_result has checked its shape).
void read_result_status(nlohmann::json& doc, double memory_mb, CaseRun& r) {
  const std::string st = doc["status"];
  const std::string msg = doc.value("message", "");
  if (st == "ok") {
    r.status = Status::passed;
    r.result = std::move(doc);
  } else if (st == "not-implemented") {
    r.status = Status::not_implemented;
    r.reason = msg;
  } else if (st == "out-of-memory") {
    r.status = Status::out_of_memory;
    r.reason = fmt::format("ran out of memory (std::bad_alloc; limit {:g} MiB)", memory_mb);
  } else if (st == "exception") {
    r.status = Status::crashed;
    r.reason = fmt::format("threw {}: {}", doc.value("type", "an exception"), msg);
  } else {
    r.reason = msg.empty() ? "result status '" + st + "'" : msg;
  }
}

}  // namespace

CaseRun classify_run(const RunOutcome& o, double time_limit_s, double memory_mb) {
  CaseRun r;  // no-result unless a step below says otherwise
  r.seconds = o.wall_s;
  r.output = excerpt("stdout", o.out, o.out_truncated) + excerpt("stderr", o.err, o.err_truncated);
  if (ended_abnormally(o, time_limit_s, memory_mb, r)) return r;
  if (o.result_overflow) {
    r.reason = "its result was larger than the grader accepts";
    return r;
  }
  if (o.result.empty()) {
    r.reason = fmt::format("exited with code {} before writing a result", o.exit_code);
    if (o.out.find("\"values\"") != std::string::npos ||
        o.out.find("\"status\"") != std::string::npos || o.out.find("RESULT ") != std::string::npos)
      r.reason += " (results printed on stdout are not read)";
    return r;
  }
  // Whatever bytes came back: bounded depth, valid UTF-8, one document, the fields the judge
  // reads of the types it reads them as; anything else is this case's no-result, never the
  // grader's exception.
  ParsedResult parsed = parse_result(o.result);
  if (!parsed.ok) {
    r.reason = "its result " + parsed.problem;
    return r;
  }
  if (o.exit_code != 0) {
    r.reason = fmt::format("exited with code {} after its result", o.exit_code);
    return r;
  }
  read_result_status(parsed.doc, memory_mb, r);
  return r;
}

bool decided_by_runs(CaseGrade& g, const CaseRun& student, const CaseRun& reference) {
  if (reference.status != Status::passed) {
    g.status = Status::reference_error;
    g.reason = "the reference run failed (" + std::string(status_name(reference.status)) + ": " +
               reference.reason + "); not counted";
    g.feedback = reference.output;
    return true;
  }
  if (student.status != Status::passed) {
    g.status = student.status;
    g.reason = student.reason;
    g.feedback = student.reason + "\n" + student.output;
    return true;
  }
  return false;
}

namespace {

CaseGrade judge_unguarded(const CaseSpec& spec, const CaseRun& student, const CaseRun& reference,
                          const Rubric& rubric) {
  CaseGrade g;
  g.name = spec.name;
  g.chapter = spec.chapter;
  g.visibility = spec.visibility;
  g.max_score = spec.max_score();
  g.seconds = student.seconds;
  if (decided_by_runs(g, student, reference)) return g;
  Comparison cmp =
      compare_values(student.result.value("values", nlohmann::json::object()),
                     reference.result.value("values", nlohmann::json::object()), rubric, spec);
  if (!cmp.ok) {
    g.status = Status::wrong;
    g.reason = cmp.reason;
    g.feedback = cmp.detail() + "\n" + student.output;
    return g;
  }
  std::vector<BudgetCheck> checks;
  for (const auto& b : spec.budgets)
    checks.push_back(check_budget(b, student.result.value("measures", nlohmann::json::object()),
                                  reference.result.value("measures", nlohmann::json::object())));
  // Under a floor the run moved less than any correct algorithm must, so its values were not
  // computed the way the chapter asks: the case is wrong, and the line gives the numbers.
  for (const auto& bc : checks)
    if (bc.below_floor) {
      g.status = Status::wrong;
      g.reason = bc.line;
      g.feedback = bc.line + "\n" + cmp.detail() + "\n" + student.output;
      return g;
    }
  g.status = Status::passed;
  g.score = spec.points;
  g.feedback = cmp.detail();
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const auto& bc = checks[i];
    g.feedback += "\n" + std::string(bc.ok ? "within budget: " : "over budget: ") + bc.line;
    if (bc.ok)
      g.score += spec.budgets[i].points;
    else if (g.reason.empty())
      g.reason = fmt::format("correct, but over budget: {} (-{:g} points)", bc.line,
                             spec.budgets[i].points);
  }
  if (!student.output.empty()) g.feedback += "\n" + student.output;
  return g;
}

}  // namespace

CaseGrade judge_case(const CaseSpec& spec, const CaseRun& student, const CaseRun& reference,
                     const Rubric& rubric) {
  try {
    return judge_unguarded(spec, student, reference, rubric);
  } catch (const std::exception& e) {
    // parse_result leaves nothing to throw on; should anything still, it costs this case only.
    CaseGrade g;
    g.name = spec.name;
    g.chapter = spec.chapter;
    g.visibility = spec.visibility;
    g.max_score = spec.max_score();
    g.seconds = student.seconds;
    g.status = Status::no_result;
    g.reason = "the grader could not judge its result (" + truncate_utf8(e.what(), 200) + ")";
    g.feedback = g.reason + "\n" + student.output;
    return g;
  }
}

std::vector<const ChapterSpec*> select_chapters(const Rubric& rubric,
                                                const std::vector<std::string>& filters) {
  std::vector<const ChapterSpec*> out;
  for (const auto& f : filters) {
    bool any = false;
    for (const auto& c : rubric.chapters) any = any || c.name.rfind(f, 0) == 0;
    any = any || (rubric.gpu_labs && std::string("gpu_labs").rfind(f, 0) == 0);
    if (!any) {
      std::string names;
      for (const auto& c : rubric.chapters) names += " " + c.name;
      throw std::runtime_error(
          fmt::format("--chapter {}: no chapter starts with it; chapters:{}", f, names));
    }
  }
  for (const auto& c : rubric.chapters) {
    bool keep = filters.empty();
    for (const auto& f : filters) keep = keep || c.name.rfind(f, 0) == 0;
    if (keep) out.push_back(&c);
  }
  return out;
}

std::optional<CaseRun> cached_reference(const fs::path& cache, const std::string& stamp) {
  std::error_code ec;
  if (!fs::exists(cache, ec)) return std::nullopt;
  try {
    ParsedJson entry = parse_json_bounded(read_text(cache), kResultMaxDepth + 1);
    const nlohmann::json& doc = entry.doc;
    auto st = doc.is_object() ? doc.find("stamp") : doc.end();
    auto res = doc.is_object() ? doc.find("result") : doc.end();
    if (entry.ok && st != doc.end() && res != doc.end() && *st == stamp) {
      ParsedResult stored = validate_result(*res);
      if (stored.ok && stored.doc["status"] == "ok") {
        CaseRun run;
        run.status = Status::passed;
        run.result = std::move(stored.doc);
        return run;
      }
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

void store_reference(const fs::path& cache, const std::string& stamp, const std::string& name,
                     const CaseRun& run) {
  if (run.status != Status::passed) return;  // a failure is retried, never remembered
  write_text(cache,
             nlohmann::json{{"stamp", stamp}, {"case", name}, {"result", run.result}}.dump());
}

Reference::Reference(const Project& project, const Rubric& rubric, const GradeOptions& opts)
    : project_(project), rubric_(rubric), opts_(opts) {
  tree_ = opts.cases_dirs.empty() ? project.own_tree : opts.work_dir / "reference-private";
}

namespace {

/// The built host program of `chapter` in `tree`, or empty where it has none.
fs::path host_program(const fs::path& tree, const std::string& chapter) {
  const fs::path host = tree / "bin" / host_target(chapter);
  std::error_code ec;
  return fs::exists(host, ec) ? host : fs::path{};
}

/// Builds the reference's case programs of `chapters` in `tree` (configured first when it holds
/// private cases); a chapter that fails gets its first error in build_errors.
void build_reference(const std::vector<const ChapterSpec*>& chapters, const fs::path& tree,
                     const Project& project, const GradeOptions& opts,
                     std::map<std::string, std::string>& build_errors) {
  if (!chapters.empty() && !opts.cases_dirs.empty()) {
    TreeConfig cfg{tree, "solution", {}, opts.cases_dirs};
    std::string err = configure_tree(cfg, project);
    if (!err.empty())
      for (const auto* c : chapters) build_errors[c->name] = err;
  }
  for (std::size_t i = 0; i < chapters.size(); ++i) {
    const auto* c = chapters[i];
    if (build_errors.count(c->name)) continue;
    Progress p(fmt::format("building the reference's case program for {} ({} of {})", c->name,
                           i + 1, chapters.size()));
    TargetBuild b = build_target(tree, case_target(c->name), opts.jobs, project);
    if (b.ok && has_program_target(tree, host_target(c->name)))
      b = build_target(tree, host_target(c->name), opts.jobs, project);
    if (!b.ok) build_errors[c->name] = b.first_error;
  }
}

// A reference case still to run or to load from the cache.
struct ReferenceJob {
  const ChapterSpec* chapter;
  const CaseSpec* spec;
  std::string stamp;  ///< content hash of the chapter's case program: keys the cached result
};

/// The cases of `chapters` whose reference built and that `done` says have no run yet.
std::vector<ReferenceJob> pending_reference_jobs(
    const std::vector<const ChapterSpec*>& chapters,
    const std::map<std::string, std::string>& build_errors, const fs::path& tree,
    const std::function<bool(const CaseSpec&)>& done) {
  std::vector<ReferenceJob> jobs;
  for (const auto* c : chapters) {
    if (build_errors.count(c->name)) continue;
    std::string stamp;  // hashed once per chapter, and only when one of its cases is to run
    for (const auto& cs : c->cases) {
      if (done(cs)) continue;
      if (stamp.empty()) stamp = file_hash(tree / "bin" / case_target(c->name));
      jobs.push_back({c, &cs, stamp});
    }
  }
  return jobs;
}

/// One reference run: the cached result when the program is the one that gave it, else a fresh
/// run, cached when it passed. Keyed by the program's content, not its time and size: a rebuilt
/// program with another behaviour never meets a stale result.
CaseRun run_or_load(const ReferenceJob& j, std::uint64_t seed, const fs::path& tree,
                    const GradeOptions& opts) {
  const fs::path cache =
      opts.work_dir / "reference" / std::to_string(seed) / (safe_name(j.spec->name) + ".json");
  if (auto cached = cached_reference(cache, j.stamp)) return std::move(*cached);
  CaseRun run = run_case(tree / "bin" / case_target(j.chapter->name), *j.spec, seed,
                         opts.drop_privileges, false, host_program(tree, j.chapter->name));
  store_reference(cache, j.stamp, j.spec->name, run);
  return run;
}

}  // namespace

double Reference::prepare(const std::vector<const ChapterSpec*>& all_chapters,
                          const GradeOptions& seeds) {
  auto t0 = Clock::now();
  std::lock_guard serial(prepare_mu_);
  std::vector<const ChapterSpec*> chapters;  // not built yet
  for (const auto* c : all_chapters)
    if (built_.insert(c->name).second) chapters.push_back(c);
  build_reference(chapters, tree_, project_, opts_, build_errors);
  const std::vector<ReferenceJob> jobs =
      pending_reference_jobs(all_chapters, build_errors, tree_, [&](const CaseSpec& cs) {
        return runs_.count({seeds.seed_for(cs), cs.name}) > 0;
      });
  std::vector<CaseRun> results(jobs.size());
  std::optional<Progress> running;
  if (!jobs.empty())
    running.emplace(
        fmt::format("running the reference on {} cases (cached results are reused)", jobs.size()));
  parallel_for(jobs.size(), opts_.jobs, [&](std::size_t i) {
    results[i] = run_or_load(jobs[i], seeds.seed_for(*jobs[i].spec), tree_, opts_);
  });
  running.reset();
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < jobs.size(); ++i)
    runs_[{seeds.seed_for(*jobs[i].spec), jobs[i].spec->name}] = std::move(results[i]);
  for (const auto* c : all_chapters)
    if (auto e = build_errors.find(c->name); e != build_errors.end())
      for (const auto& cs : c->cases) {
        CaseRun bad;
        bad.status = Status::build_failed;
        bad.reason = "the reference does not build: " + e->second;
        runs_[{seeds.seed_for(cs), cs.name}] = bad;
      }
  return since(t0);
}

const CaseRun& Reference::get(const std::string& case_name, std::uint64_t seed) const {
  std::lock_guard lock(mu_);
  static const CaseRun missing{
      Status::no_result, {}, "the reference was not prepared for this case", {}, 0};
  auto it = runs_.find({seed, case_name});
  return it == runs_.end() ? missing : it->second;
}

double Reference::prepare_labs(const GpuLabsSpec& spec) {
  auto t0 = Clock::now();
  std::lock_guard serial(prepare_mu_);
  for (const auto& c : spec.cases) {
    if (lab_builds_.count(c.lab)) continue;
    Progress p(fmt::format("building the reference's GPU lab {}", c.lab));
    TargetBuild b = build_target(tree_, lab_target(c.lab), opts_.jobs, project_);
    std::lock_guard lock(mu_);
    lab_builds_[c.lab] = std::move(b);
  }
  return since(t0);
}

TargetBuild Reference::lab_build(const std::string& lab) const {
  std::lock_guard lock(mu_);
  auto it = lab_builds_.find(lab);
  return it == lab_builds_.end() ? TargetBuild{false, "the reference lab was not built", "", 0}
                                 : it->second;
}

CaseRun Reference::lab_run(const GpuLabCase& c, int labs_per_gpu) const {
  // One reference run per case for the whole grader: batch workers that reach the case together
  // wait here for the first one's outputs rather than each running the lab on the device.
  std::lock_guard serial(lab_runs_mu_);
  if (auto it = lab_outputs_.find(c.name); it != lab_outputs_.end()) return it->second;
  const fs::path cache = opts_.work_dir / "reference" / "gpu_labs" /
                         (safe_name(c.name) + "-" + lab_args_key(c) + ".json");
  bool ran = false;
  CaseRun run =
      run_or_load_reference_lab(tree_ / "bin" / lab_target(c.lab), c, cache, labs_per_gpu, ran);
  lab_run_count_ += ran;
  // A failed reference is not kept: the next submission tries again (as with the cases).
  if (run.status == Status::passed) lab_outputs_[c.name] = run;
  return run;
}

int Reference::lab_runs() const {
  std::lock_guard serial(lab_runs_mu_);
  return lab_run_count_;
}

namespace {

/// A submission after staging: the tree its case programs are built in, and what it recorded.
/// For the reference solutions, the reference's own tree and nothing recorded.
struct Workspace {
  fs::path tree;
  fs::path scratch_chapters;   ///< the staged chapters (shown as "chapters/" in messages)
  std::string tree_error;      ///< set when the tree could not be configured
  fs::path lab_tree;           ///< the CUDA tree of the GPU labs, when they are graded
  std::string lab_tree_error;  ///< set when that tree could not be configured
  HintsSeen hints;
  PredictionsMade predictions;
};

/// Stage: the submission's files (chapters, and the GPU labs' when they are graded) onto the
/// pristine skeleton in its own folder, its hint and prediction records read, its grading tree
/// configured to link with the reference's tree, and the labs' CUDA tree configured.
/// Throws RejectedSubmission (unpack.hpp).
Workspace stage(const fs::path& submission, const std::string& build_name, const Project& project,
                const Rubric& rubric, const GpuLabs& labs, const fs::path& reference_tree,
                const GradeOptions& opts, std::vector<std::string>& notes) {
  fs::path base = opts.work_dir / "student" / safe_name(build_name);
  claim_student_folder(base, fs::absolute(submission).lexically_normal().string(),
                       opts.trusted_build);
  Staged st =
      stage_submission(submission, base / "src", rubric, project,
                       pristine_root(project, opts.work_dir), labs.graded() ? labs.spec : nullptr);
  notes.insert(notes.end(), st.notes.begin(), st.notes.end());
  Workspace ws;
  ws.hints = read_hints(st.top / kHintsRecord, rubric, notes);
  ws.predictions = read_predictions_by_chapter(st.top / kPredictionsRecord, rubric, notes);
  ws.scratch_chapters = st.chapters_dir;
  ws.tree = base / "build";
  Progress p("configuring the build of the submission");
  ws.tree_error = configure_tree(
      {ws.tree, "student", st.chapters_dir, {}, opts.trusted_build, reference_tree}, project);
  if (labs.graded()) {
    const TreeConfig cuda = lab_tree_config(base, st);
    ws.lab_tree = cuda.dir;
    ws.lab_tree_error = configure_tree(cuda, project);
  }
  return ws;
}

/// The builds of a submission: one per chapter (its case program) and one per GPU lab.
struct Builds {
  std::map<std::string, TargetBuild> chapters;  ///< by chapter
  std::map<std::string, TargetBuild> labs;      ///< by lab, when the labs are graded
};

/// Build, of the chapters: each chapter's objects compiled on their own, checked (no global symbol
/// the reference's objects do not define), then linked with the reference tree's runtime, harness
/// and case archives. Every compile comes before any link, so no compile sees a linked case
/// program. The reference solutions are not rebuilt: their builds are the reference's.
std::map<std::string, TargetBuild> build_chapters(const std::vector<const ChapterSpec*>& chapters,
                                                  const Workspace& ws, const Project& project,
                                                  const Reference& reference,
                                                  const GradeOptions& opts, bool solution) {
  std::map<std::string, TargetBuild> builds;
  for (std::size_t i = 0; i < chapters.size(); ++i) {
    const auto* c = chapters[i];
    if (!ws.tree_error.empty()) {
      builds[c->name] = TargetBuild{false, "the build could not be configured", ws.tree_error, 0};
    } else if (solution) {
      builds[c->name].ok = !reference.build_errors.count(c->name);
    } else {
      Progress p(
          fmt::format("building the submission's {} ({} of {})", c->name, i + 1, chapters.size()));
      builds[c->name] =
          build_target(ws.tree, chapter_target(c->name), opts.jobs, project, ws.scratch_chapters);
    }
  }
  if (solution || !ws.tree_error.empty()) return builds;
  for (const auto* c : chapters) {
    TargetBuild& b = builds[c->name];
    if (!b.ok) continue;
    if (const LinkCheck lc =
            check_submission_symbols(ws.tree, reference.tree(), case_target(c->name));
        !lc.ok) {
      b = TargetBuild{false, lc.first_error, lc.log, b.seconds};
      continue;
    }
    const TargetBuild linked = build_target(ws.tree, case_target(c->name), opts.jobs, project,
                                            ws.scratch_chapters, BuildStep::link);
    b = TargetBuild{linked.ok, linked.first_error, linked.log, b.seconds + linked.seconds};
  }
  return builds;
}

/// Build: the chapters' case programs, then each graded GPU lab's program in the CUDA tree (for
/// the reference solutions, the reference's own builds).
Builds build(const std::vector<const ChapterSpec*>& chapters, const GpuLabs& labs,
             const Workspace& ws, const Project& project, const Reference& reference,
             const GradeOptions& opts, bool solution) {
  Builds b;
  b.chapters = build_chapters(chapters, ws, project, reference, opts, solution);
  if (!labs.graded()) return b;
  if (solution)
    for (const auto& c : labs.spec->cases) b.labs[c.lab] = reference.lab_build(c.lab);
  else
    b.labs = build_labs(*labs.spec, ws.lab_tree, ws.lab_tree_error, opts.jobs, project);
  return b;
}

/// A case of a chapter that did not build: build-failed, with the compiler's words.
CaseGrade unbuilt_case(const CaseSpec& cs, const std::string& chapter, const TargetBuild& b) {
  CaseGrade g;
  g.name = cs.name;
  g.chapter = chapter;
  g.visibility = cs.visibility;
  g.max_score = cs.max_score();
  g.status = Status::build_failed;
  g.reason = b.first_error;
  g.feedback = b.log.empty() ? b.first_error : b.log;
  return g;
}

/// The cases of chapter c that `names` selects (all of them when it is empty), in rubric order.
std::vector<const CaseSpec*> selected_cases(const ChapterSpec& c,
                                            const std::vector<std::string>& names) {
  std::vector<const CaseSpec*> picked;
  for (const auto& cs : c.cases)
    if (names.empty() || std::find(names.begin(), names.end(), cs.name) != names.end())
      picked.push_back(&cs);
  return picked;
}

/// Run and judge, of the chapters: every case of a chapter that built runs in isolation and is
/// judged against the reference's run; a case whose reference did not pass is not run
/// (judge_case says why).
std::vector<ChapterGrade> run_and_judge_cases(const std::vector<const ChapterSpec*>& chapters,
                                              const std::map<std::string, TargetBuild>& builds,
                                              const fs::path& tree, const Reference& reference,
                                              const Rubric& rubric, const GradeOptions& opts) {
  std::vector<ChapterGrade> out;
  std::vector<std::vector<const CaseSpec*>> picked;          // per chapter, the cases graded
  std::vector<std::pair<CaseGrade*, const CaseSpec*>> jobs;  // filled in below, in parallel
  out.reserve(chapters.size());
  for (const auto* c : chapters) {
    ChapterGrade& cg = out.emplace_back();
    cg.name = c->name;
    cg.title = c->title;
    const auto& b = builds.at(cg.name);
    cg.build_failed = !b.ok;
    cg.build_error = b.first_error;
    picked.push_back(selected_cases(*c, opts.cases));
    for (const CaseSpec* cs : picked.back())
      cg.cases.push_back(cg.build_failed ? unbuilt_case(*cs, cg.name, b) : CaseGrade{});
  }
  for (std::size_t i = 0; i < chapters.size(); ++i)
    if (!out[i].build_failed)
      for (std::size_t j = 0; j < picked[i].size(); ++j)
        jobs.emplace_back(&out[i].cases[j], picked[i][j]);
  std::optional<Progress> running;
  if (!jobs.empty()) running.emplace(fmt::format("running the submission's {} cases", jobs.size()));
  parallel_for(jobs.size(), opts.jobs, [&](std::size_t k) {
    const CaseSpec& spec = *jobs[k].second;
    const CaseRun& ref = reference.get(spec.name, opts.seed_for(spec));
    CaseRun st;
    if (ref.status == Status::passed)
      st = run_case(tree / "bin" / case_target(spec.chapter), spec, opts.seed_for(spec),
                    opts.drop_privileges, !opts.trusted_build,
                    host_program(reference.tree(), spec.chapter));
    *jobs[k].first = judge_case(spec, st, ref, rubric);
  });
  return out;
}

/// Run and judge, of the GPU labs: one case after another (they share the device), the
/// reference's lab first. A case whose reference did not build or pass is reference_error, not
/// counted, whatever the submission did; one whose submission did not build is build_failed.
/// Labs that cannot run here are skipped with the reason.
ChapterGrade run_and_judge_labs(const GpuLabs& labs, const Builds& builds, const fs::path& tree,
                                const Reference& reference, const GradeOptions& opts,
                                bool solution) {
  const int labs_per_gpu = opts.labs_per_gpu > 0 ? opts.labs_per_gpu : labs.spec->labs_per_gpu;
  ChapterGrade cg;
  cg.name = "gpu_labs";
  cg.title = labs.spec->title;
  for (const auto& c : labs.spec->cases) {
    if (!labs.graded()) {
      cg.cases.push_back(skipped_lab(c, labs.unavailable));
      continue;
    }
    const TargetBuild rb = reference.lab_build(c.lab);
    if (!rb.ok) {
      cg.cases.push_back(unbuilt_lab(c, Status::reference_error,
                                     "the reference lab does not build: " + rb.first_error,
                                     rb.log));
      continue;
    }
    const CaseRun ref = reference.lab_run(c, labs_per_gpu);
    const TargetBuild& sb = builds.labs.at(c.lab);
    if (solution || ref.status != Status::passed)
      cg.cases.push_back(judge_lab(c, ref, ref));
    else if (!sb.ok)
      cg.cases.push_back(unbuilt_lab(c, Status::build_failed, sb.first_error, sb.log));
    else
      cg.cases.push_back(
          judge_lab(c, run_lab(tree / "bin" / lab_target(c.lab), c, labs_per_gpu), ref));
  }
  return cg;
}

/// Run and judge: every selected exercise, the chapters' cases, then the GPU labs'.
std::vector<ChapterGrade> run_and_judge(const std::vector<const ChapterSpec*>& chapters,
                                        const GpuLabs& labs, const Builds& builds,
                                        const Workspace& ws, const Reference& reference,
                                        const Rubric& rubric, const GradeOptions& opts,
                                        bool solution) {
  std::vector<ChapterGrade> out =
      run_and_judge_cases(chapters, builds.chapters, ws.tree, reference, rubric, opts);
  if (labs.selected())
    out.push_back(run_and_judge_labs(labs, builds, ws.lab_tree, reference, opts, solution));
  return out;
}

/// Closes a grade: total time, and a note for every case the reference itself got wrong.
Grade finished(Grade g, Clock::time_point t_all) {
  for (const auto& cg : g.chapters)
    for (const auto& c : cg.cases)
      if (c.status == Status::reference_error)
        g.notes.push_back(fmt::format("{}: {}", c.name, c.reason));
  g.execution_seconds = since(t_all);
  g.timings.emplace_back("total", g.execution_seconds);
  return g;
}

}  // namespace

Grade grade_submission(const fs::path& submission, const std::string& build_name,
                       const Project& project, const Rubric& rubric, Reference& reference,
                       const GradeOptions& opts, bool solution) {
  auto t_all = Clock::now();
  Grade g;
  g.submission = solution ? "the reference solutions" : submission.string();
  g.seed = opts.seed;
  g.hidden_seed = opts.hidden_seed;
  auto chapters = select_chapters(rubric, opts.chapters);
  const GpuLabs labs = select_gpu_labs(rubric, opts.chapters, reference.tree());
  double reference_s = reference.prepare(chapters, opts);
  if (labs.graded()) reference_s += reference.prepare_labs(*labs.spec);
  g.timings.emplace_back("reference", reference_s);

  auto t_build = Clock::now();
  Workspace ws;
  ws.tree = ws.lab_tree = reference.tree();
  try {
    if (!solution)
      ws = stage(submission, build_name, project, rubric, labs, reference.tree(), opts, g.notes);
  } catch (const RejectedSubmission& e) {
    // A link, a `..` path or a submission over the caps: nothing of it is built or run.
    return finished(rejected_grade(std::move(g), chapters, e.what()), t_all);
  }
  const Builds builds = build(chapters, labs, ws, project, reference, opts, solution);
  g.timings.emplace_back("build", since(t_build));

  auto t_cases = Clock::now();
  g.chapters = run_and_judge(chapters, labs, builds, ws, reference, rubric, opts, solution);
  g.timings.emplace_back("student cases", since(t_cases));
  if (labs.selected() && !labs.graded()) g.notes.push_back("GPU labs skipped: " + labs.unavailable);
  apply_hints(g.chapters, ws.hints, rubric);
  apply_predictions(g.chapters, ws.predictions);
  return finished(std::move(g), t_all);
}

}  // namespace mgpu::grade
