// Host tests of launch.hpp: which launcher's variables win, what a rank is told when they cannot
// work, and which GPU a rank picks. The processes themselves meet in tests/launch_matrix_test.sh.
#include "common/launch.hpp"

#include <doctest/doctest.h>

#include <map>
#include <stdexcept>
#include <string>

using namespace mgpu::gpu;

namespace {

Launch resolve(const std::map<std::string, std::string>& vars) {
  return resolve_launch([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    resolve(vars);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("torchrun's variables win over Slurm's, and Slurm's over Open MPI's") {
  const std::map<std::string, std::string> slurm{{"SLURM_PROCID", "1"},
                                                 {"SLURM_NTASKS", "2"},
                                                 {"SLURM_LOCALID", "1"},
                                                 {"SLURM_JOB_ID", "7"},
                                                 {"HOME", "/home/u"}};
  auto torch = slurm;
  torch.insert({{"RANK", "3"},
                {"WORLD_SIZE", "4"},
                {"LOCAL_RANK", "1"},
                {"LOCAL_WORLD_SIZE", "2"},
                {"MASTER_ADDR", "node1"},
                {"MASTER_PORT", "29500"}});
  const Launch t = resolve(torch);
  CHECK(t.source == "torchrun");
  CHECK(t.world == 4);
  CHECK(t.rank == 3);
  CHECK(t.local_rank == 1);
  CHECK(t.bootstrap == Bootstrap::tcp);
  CHECK(t.port == 29501);  // torchrun's own store holds MASTER_PORT
  MESSAGE(t.describe());
  CHECK(t.describe().find(
            "launch: torchrun, rank 3 of 4, local rank 1 of 2, rendezvous tcp node1:29501") == 0);

  auto s = slurm;
  s.insert(
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_NAMESPACE", "x@1"}});
  s.erase("OMPI_COMM_WORLD_SIZE");
  const Launch sl = resolve(s);
  CHECK(sl.source == "Slurm");
  CHECK(sl.rank == 1);
  CHECK(sl.bootstrap == Bootstrap::file);
  CHECK(sl.job_key == "slurm-7.0");
  CHECK(sl.dir == "/home/u/.cache/mgpu/rendezvous");
}

TEST_CASE("mpirun inside a batch script: Open MPI's rank, not the script's SLURM_PROCID") {
  const Launch l = resolve({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "8"},
                            {"SLURM_JOB_ID", "7"},
                            {"OMPI_COMM_WORLD_RANK", "5"},
                            {"OMPI_COMM_WORLD_SIZE", "8"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"PMIX_NAMESPACE", "prterun-a-1@1"},
                            {"MGPU_RENDEZVOUS_DIR", "/shared"}});
  CHECK(l.source == "Open MPI");
  CHECK(l.rank == 5);
  CHECK(l.local_rank == 1);
  CHECK(l.job_key == "ompi-prterun-a-1@1");
}

TEST_CASE("no launcher is one process, and the project's own variables override every launcher") {
  const Launch none = resolve({{"HOME", "/h"}});
  CHECK_FALSE(none.multi_process());
  CHECK(none.bootstrap == Bootstrap::none);
  const Launch own = resolve({{"MGPU_WORLD_SIZE", "2"},
                              {"MGPU_RANK", "1"},
                              {"RANK", "0"},
                              {"WORLD_SIZE", "8"},
                              {"MGPU_JOB_ID", "run-9"},
                              {"MGPU_RENDEZVOUS_DIR", "/shared"}});
  CHECK(own.source == "MGPU_*");
  CHECK(own.world == 2);
  CHECK(own.local_rank == 1);
  CHECK(own.dir == "/shared");
  CHECK(own.job_key == "run-9");
}

TEST_CASE("launch variables that cannot work are refused with the variable and the fix") {
  CHECK(error_of({{"WORLD_SIZE", "4"}, {"RANK", "4"}}).find("needs RANK in [0, 4), got 4") !=
        std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "4"}}).find("got none") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "four"}}).find("WORLD_SIZE='four' is not an integer") !=
        std::string::npos);
  CHECK(error_of({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "0"}}).find("names no job to meet in") !=
        std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "a"}})
            .find("MASTER_PORT is not") != std::string::npos);
  CHECK(error_of({{"MGPU_INIT_TIMEOUT", "0"}}).find("use seconds >= 1") != std::string::npos);
  const Launch nccl =
      resolve({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"NCCL_COMM_ID", "10.0.0.1:2345"}});
  CHECK(nccl.bootstrap == Bootstrap::nccl_env);
}

TEST_CASE("a rank's GPU is its local rank, or device 0 when the launcher shows it one GPU") {
  Launch l = resolve({{"WORLD_SIZE", "16"},
                      {"RANK", "13"},
                      {"LOCAL_RANK", "5"},
                      {"MASTER_ADDR", "a"},
                      {"MASTER_PORT", "1"}});
  CHECK(local_device(l, 8) == 5);
  CHECK(local_device(l, 1) == 0);  // srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES names one GPU
  CHECK_THROWS_WITH_AS(local_device(l, 4), doctest::Contains("shows only 4 GPUs"),
                       std::invalid_argument);
  CHECK_THROWS_AS(local_device(l, 0), std::invalid_argument);
}
