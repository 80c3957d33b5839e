// The GPU slots that bound how many labs share one device (sandbox/gpu_slots.hpp), checked
// without a GPU: processes that each hold a slot for a while never number more than K at once,
// another device has slots of its own, and a holder killed outright frees its slot.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "rubric/rubric.hpp"
#include "sandbox/gpu_slots.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;

namespace {

// Counters the slot holders share across fork: how many hold a slot now, and the most ever.
struct SlotGauge {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
};

SlotGauge* shared_gauge() {
  void* m =
      ::mmap(nullptr, sizeof(SlotGauge), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  return new (m) SlotGauge;
}

int open_slot_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  return fd;
}

// A process that takes a slot of `device`, counts itself in while it holds it for hold_ms, and
// exits; exit status 1 when taking the slot threw.
pid_t slot_holder(int dir, const char* device, int slots, SlotGauge* g, int hold_ms) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid != 0) return pid;
  try {
    const GpuSlot slot(dir, device, slots);
    const int n = ++g->now;
    int p = g->peak.load();
    while (n > p && !g->peak.compare_exchange_weak(p, n)) {
    }
    ::usleep(static_cast<useconds_t>(hold_ms) * 1000);
    --g->now;
  } catch (...) {
    ::_exit(1);
  }
  ::_exit(0);
}

int exit_status(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("GPU slots: six processes on two slots never run more than two labs at once") {
  const fs::path dir = fresh_dir("gpu_slots_two");
  const int fd = open_slot_dir(dir);
  SlotGauge* g = shared_gauge();
  std::vector<pid_t> holders;
  for (int i = 0; i < 6; ++i) holders.push_back(slot_holder(fd, "0", 2, g, 150));
  for (pid_t p : holders) CHECK(exit_status(p) == 0);
  CHECK(g->peak.load() == 2);  // the bound holds, and it is not one-at-a-time either
  CHECK(g->now.load() == 0);
  CHECK(fs::exists(dir / "gpu-0-0.lock"));
  CHECK(fs::exists(dir / "gpu-0-1.lock"));
  CHECK_FALSE(fs::exists(dir / "gpu-0-2.lock"));
  ::close(fd);
}

TEST_CASE("GPU slots: another device has its own, and a killed holder frees its slot at once") {
  const fs::path dir = fresh_dir("gpu_slots_kill");
  const int fd = open_slot_dir(dir);
  SlotGauge* g = shared_gauge();
  const pid_t hog = slot_holder(fd, "0", 1, g, 60'000);  // holds device 0's only slot
  while (g->now.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));

  auto t0 = std::chrono::steady_clock::now();
  { const GpuSlot other(fd, "GPU-5f1e/../1", 1); }  // another device: no wait (and no escape)
  CHECK(seconds_since(t0) < 1.0);
  CHECK(fs::exists(dir / "gpu-GPU-5f1e..1-0.lock"));

  std::thread killer([hog] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(hog, SIGKILL);
  });
  t0 = std::chrono::steady_clock::now();
  const GpuSlot mine(fd, "0", 1);  // waits for the hog, who never releases it: the kernel does
  const double waited = seconds_since(t0);
  killer.join();
  CHECK(exit_status(hog) == 128 + SIGKILL);
  CHECK(waited >= 0.25);
  CHECK(waited < 10);
  CHECK(mine.index() == 0);
  ::close(fd);
}

TEST_CASE("GPU slots: the device key follows Slurm's allocation, then CUDA_VISIBLE_DEVICES") {
  const char* vars[] = {"MGPU_GPU_SLOT_KEY", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
                        "CUDA_VISIBLE_DEVICES"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* v : vars)
    if (const char* x = std::getenv(v)) saved.emplace_back(v, x);
  for (const char* v : vars) ::unsetenv(v);
  CHECK(gpu_slot_device() == "0");
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-abc, GPU-def", 1);
  CHECK(gpu_slot_device() == "GPU-abc");
  // Two Slurm jobs, each given one GPU of the node, both see CUDA_VISIBLE_DEVICES=0.
  ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  ::setenv("SLURM_JOB_GPUS", "3,4", 1);
  CHECK(gpu_slot_device() == "3");
  ::setenv("MGPU_GPU_SLOT_KEY", "node7-gpu3", 1);
  CHECK(gpu_slot_device() == "node7-gpu3");
  for (const char* v : vars) ::unsetenv(v);
  for (const auto& [k, v] : saved) ::setenv(k.c_str(), v.c_str(), 1);
}

TEST_CASE("the rubric's gpu_labs.labs_per_gpu is read, 1 by default, and a bad one named") {
  const std::string head =
      R"({"chapters": {"c": {"files": ["f.cpp"], "cases": {"c.x": {"points": 1}}}},
          "gpu_labs": {"files": {"zero3": ["zero3.cpp"]}, "cases": {"gpu.zero3": {"lab": "zero3"}})";
  CHECK(parse_rubric(head + "}}", "r.json").gpu_labs->labs_per_gpu == 1);
  CHECK(parse_rubric(head + R"(, "labs_per_gpu": 3}})", "r.json").gpu_labs->labs_per_gpu == 3);
  try {
    parse_rubric(head + R"(, "labs_per_gpu": 0}})", "r.json");
    FAIL("labs_per_gpu 0 was accepted");
  } catch (const RubricError& e) {
    CHECK_MESSAGE(std::string(e.what()).find("gpu_labs.labs_per_gpu: expected a whole number "
                                             "from 1 to 64, got 0") != std::string::npos,
                  e.what());
  }
}
