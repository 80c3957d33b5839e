// A hostile submission costs its own cases only, under both sandboxes: it cannot read the cached
// reference results, run the reference's case program, or compile against anything outside the
// course's public files and its own (the reference, the compiler cache, cases' folders, the
// previous submission in its batch slot); nothing it starts outlives its case, and its memory
// limit holds for all its processes together (autograder/SECURITY.md).
#include <doctest/doctest.h>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "commands/proof.hpp"
#include "grade.hpp"
#include "helpers.hpp"
#include "sandbox/runner.hpp"
#include "sandbox/sandbox.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

// This test's own seed, so processes of other graders running at the same time are not counted.
const char* kSeed = "424242";

// Processes of a toy case program run with this test's seed (in their environment, where the
// grader passes it): what a case could have left behind.
int toy_case_processes() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "cmdline"), env(e.path() / "environ");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string vars((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (cmd.find("cases_toy_a") != std::string::npos &&
        vars.find(std::string("MGPU_CASE_SEED=") + kSeed) != std::string::npos)
      ++n;
  }
  return n;
}

void attack_batch(const std::string& mode) {
  fs::path dir = fresh_dir("attacks_" + mode);
  const std::vector<std::string> attacks{
      "steal_reference",  "exec_reference",  "setsid_escape", "memory_children", "forged_write",
      "include_dev_zero", "incbin_dev_zero", "syscalls",      "tmp_channel",     "disk_fill"};
  for (const auto& a : attacks) {
    fs::path sub = toy_submission(dir / "subs" / a, "");
    fs::copy_file(fixtures() / "attacks" / a / "toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp",
                  fs::copy_options::overwrite_existing);
  }
  // Compile time: submissions that answer right only when the compiler can see a file it must not:
  // the reference; the compiler cache (in the grader's home; it holds the reference's objects);
  // a running case's folder in /tmp; the previous submission's object and library in a reused batch
  // slot (graded last, so its slot has had another submission). Written here, since the paths
  // differ from machine to machine.
  const fs::path home_marker = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") /
                               ".cache" / "mgpu-grade-test-marker.h";
  const fs::path tmp_folder =
      fs::temp_directory_path() / ("mgpu-grade-test-" + std::to_string(::getpid()));
  put(home_marker, "// a file of the grader's user\n");
  fs::create_directories(tmp_folder);
  fs::permissions(tmp_folder, fs::perms::owner_all, fs::perm_options::replace);
  put(tmp_folder / "marker.h", "// a file in a case's folder\n");
  const fs::path slots = grade_work() / "student";
  // The previous occupant's object of toy_a.cpp and its library, where CMake puts them in a
  // grading tree (cmake/grade_tree.cmake) for a source outside the source tree ("..": "__").
  auto toy_object = [&](const std::string& slot) {
    std::string rel =
        fs::relative(slots / slot / "src/chapters/toy_a/toy_a.cpp", this_project().root)
            .generic_string();
    for (std::size_t at; (at = rel.find("..")) != std::string::npos;) rel.replace(at, 2, "__");
    return slots / slot / "build/CMakeFiles/mgpu_toy_a.dir" / (rel + ".o");
  };
  std::vector<fs::path> previous;
  for (const std::string slot : {"batch-slot-0", "batch-slot-1"})
    previous.insert(previous.end(),
                    {toy_object(slot), slots / slot / "build/chapters/libmgpu_toy_a.a"});
  // What the project holds besides its sources: a file under build/ (where `./mgpu test` and
  // the grader cache the reference's results: the tests' own cache is one), git's data, a
  // Gradescope bundle left in the project (zipped, and unpacked with its secret), and a root-only
  // file in a folder the build does see. Each holds a token no report may show.
  const fs::path root = this_project().root;
  const std::string stem = "mgpu-grade-test-" + std::to_string(::getpid());
  const std::string token = "leaked-" + std::to_string(::getpid() * 7919L);  // in contents only
  const fs::path build_marker = root / "build" / (stem + ".h");
  const fs::path bundle_zip = root / (stem + ".zip");
  const fs::path bundle_dir = root / stem;
  const fs::path root_only = root / "chapters" / (stem + ".h");
  const fs::path git = fs::is_directory(root / ".git") ? root / ".git" / "HEAD" : root / ".git";
  for (const fs::path& f :
       {build_marker, bundle_zip, bundle_dir / "autograder/private/secret", root_only})
    put(f, "// " + token + "\n");
  fs::permissions(root_only, fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  // Removed however the test ends: they lie in the project.
  struct Cleanup {
    std::vector<fs::path> paths;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& p : paths) fs::remove_all(p, ec);
    }
  } cleanup{{build_marker, bundle_zip, bundle_dir, root_only}};
  const fs::path cached_result = grade_work() / "reference" / kSeed / "toy_a.scale.json";
  const std::map<std::string, std::vector<fs::path>> peeks{
      {"include_reference", {this_project().root / "solutions/11_1_memory/formulas.cpp"}},
      {"include_compiler_cache", {home_marker}},
      {"include_case_folder", {tmp_folder / "marker.h"}},
      {"include_build_folder", {build_marker, cached_result}},
      {"include_git", {git}},
      {"include_bundle", {bundle_zip, bundle_dir / "autograder/private/secret"}},
      {"include_root_only", {root_only}},
      // A grading tree compiles the chapters only: the graded cases, sources or objects, are out
      // of its view (cmake/grade_tree.cmake).
      {"include_case_source",
       {this_project().root / "autograder/tests/fixtures/toy/cases/toy_a.cpp",
        this_project().root / "autograder/cases/11_1_memory/formulas.cpp"}},
      {"include_case_objects", {this_project().own_tree / "cases/libmgpu_cases_toy_a.a"}},
      {"zzz_previous_submission", previous},
      // What every peek must look like: a path that does not exist.
      {"include_absent", {root / (stem + "-absent.h")}}};
  for (const auto& [name, paths] : peeks) {
    fs::path sub = toy_submission(dir / "subs" / name, "");
    std::string text = read_text(fixtures() / "toy/solution/toy_a/toy_a.cpp");
    const std::string body = "double toy_scale(double x, int k) { return x * k; }";
    REQUIRE(text.find(body) != std::string::npos);
    std::string seen;
    for (const auto& path : paths)
      seen += (seen.empty() ? "" : " || ") + ("__has_include(\"" + path.string() + "\")");
    // The root-only file is in view and its name known: it must read as absent all the same.
    const std::string read_it =
        name == "include_root_only" ? "#include \"" + paths.front().string() + "\"\n" : "";
    text.replace(text.find(body), body.size(),
                 "#if " + seen + "\n" + read_it +
                     "double toy_scale(double x, int k) { return x * k; }\n#else\n"
                     "double toy_scale(double, int) { return -1; }\n#endif");
    std::ofstream(sub / "toy_a/toy_a.cpp") << text;
  }
  // A correct submission graded beside them must keep its full marks.
  fs::path good = toy_submission(dir / "subs" / "zz_correct", "");
  fs::copy_file(fixtures() / "toy/solution/toy_a/toy_a.cpp", good / "toy_a/toy_a.cpp",
                fs::copy_options::overwrite_existing);
  // The exec attack finds the reference's case program from the work folder's name; it must be
  // really there, or the attack would lose for the wrong reason.
  const Project p = this_project();
  REQUIRE(work().filename() == "grade-tests-" + p.own_tree.filename().string());
  REQUIRE(fs::exists(work().parent_path() / p.own_tree.filename() / "bin" / "cases_toy_a"));
  // The reference results must be in the cache for the thief to find them (outside a sandbox).
  REQUIRE(grader(toy_args({"grade", "--solution", "--quiet", "--seed", kSeed})).exit_code == 0);
  REQUIRE(fs::exists(cached_result));
  REQUIRE(fs::exists(git));
  // Another process's notes in /tmp and /dev/shm, world-readable (tmp_channel listens for them).
  std::vector<fs::path> channel{"/tmp/mgpu-attack-channel"};
  if (fs::is_directory("/dev/shm")) channel.push_back("/dev/shm/mgpu-attack-channel");
  for (const auto& c : channel) {
    put(c, "hello\n");
    fs::permissions(c, fs::perms::all, fs::perm_options::replace);
  }

  RunOutcome o = grader(
      toy_args({"grade-batch", (dir / "subs").string(), "--csv", (dir / "grades.csv").string(),
                "--reports", (dir / "reports").string(), "--seed", kSeed}),
      600, {{"MGPU_SANDBOX", mode}});
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto report = [&](const std::string& name) {
    return nlohmann::json::parse(read_text(dir / "reports" / (name + ".json")));
  };
  CHECK(case_status(report("steal_reference"), "toy_a.scale") == "wrong");
  CHECK(case_status(report("exec_reference"), "toy_a.scale") == "wrong");
  // The build could not read what it peeked at, nor learn whether it exists: out of its view or
  // unreadable (the root-only file), each reads as the absent path does, in both sandboxes:
  // __has_include is false and the answer wrong, never a build that fails naming the file.
  for (const auto& [name, paths] : peeks) {
    const nlohmann::json r = report(name);
    CHECK_MESSAGE(case_status(r, "toy_a.scale") == "wrong", name);
    CHECK_MESSAGE(r.dump().find("Permission denied") == std::string::npos, name);
  }
  // The peek must have aimed at the right place: the slots hold such an object now (the last
  // occupant's own), so without the clean-up the previous one's would have been found.
  CHECK((fs::exists(toy_object("batch-slot-0")) || fs::exists(toy_object("batch-slot-1"))));
  fs::remove(home_marker);
  fs::remove_all(tmp_folder);
  for (const fs::path& f : {build_marker, bundle_zip, root_only}) fs::remove(f);
  fs::remove_all(bundle_dir);
  for (const auto& c : channel) fs::remove(c);
  // Link time: a global write() of its own is refused before any case runs, by name.
  for (const char* c : {"toy_a.scale", "toy_a.series", "toy_a.sum"})
    CHECK(case_status(report("forged_write"), c) == "build-failed");
  CHECK(report("forged_write").dump().find("`write`") != std::string::npos);
  // An endless file in the build fails it, fast and with the compiler's word for it.
  for (const char* a : {"include_dev_zero", "incbin_dev_zero"}) {
    CHECK_MESSAGE(case_status(report(a), "toy_a.scale") == "build-failed", a);
    CHECK_MESSAGE(report(a).dump().find("/dev/zero") != std::string::npos, a);
  }
  // No socket, ptrace, process_vm_readv, System V memory or io_uring; fork, socketpair,
  // memfd_create and shared mappings still work.
  CHECK(case_status(report("syscalls"), "toy_a.scale") == "wrong");
  CHECK(case_status(report("syscalls"), "toy_a.sum") == "passed");
  // Nothing another process left in /tmp or /dev/shm reaches a case, and what a case leaves
  // there is its own (namespaces) or could not be written (uid: out of its view).
  CHECK(case_status(report("tmp_channel"), "toy_a.scale") == "wrong");
  for (const auto& dir : {"/tmp", "/dev/shm"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      CHECK_MESSAGE(e.path().filename().string().rfind("mgpu-attack-channel-", 0) != 0,
                    e.path().string());
  }
  // No report shows what the build was kept from.
  for (const auto& e : fs::directory_iterator(dir / "reports"))
    CHECK_MESSAGE(read_text(e.path()).find(token) == std::string::npos, e.path().string());
  // The escape costs nobody else. Its own case answers first, or dies of its own grandchild's
  // kill(-1) (every process of the case is that one's to signal): a race it runs against itself.
  const std::string escaped = case_status(report("setsid_escape"), "toy_a.scale");
  CHECK_MESSAGE((escaped == "passed" || escaped == "out-of-memory" || escaped == "crashed"),
                escaped);
  // Many files, files deleted while held open, many empty files: each past the case's disk
  // limit, each stopped with a reason that says so; the other chapter keeps its point.
  for (const char* c : {"toy_a.scale", "toy_a.series", "toy_a.sum"})
    CHECK_MESSAGE(case_status(report("disk_fill"), c) == "disk-limit", c);
  CHECK(report("disk_fill").dump().find("filled its disk") != std::string::npos);
  CHECK(chapter_score(report("disk_fill"), "toy_b") == 1);
  auto mem = report("memory_children");
  CHECK(case_status(mem, "toy_a.series") == "out-of-memory");
  CHECK(mem.dump().find("processes together held") != std::string::npos);
  auto ok = report("zz_correct");
  CHECK(ok["score"].get<double>() == ok["max_score"].get<double>());
  CHECK(toy_case_processes() == 0);
}

