// The isolation of a case run: time limit on the whole tree, capped output, stdin from /dev/null,
// scrubbed environment, private working folder, no root (the attacks are in test_sandbox.cpp).
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "sandbox/runner.hpp"
#include "sandbox/sandbox.hpp"

using namespace mgpu::grade;

namespace {

RunOutcome sh(const std::string& script, double wall_s = 5) {
  RunSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", script};
  spec.wall_s = wall_s;
  spec.result_fd = 3;
  spec.output_cap = 1000;
  return run_process(spec);
}

}  // namespace

TEST_CASE("the result arrives on its own descriptor, apart from stdout") {
  RunOutcome o = sh("echo noise; printf '{\"status\":\"ok\"}' >&3; echo more >&2");
  CHECK(o.started);
  CHECK(o.exited);
  CHECK(o.exit_code == 0);
  CHECK(o.result == "{\"status\":\"ok\"}");
  CHECK(o.out == "noise\n");
  CHECK(o.err == "more\n");
}

TEST_CASE("a hang is killed at the wall-clock limit, descendants included") {
  RunOutcome o = sh("sleep 100 & sleep 100; echo never", 0.5);
  MESSAGE("stopped after " << o.wall_s << " s");
  CHECK(o.timed_out);
  CHECK(o.wall_s < 3);
  CHECK(o.out.empty());
}

TEST_CASE("a signal is reported by name") {
  RunOutcome o = sh("kill -SEGV $$");
  CHECK(o.signal == SIGSEGV);
  CHECK(signal_description(o.signal).find("SIGSEGV") == 0);
}

TEST_CASE("output beyond the cap is dropped, and the flood does not block the run") {
  RunOutcome o = sh("yes flood | head -c 5000000; echo done >&3");
  CHECK(o.out.size() == 1000);
  CHECK(o.out_truncated);
  CHECK(o.result == "done\n");
}

TEST_CASE(
    "stdin is empty, the environment scrubbed, the folder private, and root gives up its uid") {
  ::setenv("MGPU_SECRET_TOKEN", "hunter2", 1);
  RunOutcome o = sh("cat; env; pwd; ls -A | wc -l; id -u");
  ::unsetenv("MGPU_SECRET_TOKEN");
  CHECK(o.exit_code == 0);
  CHECK(o.out.find("hunter2") == std::string::npos);
  CHECK(o.out.find("PATH=/usr/bin:/bin") != std::string::npos);
  // The folder is /case inside namespaces, a fresh mgpu-case-* folder outside them.
  CHECK((o.out.find("\n/case\n") != std::string::npos ||
         o.out.find("mgpu-case-") != std::string::npos));
  // The working folder holds only the program's link (the uid sandbox), or nothing (namespaces:
  // the program is copied in at /program).
  CHECK(o.out.find(sandbox().kind == SandboxKind::namespaces ? "\n0\n" : "\n1\n") !=
        std::string::npos);
  const std::string uid = o.out.substr(o.out.rfind('\n', o.out.size() - 2) + 1);  // the last line
  if (::geteuid() == 0) CHECK(uid != "0\n");
}

TEST_CASE("a program that cannot be started says why") {
  RunSpec spec;
  spec.exe = "/nonexistent/cases_x";
  RunOutcome o = run_process(spec);
  CHECK_FALSE(o.started);
  CHECK(o.start_error.find("No such file") != std::string::npos);
}

TEST_CASE("nothing in a case's view names a folder of the host") {
  RunSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", "cat /proc/self/mountinfo; pwd; echo $HOME $TMPDIR"};
  spec.output_cap = 1 << 20;  // all of it
  RunOutcome o = run_process(spec);
  CHECK_FALSE(o.out_truncated);
  CHECK(o.exit_code == 0);
  if (sandbox().kind == SandboxKind::namespaces) {
    CHECK(o.out.find("mgpu-case-") == std::string::npos);
    CHECK(o.out.find(std::filesystem::current_path().string()) == std::string::npos);
    CHECK(o.out.find("/case /case") != std::string::npos);  // HOME and TMPDIR
  }
}

TEST_CASE("a case runs under the system-call filter, unable to gain privileges") {
  RunOutcome o = sh("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status");
  CHECK(o.exit_code == 0);
  CHECK(o.out.find("Seccomp:\t2") != std::string::npos);  // 2: a filter
  CHECK(o.out.find("NoNewPrivs:\t1") != std::string::npos);
}

TEST_CASE("a build's processes are held to its memory and file-size limits") {
  RunSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", "ulimit -v; ulimit -f"};
  spec.isolate = false;
  spec.unisolated_memory_bytes = 3ull << 30;
  spec.unisolated_file_bytes = 512ull << 20;
  RunOutcome o = run_process(spec);
  CHECK(o.exit_code == 0);
  // KiB and 512-byte blocks, as the shell counts them
  CHECK(o.out ==
        std::to_string((3ull << 30) / 1024) + "\n" + std::to_string((512ull << 20) / 512) + "\n");
}

namespace {

// A case under a disk limit of 16 MiB in 200 entries.
RunOutcome writer(const std::string& script) {
  RunSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", script};
  spec.wall_s = 20;
  spec.disk_bytes = 16ull << 20;
  spec.disk_files = 200;
  return run_process(spec);
}

}  // namespace

TEST_CASE("a case's folders together hold what its limit allows, whatever it writes and where") {
  // Many files, none over the size one file may have: stopped at the total, at once.
  RunOutcome o =
      writer("for i in $(seq 40); do head -c 1048576 /dev/zero > f$i 2>/dev/null; done; sleep 10");
  MESSAGE("filled in " << o.wall_s << " s: " << o.disk_use);
  CHECK(o.disk_exceeded);
  CHECK(o.wall_s < 5);
  CHECK(o.disk_use.find("filled its disk") != std::string::npos);
  CHECK(o.disk_use.find("16 MiB in 200 entries") != std::string::npos);
  // The same, ending at once: what it left is seen when it ends.
  CHECK(writer("for i in $(seq 40); do head -c 1048576 /dev/zero > f$i 2>/dev/null; done")
            .disk_exceeded);
  // Many empty files and folders.
  o = writer("mkdir d && cd d && seq 300 | xargs touch 2>/dev/null; sleep 10");
  CHECK(o.disk_exceeded);
  CHECK(o.wall_s < 5);
  // Files deleted while open still hold the disk.
  o = writer(
      "exec 4>a 5>b 6>c; rm a b c; for fd in 4 5 6; do head -c 8000000 /dev/zero >&$fd; done; "
      "sleep 10");
  CHECK(o.disk_exceeded);
  CHECK(o.wall_s < 5);
  // Nothing else is writable: not the root, not /dev, not the system's folders.
  o = writer(
      "for f in /mgpu-disk-test /dev/mgpu-disk-test /usr/mgpu-disk-test; do (: > $f) 2>/dev/null "
      "&& echo wrote $f; done; echo x > $TMPDIR/t && echo x > t && echo small");
  INFO(o.err << " exit " << o.exit_code);
  CHECK(o.out == "small\n");
  CHECK_FALSE(o.disk_exceeded);
}
