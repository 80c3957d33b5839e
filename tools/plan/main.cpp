// mgpu-plan: the planner behind `./mgpu plan`. Everything lives in run_plan_cli so that the
// tests exercise the same code path; main only hands over argv.
#include <iostream>
#include <string>
#include <vector>

#include "plan/cli.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return mgpu::planner::run_plan_cli(args, std::cout, std::cerr);
}