// The reference's files of `chapter` with the edits of `fixture` applied: fixture is an attack
// written as a chaff (with must_lose) or a wheat of that chapter, staged the way `mgpu-grade chaff`
// stages one, in dir/<fixture's folder name>/chapters/<chapter> (a batch may stage several).
fs::path stage_edits(const fs::path& dir, const std::string& chapter, const fs::path& fixture) {
  const std::string name = fixture.parent_path().filename().string();
  Project edits = this_project();
  edits.root = dir / (name + "-edits");
  const bool chaff = nlohmann::json::parse(read_text(fixture)).contains("must_lose");
  const fs::path to = edits.root / "autograder" / (chaff ? "chaff" : "wheat") / chapter;
  fs::create_directories(to);
  fs::copy_file(fixture, to / (name + ".json"));
  const Rubric rubric = load_rubric(this_project().root / "autograder/rubric.json");
  stage_proof(load_proofs(edits, rubric, {}).at(0), this_project(), rubric, dir / name);
  fs::remove_all(edits.root);
  return dir / name / "chapters" / chapter;
}

// Grades one batch in dir, under sandbox `mode` with a student's ranks in processes (the
// default): one submission per entry of `attacks` (name: the folder of its files of `chapter`),
// and zz_correct, that chapter of the reference. Requires that the batch ran and that the
// reference kept every point; returns each attack's report.
std::map<std::string, nlohmann::json> grade_beside_reference(
    const fs::path& dir, const std::string& mode, const std::string& chapter,
    const std::map<std::string, fs::path>& attacks) {
  for (const auto& [name, files] : attacks) {
    fs::create_directories(dir / "subs" / name);
    fs::copy(files, dir / "subs" / name / chapter);
  }
  fs::create_directories(dir / "subs/zz_correct");
  fs::copy(this_project().root / "solutions" / chapter, dir / "subs/zz_correct" / chapter);
  const RunOutcome o = grader(
      {"grade-batch", (dir / "subs").string(), "--csv", (dir / "grades.csv").string(), "--reports",
       (dir / "reports").string(), "--seed", kSeed, "--chapter",
       chapter.substr(0, chapter.find('_', 3)), "--work-dir", grade_work().string(), "--jobs", "2"},
      // the default: a student's ranks in processes
      1200, {{"MGPU_SANDBOX", mode}, {"MGPU_RANKS", ""}});
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto report = [&](const std::string& who) {
    return nlohmann::json::parse(read_text(dir / "reports" / (who + ".json")));
  };
  const auto ok = report("zz_correct");
  CHECK(ok["score"].get<double>() == ok["max_score"].get<double>());
  CHECK(ok["score"].get<double>() > 0);
  std::map<std::string, nlohmann::json> reports;
  for (const auto& [name, files] : attacks) reports[name] = report(name);
  return reports;
}

