// mgpu-grade: the command line of the grader. `./mgpu grade|grade-batch|release|submit|
// gradescope-bundle` lands here; each subcommand is a thin layer over the grader's parts.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "commands/batch.hpp"
#include "commands/distribute.hpp"
#include "commands/proof.hpp"
#include "commands/visible.hpp"
#include "grade.hpp"
#include "report/report.hpp"
#include "sandbox/sandbox.hpp"
#include "util.hpp"

namespace fs = std::filesystem;
using namespace mgpu::grade;

namespace {

void on_signal(int sig) {
  kill_all_running();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// ./mgpu changes into the project root before it runs us; it passes the folder the user typed
// the command in as MGPU_CALLER_PWD, against which relative paths are meant.
fs::path user_path(const std::string& s) {
  if (s.empty()) return {};
  fs::path p(s);
  const char* caller = std::getenv("MGPU_CALLER_PWD");
  if (p.is_relative() && caller && *caller) p = fs::path(caller) / p;
  return p.lexically_normal();
}

struct Common {
  std::vector<std::string> chapters;
  std::string seed;
  std::vector<std::string> rubrics;
  std::vector<std::string> cases_dirs;
  std::string work_dir;
  std::string secret_file;
  int jobs = available_cpus();
  int labs_per_gpu = 0;  // 0: the rubric's gpu_labs.labs_per_gpu
  bool no_drop = false;

  void add(CLI::App* app) {
    app->add_option("--chapter", chapters,
                    "grade only this chapter (prefix, e.g. 11_2); repeatable");
    app->add_option("--seed", seed,
                    "grading seed: a number, or 'random' (default: the rubric's seed)");
    app->add_option("--rubric", rubrics,
                    "private rubric laid over autograder/rubric.json; repeatable");
    app->add_option(
        "--cases-dir", cases_dirs,
        "folder of private case sources (<chapter>.cpp or <chapter>/*.cpp); repeatable");
    app->add_option(
        "--secret", secret_file,
        "file holding the instructor's secret: hidden cases then run with a seed derived from it "
        "and "
        "the student's id, never shown (default: autograder/private/secret when it exists)");
    app->add_option("--work-dir", work_dir,
                    "cached build trees and reference results (default: build/grade)");
    app->add_option("--jobs,-j", jobs, "parallel compiles and case runs")
        ->check(CLI::PositiveNumber);
    app->add_option("--labs-per-gpu", labs_per_gpu,
                    "GPU labs that may run at once on one device, across every grader of this "
                    "machine (default: the rubric's gpu_labs.labs_per_gpu, else 1)")
        ->check(CLI::Range(1, 64));
    app->add_flag("--no-drop", no_drop, "when root, run cases as root instead of as user nobody");
  }

  Rubric rubric(const Project& p) const {
    std::vector<fs::path> extra;
    for (const auto& r : rubrics) extra.push_back(user_path(r));
    return load_rubrics(p.root / "autograder" / "rubric.json", extra);
  }

  GradeOptions options(const Project& p, const Rubric& r) const {
    GradeOptions o;
    o.chapters = chapters;
    if (seed.empty())
      o.seed = r.seed;
    else if (seed == "random")
      o.seed = std::random_device{}() % 1000000000u;
    else {
      try {
        o.seed = std::stoull(seed);
      } catch (const std::exception&) {
        throw std::runtime_error("--seed " + seed +
                                 ": expected a non-negative integer or 'random'");
      }
    }
    for (const auto& d : cases_dirs) {
      fs::path dir = fs::absolute(user_path(d));
      if (!fs::is_directory(dir)) throw std::runtime_error("--cases-dir " + d + ": not a folder");
      o.cases_dirs.push_back(dir);
    }
    fs::path secret =
        secret_file.empty() ? p.root / "autograder" / "private" / "secret" : user_path(secret_file);
    if (!secret_file.empty() || fs::exists(secret)) {
      o.secret = read_text(secret);
      while (!o.secret.empty() && std::isspace(static_cast<unsigned char>(o.secret.back())))
        o.secret.pop_back();
      if (o.secret.size() < 16)
        throw std::runtime_error(
            fmt::format("--secret {}: the secret has {} characters; write at least 16 random ones, "
                        "e.g. `head -c 24 /dev/urandom | base64 > {}`",
                        secret.string(), o.secret.size(), secret.string()));
    }
    o.work_dir = work_dir.empty() ? p.root / "build" / "grade" : fs::absolute(user_path(work_dir));
    o.jobs = jobs;
    o.labs_per_gpu = labs_per_gpu;
    o.drop_privileges = !no_drop;
    return o;
  }
};

// Gradescope's submission_metadata.json names the submitters; a group shares one id (their ids
// sorted and joined), so resubmissions by any member keep the same hidden inputs.
std::string student_id_from_metadata(const fs::path& file) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_text(file));
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("--submission-metadata {}: not readable JSON ({})", file.string(), e.what()));
  }
  std::vector<std::string> ids;
  if (doc.contains("users") && doc["users"].is_array())
    for (const auto& u : doc["users"]) {
      if (!u.is_object()) continue;
      for (const char* key : {"id", "email"})
        if (u.contains(key) && !u[key].is_null()) {
          ids.push_back(u[key].is_string() ? u[key].get<std::string>() : u[key].dump());
          break;
        }
    }
  if (ids.empty() && doc.contains("id") && !doc["id"].is_null()) ids.push_back(doc["id"].dump());
  if (ids.empty())
    throw std::runtime_error(
        fmt::format("--submission-metadata {}: no users[].id or id in it", file.string()));
  std::sort(ids.begin(), ids.end());
  std::string joined;
  for (const auto& id : ids) joined += (joined.empty() ? "" : "+") + id;
  return joined;
}

