// The fuzz target over what the grader does with the bytes of a result descriptor: classify the
// run (parse_result and the status), judge it as a case against a real reference result with
// the course rubric's tolerances, budgets and floors, and judge it as a GPU lab against a lab
// reference. Whatever the bytes, this must return: an exception or a crash here is a grader
// that a submission can stop. Built two ways: into the test suite's bounded driver
// (test_fuzz.cpp) with the normal compiler, and, where clang has libFuzzer, as a libFuzzer
// program (README.md in this folder).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_result.hpp"
#include "grade.hpp"
#include "pipeline/gpu_labs.hpp"
#include "pipeline/result_parse.hpp"
#include "rubric/rubric.hpp"
#include "util.hpp"

namespace mgpu::grade::fuzz {
namespace {

struct Fixture {
  Rubric rubric;
  CaseSpec spec;
  CaseRun reference;
  GpuLabCase lab;
  CaseRun lab_reference;
};

CaseRun reference_run(const std::string& file) {
  RunOutcome o;
  o.started = o.exited = true;
  o.exit_code = 0;
  o.result = read_text(file);
  return classify_run(o, 10, 1024);
}

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    x.rubric = parse_rubric(read_text(std::string(MGPU_SOURCE_DIR) + "/autograder/rubric.json"),
                            "rubric.json");
    for (const auto& c : x.rubric.chapter("11_2_data_parallel")->cases)
      if (c.name == kFuzzCase) x.spec = c;
    x.reference = reference_run(std::string(MGPU_FUZZ_DIR) + "/reference/case.json");
    x.lab.name = "gpu.fuzz";
    x.lab.lab = "fuzz";
    x.lab_reference = reference_run(std::string(MGPU_FUZZ_DIR) + "/reference/lab.json");
    return x;
  }();
  return f;
}

}  // namespace

Judged judge_bytes(std::string_view bytes, int exit_code) {
  const Fixture& f = fixture();
  RunOutcome o;
  o.started = o.exited = true;
  o.exit_code = exit_code;
  o.result.assign(bytes);
  Judged j;
  j.run = classify_run(o, f.spec.time_limit_s, f.spec.memory_mb);
  j.as_case = judge_case(f.spec, j.run, f.reference, f.rubric);
  j.as_lab = judge_lab(f.lab, j.run, f.lab_reference);
  // What the reports do with a grade: the texts become valid UTF-8.
  (void)valid_utf8(j.as_case.feedback);
  (void)valid_utf8(j.as_lab.feedback);
  return j;
}

bool fixture_ready() {
  const Fixture& f = fixture();
  return f.reference.status == Status::passed && f.lab_reference.status == Status::passed;
}

}  // namespace mgpu::grade::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mgpu::grade::fuzz::judge_bytes(std::string_view(reinterpret_cast<const char*>(data), size), 0);
  return 0;
}
