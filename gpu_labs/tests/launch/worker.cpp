// One rank of the launch matrix (tests/launch_matrix_test.sh): the labs' own launch path (the
// launcher's variables, the device a rank picks, the job link, the exit status agreed at the end)
// with the device work replaced by a host exchange, so that it runs where there is no GPU.
// Each rank contributes rank + 1, sums what the job gathered, and checks its own sum.
//   gpu_launch_worker [--visible N] [--fail-rank R]
// Prints "launch: ..." and one line "rank=R world=N device=D id=<rank 0's id> check=pass|fail";
// exits with the job's agreed status (the largest over ranks).
#include "common/job_link.hpp"
#include "common/launch.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>

using namespace mgpu::gpu;

int main(int argc, char** argv) {
  int visible = 1, fail_rank = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--visible") {
      visible = std::atoi(argv[i + 1]);
    } else if (opt == "--fail-rank") {
      fail_rank = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "gpu_launch_worker: unknown option %s (--visible N, --fail-rank R)\n",
                   opt.c_str());
      return 2;
    }
  }
  int code = 0;
  try {
    const Launch launch = launch_from_environment();
    std::printf("%s\n", launch.describe().c_str());
    std::fflush(stdout);
    const int device = local_device(launch, visible);
    // Stands in for ncclGetUniqueId: random, so two jobs (or a stale file) never share one.
    auto make_id = [] {
      std::random_device rd;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%08x%08x-%d", rd(), rd(), static_cast<int>(::getpid()));
      return std::string(buf);
    };
    std::string id = make_id();
    long long sum = launch.rank + 1;
    JobLink* link = join_job(launch);
    if (launch.multi_process() && link == nullptr) {
      // NCCL_COMM_ID: NCCL meets the ranks itself; there is nothing on the host to check.
      std::printf("rank=%d world=%d device=%d check=skipped (no host link)\n", launch.rank,
                  launch.world, device);
      return 0;
    }
    if (link != nullptr) {
      id = share_from_rank0(*link, launch.rank, make_id);
      sum = 0;
      for (const std::string& part : link->all_gather(std::to_string(launch.rank + 1), "the sum"))
        sum += std::stoll(part);
    }
    if (launch.rank == fail_rank) sum += 1;  // a bug in this rank alone
    const long long want = static_cast<long long>(launch.world) * (launch.world + 1) / 2;
    const bool pass = sum == want;
    std::printf("rank=%d world=%d device=%d id=%s sum=%lld want=%lld check=%s\n", launch.rank,
                launch.world, device, id.c_str(), sum, want, pass ? "pass" : "fail");
    code = pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    code = 1;
  }
  std::fflush(stdout);
  return agree_exit_status(code);
}
