// mgpu-pipeline: the pipeline-bubble figure behind `./mgpu pipeline`. Everything lives in
// run_pipeline_cli so that the tests exercise the same code path; main only hands over argv.
#include <iostream>
#include <string>
#include <vector>

#include "pipeline/cli.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return mgpu::pipeline_figure::run_pipeline_cli(args, std::cout, std::cerr);
}