// Five attacks that reach past a rank's process, in one 11.2 batch. A rank that reads its peers'
// buffers through pointers (attacks/peer_pointer: a ring that sums its peers' buffers where they
// lie and sends dummy bytes of the right sizes) wins the ring cases where ranks share an address
// space; a student's cases run their ranks in processes, so it loses them. The same ring passing
// its buffers through files (attacks/rank_files) wins where ranks can reach each other's
// folders; each rank works in its own, confined to it, so it loses them too. The same ring
// passing them through memory its global initialiser maps (attacks/constructor_shared) wins
// where ranks are threads or forks of a process that loaded the student's code; each rank is a
// fresh program with a block of its own, so it loses them too. A rank that writes
// a result of its own to the case's result descriptor (attacks/rank_result_fd, an edit of the
// reference) would void its case; a rank process has no such descriptor, so the write fails and
// the case scores in full. A rank that reaches its host (attacks/parent_reach: opens its memory
// for writing or its environment, or signals it) spoils its own answer; every try fails, so it
// scores in full too. The reference's ring graded in the same batch keeps every point.
void rank_attacks_batch(const std::string& mode) {
  const fs::path dir = fresh_dir("rank_attacks_" + mode);
  std::map<std::string, fs::path> attacks;
  const char* const rings[] = {"peer_pointer", "rank_files", "constructor_shared"};
  for (const char* ring : rings) {
    attacks[ring] = dir / ring;
    fs::copy(this_project().root / "solutions/11_2_data_parallel", attacks[ring]);
    fs::copy_file(fixtures() / "attacks" / ring / "11_2_data_parallel/ring_all_reduce.cpp",
                  attacks[ring] / "ring_all_reduce.cpp", fs::copy_options::overwrite_existing);
  }
  for (const char* edit : {"rank_result_fd", "parent_reach"})
    attacks[edit] = stage_edits(dir, "11_2_data_parallel",
                                fixtures() / "attacks" / edit / "11_2_data_parallel.json");
  auto reports = grade_beside_reference(dir, mode, "11_2_data_parallel", attacks);
  for (const char* ring : rings)
    for (const char* c :
         {"11_2.ring_reduce_scatter", "11_2.ring_all_reduce_fp32", "11_2.ring_all_reduce_bf16"}) {
      const std::string status = case_status(reports[ring], c);
      CHECK_MESSAGE(status != "passed", ring << " " << c << ": " << status);
      CHECK_MESSAGE(status != "absent", ring << " " << c);
    }
  const auto& written = reports["rank_result_fd"];
  CHECK(written.dump().find("FORGED") == std::string::npos);
  for (const char* edit : {"rank_result_fd", "parent_reach"}) {
    CHECK_MESSAGE(case_status(reports[edit], "11_2.ring_all_reduce_fp32") == "passed", edit);
    CHECK_MESSAGE(reports[edit]["score"].get<double>() == reports[edit]["max_score"].get<double>(),
                  edit);
  }
}

