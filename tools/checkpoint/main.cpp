// mgpu-checkpoint: the checkpoint-memory lab behind `./mgpu checkpoint`. Everything lives in
// run_checkpoint_cli so that the tests exercise the same code path; main only hands over argv.
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint/cli.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return mgpu::checkpoint_figure::run_checkpoint_cli(args, std::cout, std::cerr);
}