// PrairieLearn's data.json names no user; its variant_seed is drawn per student's variant of the
// question, so it keys the hidden inputs as a user id would (a regrade of the same variant keeps
// them).
std::string student_id_from_prairielearn(const fs::path& file) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_text(file));
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("--prairielearn-data {}: not readable JSON ({})", file.string(), e.what()));
  }
  const auto seed = doc.is_object() ? doc.find("variant_seed") : doc.end();
  if (seed == doc.end() || !(seed->is_string() || seed->is_number()))
    throw std::runtime_error(
        fmt::format("--prairielearn-data {}: no variant_seed in it; fix: pass --student-id, or "
                    "leave the option out (every student then shares the hidden seed)",
                    file.string()));
  return "pl-variant-" + (seed->is_string() ? seed->get<std::string>() : seed->dump());
}

bool reference_available(const Project& p) { return p.own_is_solution && p.has_solutions(); }

// Before any student code runs: a sandbox must exist, what killed graders left behind goes, and
// everything a case must never read is closed to other users (autograder/SECURITY.md).
void prepare_sandbox(const Project& p, const GradeOptions& o) {
  require_sandbox();
  // A student build as its own uid must reach its folder in the work folder, so the work folder
  // cannot lie inside a folder sealed below.
  if (sandbox().kind == SandboxKind::uid)
    for (const fs::path& sealed : {p.own_tree, p.root / "solutions"}) {
      const fs::path rel =
          fs::weakly_canonical(o.work_dir).lexically_relative(fs::weakly_canonical(sealed));
      if (!rel.empty() && *rel.begin() != "..")
        throw std::runtime_error(
            fmt::format("--work-dir {} lies inside {}, which is closed to the build uids; "
                        "choose a work folder outside it (the default is build/grade)",
                        o.work_dir.string(), sealed.string()));
    }
  sweep_leftovers();
  const fs::path a = p.root / "autograder";
  // Closed: the reference, its results, its private trees, the chaff proofs (each holds a
  // chapter's reference), git's data, the proofs' sources and private files. Passed
  // through only: the way to the student build trees, each owned by its build uid while it builds
  // (build.cpp, run_student_build) and by the grader's user otherwise.
  seal({p.root / "solutions", p.own_tree, o.work_dir / "reference",
        o.work_dir / "reference-private", o.work_dir / "gradescope-bundle", o.work_dir / "proofs",
        p.root / ".git", a / "chaff", a / "wheat", a / "private"});
  fs::create_directories(o.work_dir / "student");
  seal_traverse_only({p.root / "build", o.work_dir, o.work_dir / "student"});
}