// Student code a case calls outside Cluster::run (attacks/outside_run, edits of the 11.5
// reference): a formula that leaves a thread behind to write a forged result and end the case's
// process, and a schedule builder that switches the runtime's default to ranks in threads so that
// run_pipeline, finding itself in the case's process, forges the result. In a student's graded
// run that code runs in a process of its own: the forgery never reaches the grader (the formula's
// cases get no result, the schedule's change is lost and its cases score), and the reference
// graded in the same batch keeps every point.
void outside_run_batch(const std::string& mode) {
  const fs::path dir = fresh_dir("outside_run_" + mode);
  const fs::path attack =
      stage_edits(dir, "11_5_pipeline", fixtures() / "attacks/outside_run/11_5_pipeline.json");
  const auto forged =
      grade_beside_reference(dir, mode, "11_5_pipeline", {{"outside_run", attack}})["outside_run"];
  CHECK(forged.dump().find("FORGED") == std::string::npos);
  // gpipe_bubble_fraction's thread ends the process it was left in, before any answer.
  CHECK(case_status(forged, "11_5.bubble") == "no-result");
  // gpipe_schedule's change of default died with its process: the ranks ran in processes.
  for (const char* c : {"11_5.schedules", "11_5.gpipe_gradients", "11_5.bubble_and_in_flight"})
    CHECK_MESSAGE(case_status(forged, c) == "passed", c);
  CHECK(case_status(forged, "11_5.one_f_one_b_gradients") == "passed");  // not touched
}

}  // namespace

