// The fuzz target's entry points (fuzz_result.cpp), shared by libFuzzer and the bounded driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grade.hpp"

namespace mgpu::grade::fuzz {

/// The case whose rubric entry (tolerances, budgets with floors) the fuzzed results are judged
/// by; reference/case.json is its reference result.
inline constexpr const char* kFuzzCase = "11_2.ring_all_reduce_fp32";

/// A result's bytes through classify_run, judge_case and judge_lab.
struct Judged {
  CaseRun run;
  CaseGrade as_case;
  CaseGrade as_lab;
};
Judged judge_bytes(std::string_view bytes, int exit_code = 0);

/// True when both reference results of the fixture were read as results.
bool fixture_ready();

}  // namespace mgpu::grade::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
