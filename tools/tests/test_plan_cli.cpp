// The command line: bad flags exit 2 with a message that names the flag and the fix, good ones
// exit 0, and so does a plan with rows that wait for an unwritten chapter function.
#include <doctest/doctest.h>

#include <mgpu/not_implemented.hpp>
#include <sstream>

#include "11_7_3d_and_experts/formulas.hpp"
#include "cli_support.hpp"
#include "plan/cli.hpp"

using namespace mgpu::planner;

namespace {

using tools_test::Run;
using tools_test::run_cli;

Run run(const std::vector<std::string>& args) { return run_cli(run_plan_cli, args); }
void check_refused(const std::vector<std::string>& args, const std::string& fix) {
  tools_test::check_refused(run_plan_cli, kExitUsage, args, fix);
}

const std::vector<std::string> kBase{"--params", "70e9", "--gpus", "8"};

std::vector<std::string> base_with(std::vector<std::string> extra) {
  std::vector<std::string> a = kBase;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace

TEST_CASE("bad counts and sizes exit 2 and say what to use") {
  check_refused({"--params", "-7e9", "--gpus", "8"}, "--params 70e9");
  check_refused({"--params", "70e9", "--gpus", "0"}, "--gpus 64");
  check_refused({"--params", "70e9", "--gpus", "-8"}, "--gpus 64");
  check_refused({"--params", "70e9", "--gpus", "8.5"}, "whole number");
  check_refused(base_with({"--gpu-memory", "0"}), "--gpu-memory 80e9");
  check_refused(base_with({"--micro-batches", "0"}), "--micro-batches 8");
  check_refused(base_with({"--tp", "0"}), "--tp 8");
}

TEST_CASE("a ZeRO stage outside 0..3 exits 2 naming the stages") {
  check_refused(base_with({"--zero", "4"}), "use --zero 0, 1, 2 or 3");
  check_refused(base_with({"--zero", "-1"}), "use --zero 0, 1, 2 or 3");
}

TEST_CASE("degrees that do not divide exit 2 with a count that would") {
  check_refused({"--params", "70e9", "--gpus", "12", "--tp", "8"}, "use --gpus 8 or 16");
  check_refused({"--params", "70e9", "--gpus", "6", "--tp", "3", "--pp", "2"},
                "use --tp 1, 2, 4 or 8");
  check_refused({"--params", "70e9", "--gpus", "16", "--tp", "16"}, "stays inside one node");
  check_refused(base_with({"--pp", "4", "--layers", "30", "--hidden", "4096", "--heads", "32",
                           "--seq", "2048"}),
                "each stage holds layers/pp whole layers");
  check_refused(base_with({"--tp", "8", "--layers", "32", "--hidden", "4096", "--heads", "12",
                           "--seq", "2048"}),
                "attention splits by whole heads");
}

TEST_CASE("model-shape and time flags that need company exit 2") {
  check_refused(base_with({"--layers", "32", "--hidden", "4096"}), "--heads is missing");
  check_refused(base_with({"--recompute", "full"}), "needs the model shape");
  check_refused(base_with({"--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "2048",
                           "--recompute", "some"}),
                "use --recompute none, selective or full");
  check_refused(base_with({"--gpu-flops", "4e14"}), "--gpu-flops needs --tokens");
  check_refused(base_with({"--tokens", "1e12", "--gpu-flops", "4e14", "--mfu", "1.5"}), "(0, 1]");
  check_refused(base_with({"--precision", "fp8-magic"}), "bf16-mixed-adam");
}

TEST_CASE("unknown or missing flags exit 2 and point at --help") {
  check_refused(base_with({"--zero-stage", "3"}), "--help");
  check_refused({"--gpus", "8"}, "--params");
}

TEST_CASE("good flags exit 0, --help exits 0 and lists every flag") {
  const Run r = run({"--params",
                     "70e9",
                     "--zero",
                     "3",
                     "--tp",
                     "2",
                     "--pp",
                     "2",
                     "--gpus",
                     "16",
                     "--micro-batches",
                     "8",
                     "--layers",
                     "80",
                     "--hidden",
                     "8192",
                     "--heads",
                     "64",
                     "--seq",
                     "4096",
                     "--recompute",
                     "selective",
                     "--sequence-parallel",
                     "--tokens",
                     "1.4e12",
                     "--gpu-flops",
                     "989e12",
                     "--mfu",
                     "0.4",
                     "--explain"});
  CAPTURE(r.err);
  CHECK(r.status == kExitOk);
  CHECK(r.out.find("Where every number comes from") != std::string::npos);
  const Run help = run({"--help"});
  CHECK(help.status == 0);
  for (const char* flag : {"--params",
                           "--gpus",
                           "--gpu-memory",
                           "--zero",
                           "--tp",
                           "--pp",
                           "--micro-batches",
                           "--layers",
                           "--hidden",
                           "--heads",
                           "--seq",
                           "--micro-batch",
                           "--recompute",
                           "--sequence-parallel",
                           "--tokens",
                           "--gpu-flops",
                           "--mfu",
                           "--gpus-per-node",
                           "--explain",
                           "--json",
                           "--svg"})
    CHECK_MESSAGE(help.out.find(flag) != std::string::npos, flag);
}

TEST_CASE("an output file that cannot be written exits 1 naming it") {
  const Run r = run(base_with({"--svg", "/nonexistent-folder/plan.svg"}));
  CHECK(r.status == kExitIoError);
  CHECK(r.err.find("/nonexistent-folder/plan.svg") != std::string::npos);
}

TEST_CASE("NotImplemented messages map to the chapter folder to work in") {
  CHECK(chapter_folder_for("not implemented: 11.3 zero_state_per_gpu") == "chapters/11_3_zero");
  CHECK(chapter_folder_for("not implemented: 11.7 per_gpu_memory") ==
        "chapters/11_7_3d_and_experts");
  CHECK(chapter_folder_for("something else") == "chapters/");
}

TEST_CASE("a chapter function that is not written yet leaves its rows waiting, and exits 0") {
  // On the solution build every chapter is implemented and nothing waits; on the student build
  // the skeletons throw, and the rows that need them name the function to write.
  bool implemented = true;
  try {
    (void)mgpu::layout::layout_gpus({1, 1, 1});
    (void)mgpu::layout::per_gpu_memory({});
  } catch (const mgpu::NotImplemented&) {
    implemented = false;
  }
  const Run r = run(base_with({"--layers", "80", "--hidden", "8192", "--heads", "64", "--seq",
                               "4096", "--tp", "2", "--pp", "2"}));
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.status == kExitOk);
  CHECK(r.err.empty());
  if (implemented) {
    CHECK(r.out.find("finish ") == std::string::npos);
  } else {
    CHECK(r.out.find("finish 11.") != std::string::npos);
    CHECK(r.out.find("chapters/11_") != std::string::npos);
  }
}