TEST_CASE("hostile submissions cost their own cases only, in namespaces" *
          doctest::skip(!can_grade() || sandbox().kind != SandboxKind::namespaces)) {
  attack_batch("namespaces");
}

TEST_CASE("a rank can neither read its peers' buffers nor write its case's result, in namespaces" *
          doctest::skip(!can_grade() || sandbox().kind != SandboxKind::namespaces ||
                        !fs::exists(this_project().root / "solutions"))) {
  rank_attacks_batch("namespaces");
}

TEST_CASE(
    "a rank can neither read its peers' buffers nor write its case's result, with a uid per case" *
    doctest::skip(!can_grade() || ::geteuid() != 0 ||
                  !fs::exists(this_project().root / "solutions"))) {
  rank_attacks_batch("uid");
}

TEST_CASE("student code outside Cluster::run cannot touch the result, in namespaces" *
          doctest::skip(!can_grade() || sandbox().kind != SandboxKind::namespaces ||
                        !fs::exists(this_project().root / "solutions"))) {
  outside_run_batch("namespaces");
}

TEST_CASE("student code outside Cluster::run cannot touch the result, with a uid per case" *
          doctest::skip(!can_grade() || ::geteuid() != 0 ||
                        !fs::exists(this_project().root / "solutions"))) {
  outside_run_batch("uid");
}