// ---- the commands: each declares its options on its own CLI::App and returns what it runs once
// parsed (the exit status). Their options live in a shared struct the runner holds.

/// One subcommand of mgpu-grade: its parsed command line, and what it does.
struct Command {
  CLI::App* cli;
  std::function<int()> run;
};

/// `--check-full-marks`: 1, naming the first such case, unless every case that ran got full
/// marks.
int check_full_marks(const Grade& g) {
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases)
      if (c.status != Status::skipped && (c.status != Status::passed || c.score < c.max_score)) {
        std::cerr << fmt::format("mgpu-grade: {} got {:g} of {:g} ({}: {})\n", c.name, c.score,
                                 c.max_score, status_name(c.status), c.reason);
        return 1;
      }
  return 0;
}

struct GradeArgs {
  Common common;
  std::string submission;
  bool solution = false, timings = false, quiet = false, check_full = false;
  std::string json_out, gs_out, pl_out, junit_out, student_id, metadata, pl_data;
};

// A student distribution has no reference: grading there runs the visible tests.
int run_grade(GradeArgs& a, const Project& project) {
  Rubric rubric = a.common.rubric(project);
  GradeOptions opts = a.common.options(project, rubric);
  fs::path sub_path = a.submission.empty() ? project.root / "chapters" : user_path(a.submission);
  if (!reference_available(project)) {
    if (a.solution)
      throw std::runtime_error(
          "--solution: this copy has no reference solutions (solutions/ is absent)");
    enable_progress(!a.quiet);
    auto vis = run_visible_tests(sub_path, project, rubric, opts);
    std::cout << visible_report(vis, use_colour(1));
    return 0;
  }
  prepare_sandbox(project, opts);
  enable_progress(!a.quiet);
  Reference reference(project, rubric, opts);
  std::string name = a.submission.empty()
                         ? "checkout"
                         : fs::absolute(sub_path).lexically_normal().filename().string();
  if (!a.metadata.empty()) a.student_id = student_id_from_metadata(user_path(a.metadata));
  if (!a.pl_data.empty()) a.student_id = student_id_from_prairielearn(user_path(a.pl_data));
  Grade g =
      grade_submission(sub_path, name, project, rubric, reference,
                       opts.for_student(a.student_id.empty() ? name : a.student_id), a.solution);
  if (!a.quiet) std::cout << terminal_report(g, use_colour(1), a.timings);
  if (!a.json_out.empty()) write_text(user_path(a.json_out), json_report(g).dump(2) + "\n");
  if (!a.gs_out.empty()) write_text(user_path(a.gs_out), gradescope_report(g).dump(2) + "\n");
  if (!a.pl_out.empty()) write_text(user_path(a.pl_out), prairielearn_report(g).dump(2) + "\n");
  if (!a.junit_out.empty()) write_text(user_path(a.junit_out), junit_report(g));
  return a.check_full ? check_full_marks(g) : 0;
}