TEST_CASE("hostile submissions cost their own cases only, with a uid per case (the fallback)" *
          doctest::skip(!can_grade() || ::geteuid() != 0)) {
  attack_batch("uid");
}

namespace {

// Processes whose command line holds `needle`.
int processes_with(const std::string& needle) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE(
    "a grader that is not root still seals its cases: namespaces, or a refusal naming the fix" *
    doctest::skip(::geteuid() != 0)) {
  // The grader's user here is nobody; its private folder stands for the reference results.
  const uid_t nobody = 65534;
  const fs::path secret_dir =
      fs::temp_directory_path() / ("mgpu-nonroot-" + std::to_string(::getpid()));
  put(secret_dir / "reference.json", "{\"answer\": 42}\n");
  REQUIRE(::chown(secret_dir.c_str(), nobody, nobody) == 0);
  REQUIRE(::chown((secret_dir / "reference.json").c_str(), nobody, nobody) == 0);
  fs::permissions(secret_dir, fs::perms::owner_all, fs::perm_options::replace);
  const std::string needle = "37.25";  // the leftover's sleep, found by its argument
  const fs::path report =
      fs::temp_directory_path() / ("mgpu-nonroot-" + std::to_string(::getpid()) + ".txt");
  fs::remove(report);

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The grader, as nobody: a case that reads the grader's files and leaves a process behind.
    if (::setgroups(0, nullptr) != 0 || ::setgid(nobody) != 0 || ::setuid(nobody) != 0) ::_exit(90);
    RunSpec spec;
    spec.exe = "/bin/sh";
    spec.args = {"-c", "cat " + (secret_dir / "reference.json").string() +
                           " 2>/dev/null || echo unreadable; "
                           "setsid sleep " +
                           needle + " >/dev/null 2>&1 & echo started"};
    spec.wall_s = 20;
    RunOutcome o = run_process(spec);
    std::ofstream(report) << to_string(sandbox().kind) << "\n"
                          << (o.started ? o.out : "refused: " + o.start_error);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::string got = read_text(report);
  MESSAGE(got);
  if (got.rfind("namespaces", 0) == 0) {
    CHECK(got.find("unreadable") !=
          std::string::npos);  // the grader's own file is not in the case's view
    CHECK(got.find("42") == std::string::npos);
    CHECK(got.find("started") != std::string::npos);
    // The PID namespace takes the leftover with it; the kernel's SIGKILL to its members may
    // need a moment to land, so wait a little before counting it as escaped.
    for (int i = 0; i < 50 && processes_with(needle) > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(processes_with(needle) == 0);
  } else {
    // No namespaces for a normal user here: nothing may run, and the message names the fix.
    CHECK(got.find("refused: ") != std::string::npos);
    CHECK(got.find("bubblewrap") != std::string::npos);
  }
  fs::remove_all(secret_dir);
  fs::remove(report);
}

namespace {

// A stand-in case program: `script` as an executable `name` anyone may run, in a fresh folder.
fs::path stand_in_case(const std::string& folder, const std::string& script,
                       const std::string& name = "cases_stand_in") {
  const fs::path exe = fresh_dir(folder) / name;
  put(exe, script);
  fs::permissions(exe,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  return exe;
}

}  // namespace

TEST_CASE("a student's case runs in its host program, which may open a descriptor per rank" *
          doctest::skip(!can_grade() || std::getenv("MGPU_RANKS") != nullptr)) {
  // The host holds a socket per rank process: under a case's usual 64 descriptors, 11.7's
  // 4 x 4 x 4 grid failed with "socketpair for rank 59: Too many open files".
  const std::string script = "#!/bin/sh\necho \"$0 args: $*\"\necho \"open files: $(ulimit -n)\"\n";
  const fs::path exe = stand_in_case("rank_descriptors", script);
  const fs::path host = stand_in_case("rank_descriptors_host", script, "cases_stand_in_host");
  CaseSpec spec;
  spec.name = "stand_in.case";
  const CaseRun instructors = run_case(exe, spec, 1, true, false, host);
  INFO(instructors.output);
  CHECK(instructors.output.find("--rank-program") == std::string::npos);
  CHECK(instructors.output.find("open files: 64\n") != std::string::npos);
  const CaseRun students = run_case(exe, spec, 1, true, true, host);
  INFO(students.output);
  // The host runs, told where the student's program is in its view.
  CHECK(students.output.find("cases_stand_in_host args:") != std::string::npos);
  CHECK(students.output.find("--rank-program ") != std::string::npos);
  CHECK(students.output.find("--rank-program {companion}") == std::string::npos);
  CHECK(students.output.find("open files: " + std::to_string(kRankProcessOpenFiles) + "\n") !=
        std::string::npos);
  CHECK(kRankProcessOpenFiles >= 64 + 16);  // 11.7's largest world, and the case's own
  // Without a host program, a student's case does not run at all.
  const CaseRun hostless = run_case(exe, spec, 1, true, true);
  CHECK(hostless.status == Status::crashed);
  CHECK(hostless.reason.find("no host program") != std::string::npos);
}

TEST_CASE("a case's seed is in its environment, not on its command line" *
          doctest::skip(!can_grade())) {
  // A stand-in case program that reports both: a command line is readable by every process of
  // the machine (the fallback has no PID namespace), an environment only by the case's own uid.
  const fs::path exe = stand_in_case(
      "seed_channel", "#!/bin/sh\necho \"args: $*\"\necho \"seed: $MGPU_CASE_SEED\"\n");
  CaseSpec spec;
  spec.name = "stand_in.case";
  const CaseRun r = run_case(exe, spec, 987654321, true);
  INFO(r.output);
  CHECK(r.output.find("seed: 987654321") != std::string::npos);
  CHECK(r.output.find("args: --case stand_in.case --result-fd 3") != std::string::npos);
  CHECK(r.output.find("args: --case stand_in.case --result-fd 3 ") == std::string::npos);
}

TEST_CASE("the leases' folder is refused when another user could make, swap or write it" *
          doctest::skip(::geteuid() != 0)) {
  const fs::path parent = fresh_dir("lease_folder");
  fs::permissions(parent,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  const fs::path folder = parent / "leases";
  // Made by the first grader, root's with mode 0700; opened again by the next.
  for (int i = 0; i < 2; ++i) {
    const int fd = open_lease_folder(folder);
    CHECK(fd >= 0);
    ::close(fd);
  }
  struct stat st {};
  REQUIRE(::lstat(folder.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
  CHECK((st.st_mode & 07777) == 0700);
  auto refused = [&](const std::string& words) {
    INFO(words);
    try {
      ::close(open_lease_folder(folder));
      FAIL("accepted");
    } catch (const std::runtime_error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
      CHECK_MESSAGE(std::string(e.what()).find("Fix: ") != std::string::npos, e.what());
    }
  };
  // Made first by another user (the case uids among them).
  REQUIRE(::chown(folder.c_str(), 2'100'000'000u, 2'100'000'000u) == 0);
  refused("owned by uid 2100000000");
  // Root's, but others may write in it.
  REQUIRE(::chown(folder.c_str(), 0, 0) == 0);
  fs::permissions(folder, fs::perms::all, fs::perm_options::replace);
  refused("mode 0777");
  // A link to a folder that would pass.
  fs::remove_all(folder);
  fs::create_directory(parent / "elsewhere");
  fs::permissions(parent / "elsewhere", fs::perms::owner_all, fs::perm_options::replace);
  fs::create_directory_symlink(parent / "elsewhere", folder);
  refused("is not a folder");
  // A parent others may write in: the folder could be swapped under the grader.
  fs::remove(folder);
  fs::permissions(parent, fs::perms::all, fs::perm_options::replace);
  refused("chmod go-w");
}

TEST_CASE("two graders with different TMPDIRs grade at once without touching each other's cases" *
          doctest::skip(!can_grade() || ::geteuid() != 0)) {
  // Case uids are the machine's: two checkouts, two shards of a batch on one node or two
  // scheduler jobs (each its own TMPDIR) must lease them from one place, or one grader's end of
  // a case kills the other's builds and cases, and its memory watchdog counts the other's
  // processes. Each grader here grades the toy reference as a submission (a build as a leased
  // uid, then its cases), then the reference a few times under new seeds (only cases), all in
  // the uid sandbox, both at once, each with its own TMPDIR and work folder.
  const fs::path dir = fresh_dir("two_graders");
  fs::path sub = toy_submission(dir / "reference", "");
  fs::copy_file(fixtures() / "toy/solution/toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp",
                fs::copy_options::overwrite_existing);
  struct Grader {
    std::string name;
    std::vector<RunOutcome> runs;
    std::vector<nlohmann::json> reports;
  };
  std::vector<Grader> graders{{"a", {}, {}}, {"b", {}, {}}};
  auto grade_all = [&](Grader& g) {
    const fs::path tmp = dir / ("tmp_" + g.name);
    fs::create_directories(tmp);
    fs::permissions(tmp, fs::perms::all | fs::perms::sticky_bit, fs::perm_options::replace);
    const std::vector<std::pair<std::string, std::string>> env{{"MGPU_SANDBOX", "uid"},
                                                               {"TMPDIR", tmp.string()}};
    for (int round = 0; round < 4; ++round) {
      const fs::path out = dir / (g.name + std::to_string(round) + ".json");
      std::vector<std::string> args{"grade",      round == 0 ? sub.string() : "--solution",
                                    "--json",     out.string(),
                                    "--seed",     std::to_string(5150 + round),
                                    "--rubric",   (fixtures() / "toy" / "rubric.json").string(),
                                    "--chapter",  "toy_",
                                    "--work-dir", (dir / ("work_" + g.name)).string(),
                                    "--jobs",     "2"};
      g.runs.push_back(grader(args, 600, env));
      g.reports.push_back(g.runs.back().exit_code == 0 ? nlohmann::json::parse(read_text(out))
                                                       : nlohmann::json());
    }
  };
  {
    std::jthread other([&] { grade_all(graders[1]); });
    grade_all(graders[0]);
  }
  for (const auto& g : graders)
    for (std::size_t i = 0; i < g.runs.size(); ++i) {
      const RunOutcome& o = g.runs[i];
      INFO(g.name << i << ": " << o.out);
      REQUIRE(o.exit_code == 0);
      CHECK(g.reports[i]["score"].get<double>() == 6);
      CHECK(g.reports[i]["max_score"].get<double>() == 6);
      for (const char* word : {"SIGKILL", "killed", "out-of-memory", "reference-error"})
        CHECK_MESSAGE(o.out.find(word) == std::string::npos, word);
    }
}