Command grade_command(CLI::App& app, const Project& project) {
  auto a = std::make_shared<GradeArgs>();
  auto* cmd = app.add_subcommand(
      "grade", "grade chapters/ (or SUBMISSION, a folder or .zip) against the reference");
  cmd->add_option(
      "submission", a->submission,
      "folder or .zip holding chapters/<chapter>/<file> (default: this checkout's chapters/)");
  cmd->add_flag("--solution", a->solution,
                "grade the reference solutions themselves (should be full marks)");
  cmd->add_option("--json", a->json_out, "write the full grade as JSON");
  cmd->add_option("--gradescope", a->gs_out, "write Gradescope's results.json");
  cmd->add_option("--prairielearn", a->pl_out,
                  "write PrairieLearn's external-grader results.json (score as a fraction)");
  cmd->add_option("--junit", a->junit_out, "write JUnit XML");
  cmd->add_flag("--check-full-marks", a->check_full,
                "exit 1 unless every case that ran got full marks (a self-check of the reference)");
  cmd->add_flag("--timings", a->timings,
                "print seconds per phase (reference, build, student cases)");
  cmd->add_flag("--quiet,-q", a->quiet, "no terminal table");
  cmd->add_option("--student-id", a->student_id,
                  "who submitted: with a secret, picks the hidden cases' seed (default: the "
                  "submission's name)");
  cmd->add_option("--submission-metadata", a->metadata,
                  "Gradescope's submission_metadata.json; the student id comes from its users")
      ->excludes("--student-id");
  cmd->add_option("--prairielearn-data", a->pl_data,
                  "PrairieLearn's /grade/data/data.json; the student id is its variant_seed, "
                  "which PrairieLearn draws per student's question variant")
      ->excludes("--student-id")
      ->excludes("--submission-metadata");
  a->common.add(cmd);
  return {cmd, [a, &project] { return run_grade(*a, project); }};
}

struct BatchArgs {
  Common common;
  BatchOptions batch;
  std::string shard;
};

int run_batch(BatchArgs& a, const Project& project) {
  BatchOptions& batch = a.batch;
  if (batch.dir.empty() || batch.csv.empty())
    throw std::runtime_error(
        "grade-batch: give the folder of submissions and --csv FILE (see --help)");
  if (!a.shard.empty()) parse_shard(a.shard, batch);
  if (!reference_available(project))
    throw std::runtime_error("grade-batch needs the reference solutions (solutions/ is absent)");
  Rubric rubric = a.common.rubric(project);
  GradeOptions opts = a.common.options(project, rubric);
  prepare_sandbox(project, opts);
  batch.jobs = a.common.jobs;
  batch.dir = user_path(batch.dir.string());
  batch.csv = fs::absolute(user_path(batch.csv.string()));
  if (!batch.reports.empty()) batch.reports = user_path(batch.reports.string());
  auto t0 = std::chrono::steady_clock::now();
  int n = grade_batch(batch, project, rubric, opts);
  std::fprintf(stderr, "grade-batch: graded %d submissions in %.1f s into %s\n", n,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               batch.csv.c_str());
  return 0;
}

Command batch_command(CLI::App& app, const Project& project) {
  auto a = std::make_shared<BatchArgs>();
  auto* cmd = app.add_subcommand(
      "grade-batch", "grade every submission (folder or .zip) in DIR into a CSV gradebook");
  cmd->add_option("dir", a->batch.dir, "folder of submissions");
  cmd->add_option("--csv", a->batch.csv, "gradebook to create or resume");
  cmd->add_option("--shard", a->shard,
                  "grade only slice I of N (e.g. 2/4), for N machines or a job array; join with "
                  "`grade-batch merge`");
  cmd->add_option("--reports", a->batch.reports,
                  "also write one JSON report per submission into this folder");
  a->common.jobs = std::min(2, available_cpus());  // here: submissions graded at the same time,
                                                   // each with one compile and one case at a time
  a->common.add(cmd);
  return {cmd, [a, &project] { return run_batch(*a, project); }};
}

Command merge_command(CLI::App& batch) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = batch.add_subcommand(
      "merge", "join the gradebooks of a sharded batch into one (rows sorted by submission)");
  cmd->add_option("out", a->out, "gradebook to write")->required();
  cmd->add_option("inputs", a->inputs, "the shards' gradebooks")->required();
  return {cmd, [a] {
            std::vector<fs::path> inputs;
            for (const auto& i : a->inputs) inputs.push_back(user_path(i));
            std::size_t n = merge_gradebooks(inputs, user_path(a->out));
            std::cout << fmt::format(
                "grade-batch merge: {} submissions from {} gradebooks into {}\n", n, inputs.size(),
                user_path(a->out).string());
            return 0;
          }};
}

Command release_command(CLI::App& app, const Project& project) {
  struct Args {
    std::string out;
    bool allow_dirty = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "release",
      "write the student distribution (HEAD without solutions/ and graded cases) to OUT");
  cmd->add_option("out", a->out, "new folder")->required();
  cmd->add_flag("--allow-dirty", a->allow_dirty,
                "ship the committed versions of files that have uncommitted changes");
  return {
      cmd, [a, &project] {
        const std::string out = user_path(a->out).string();
        Shipment s = write_release(project, out, a->allow_dirty);
        for (const auto& f : s.left_out)
          std::cerr << "release: left out the uncommitted changes of " << f << "\n";
        std::cout << fmt::format(
            "release: {} files of HEAD written to {} (no solutions/, graded cases or the grader's "
            "own tests; hints sealed for `./mgpu hint`; no reference code found in it).\n"
            "In it, `./mgpu test` runs the tests on the skeletons and `./mgpu grade` runs the "
            "visible tests.\n",
            s.files, out);
        return 0;
      }};
}

Command submit_command(CLI::App& app, const Project& project) {
  struct Args {
    std::string out = "manygpu-submission.zip", from;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("submit", "zip your editable chapter files for upload");
  cmd->add_option("-o,--output", a->out, "zip to write")->capture_default_str();
  cmd->add_option("--from", a->from,
                  "chapters folder to take the files from (default: this checkout's chapters/)");
  return {cmd, [a, &project] {
            Rubric rubric = load_rubric(project.root / "autograder" / "rubric.json");
            fs::path from = a->from.empty() ? project.root / "chapters" : user_path(a->from);
            const std::string out = user_path(a->out).string();
            auto files = write_submission(rubric, from, out);
            std::cout << fmt::format("submit: {} files in {}:\n", files.size(),
                                     fs::absolute(out).string());
            for (const auto& f : files) std::cout << "  " << f << "\n";
            std::cout << "Upload this zip. Only these files are graded; headers and tests come "
                         "from the course.\n";
            return 0;
          }};
}

struct BundleArgs {
  Common common;
  std::string out, secret;
  bool allow_dirty = false;
};

int run_bundle(const BundleArgs& a, const Project& project) {
  BundleOptions b;
  b.out = user_path(a.out);
  for (const auto& r : a.common.rubrics) b.rubrics.push_back(user_path(r));
  load_rubrics(project.root / "autograder" / "rubric.json",
               b.rubrics);  // reject a broken rubric now, not on Gradescope
  for (const auto& d : a.common.cases_dirs) b.cases_dirs.push_back(user_path(d));
  b.secret_file = user_path(a.secret);
  b.scratch = project.root / "build" / "grade" / "gradescope-bundle";
  b.allow_dirty = a.allow_dirty;
  Shipment s = write_gradescope_bundle(project, b);
  for (const auto& f : s.left_out)
    std::cerr << "gradescope-bundle: left out the uncommitted changes of " << f << "\n";
  std::cout << fmt::format(
      "gradescope-bundle: {} (upload it as the autograder: setup.sh builds the reference, "
      "run_autograder grades /autograder/submission)\n",
      fs::absolute(b.out).string());
  return 0;
}

Command bundle_command(CLI::App& app, const Project& project) {
  auto a = std::make_shared<BundleArgs>();
  auto* cmd = app.add_subcommand(
      "gradescope-bundle",
      "write the Gradescope autograder zip (setup.sh, run_autograder, HEAD of the repo)");
  cmd->add_option("out", a->out, "zip to write, e.g. autograder.zip")->required();
  cmd->add_option(
      "--secret", a->secret,
      "file with the secret the hidden cases' seeds derive from (default: a fresh random one)");
  cmd->add_flag("--allow-dirty", a->allow_dirty,
                "ship the committed versions of files that have uncommitted changes");
  cmd->add_option("--rubric", a->common.rubrics, "private rubric to include");
  cmd->add_option("--cases-dir", a->common.cases_dirs, "private case folder to include");
  return {cmd, [a, &project] { return run_bundle(*a, project); }};
}

// run_autograder's, when grade itself failed.
Command fallback_command(CLI::App& app, const Project& project) {
  struct Args {
    Common common;
    std::string out, reason;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "gradescope-fallback", "write a results.json that lists every case as failed with REASON");
  cmd->add_option("out", a->out, "results.json to write")->required();
  cmd->add_option("--reason", a->reason, "what went wrong, shown to the student")->required();
  a->common.add(cmd);
  return {cmd, [a, &project] {
            write_text(user_path(a->out),
                       gradescope_fallback(a->common.rubric(project), a->reason).dump(2) + "\n");
            return 0;
          }};
}

// The PrairieLearn entry point's, when grade itself failed: not gradable, so no attempt is used.
Command pl_fallback_command(CLI::App& app) {
  struct Args {
    std::string out, reason;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "prairielearn-fallback",
      "write a PrairieLearn results.json that marks the submission not gradable, with REASON");
  cmd->add_option("out", a->out, "results.json to write")->required();
  cmd->add_option("--reason", a->reason, "what went wrong, shown to the student")->required();
  return {cmd, [a] {
            write_text(user_path(a->out), prairielearn_not_gradable(a->reason).dump(2) + "\n");
            return 0;
          }};
}

struct ChaffArgs {
  Common common;
  std::vector<std::string> chapters;
};

int run_chaff(const ChaffArgs& a, const Project& project) {
  if (!reference_available(project))
    throw std::runtime_error("chaff needs the reference solutions (solutions/ is absent)");
  Rubric rubric = a.common.rubric(project);
  GradeOptions opts = a.common.options(project, rubric);
  prepare_sandbox(project, opts);
  auto proofs = load_proofs(project, rubric, a.chapters);
  if (proofs.empty())
    throw std::runtime_error(
        "chaff: no chaff or wheat matches; they live in autograder/chaff/<chapter>/ and "
        "autograder/wheat/<chapter>/");
  std::fprintf(stderr, "chaff: grading %zu chaffs and wheats, %d at a time\n", proofs.size(),
               opts.jobs);
  const bool proved =
      run_proofs(proofs, project, rubric, opts, whole_chapters(rubric, a.chapters), std::cout);
  return proved ? 0 : 1;
}

Command chaff_command(CLI::App& app, const Project& project) {
  auto a = std::make_shared<ChaffArgs>();
  auto* cmd = app.add_subcommand(
      "chaff",
      "grade every chaff (known-wrong edit of the reference) and wheat (known-right "
      "alternative) and check that each chaff loses its cases and each wheat gets full marks");
  cmd->add_option("chapters", a->chapters,
                  "only these chaffs and wheats: prefixes of <chapter> or <chapter>/<name>, e.g. "
                  "11_2 or 11_2_data_parallel/ring_");
  a->common.jobs = std::min(
      2, available_cpus());  // here: proofs graded at the same time, each in its own build slot
  a->common.add(cmd);
  return {cmd, [a, &project] { return run_chaff(*a, project); }};
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  ::signal(SIGPIPE, SIG_IGN);
  Project project = this_project();

  CLI::App app{"mgpu-grade: grade manygpu submissions against the reference solutions"};
  app.require_subcommand(1);
  // Declared in the order --help lists them; `merge` before `grade-batch` in the table, since
  // parsing `grade-batch merge` marks both.
  Command grade = grade_command(app, project);
  Command batch = batch_command(app, project);
  Command merge = merge_command(*batch.cli);
  Command release = release_command(app, project);
  Command submit = submit_command(app, project);
  Command bundle = bundle_command(app, project);
  Command fallback = fallback_command(app, project);
  Command pl_fallback = pl_fallback_command(app);
  Command chaff = chaff_command(app, project);
  const Command table[] = {grade, merge,   batch,  fallback, pl_fallback,
                           chaff, release, submit, bundle};

  CLI11_PARSE(app, argc, argv);
  try {
    for (const Command& c : table)
      if (c.cli->parsed()) return c.run();
  } catch (const std::exception& e) {  // a RubricError too
    std::cerr << "mgpu-grade: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
