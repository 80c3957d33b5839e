// The launcher's variables, read in one place; see launch.hpp.
#include "common/launch.hpp"

#include <cstdlib>
#include <optional>
#include <stdexcept>

namespace mgpu::gpu {

namespace {

std::optional<std::string> text(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<int> number(const EnvLookup& env, const char* name) {
  const std::optional<std::string> v = text(env, name);
  if (!v) return std::nullopt;
  std::size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v->size())
    throw std::invalid_argument(std::string(name) + "='" + *v +
                                "' is not an integer: fix or unset it");
  return n;
}

// One launcher's names for the same four facts.
struct Names {
  const char* source;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

constexpr Names kMgpu{"MGPU_*", "MGPU_RANK", "MGPU_WORLD_SIZE", "MGPU_LOCAL_RANK", nullptr};
constexpr Names kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr Names kSlurm{"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr};
constexpr Names kOpenMpi{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};

// The first launcher whose world size is set. Slurm's variables under mpirun are the batch
// script's (rank 0 for everyone), so Open MPI's win over them when both are there.
const Names* pick_launcher(const EnvLookup& env) {
  const bool under_mpirun = text(env, kOpenMpi.world).has_value();
  for (const Names* n : {&kMgpu, &kTorchrun, &kSlurm, &kOpenMpi}) {
    if (n == &kSlurm && under_mpirun) continue;
    if (text(env, n->world)) return n;
  }
  return nullptr;
}

// Unique to one run of the job, so that two jobs (or a requeued one) never share a file.
std::string job_key(const EnvLookup& env, const Names& launcher) {
  if (auto k = text(env, "MGPU_JOB_ID")) return *k;
  if (&launcher == &kSlurm) {
    if (auto job = text(env, "SLURM_JOB_ID"))
      return "slurm-" + *job + "." + text(env, "SLURM_STEP_ID").value_or("0");
  }
  if (&launcher == &kOpenMpi) {
    if (auto ns = text(env, "PMIX_NAMESPACE")) return "ompi-" + *ns;
    if (auto id = text(env, "OMPI_MCA_ess_base_jobid")) return "ompi-" + *id;
  }
  if (auto run = text(env, "TORCHELASTIC_RUN_ID"); run && *run != "none") return "torchrun-" + *run;
  return "";
}

}  // namespace

Launch resolve_launch(const EnvLookup& env) {
  Launch l;
  if (auto t = number(env, "MGPU_INIT_TIMEOUT")) {
    if (*t < 1)
      throw std::invalid_argument("MGPU_INIT_TIMEOUT=" + std::to_string(*t) + ": use seconds >= 1");
    l.timeout_s = *t;
  }
  const Names* n = pick_launcher(env);
  if (n == nullptr) return l;
  l.source = n->source;
  l.world = *number(env, n->world);
  const std::optional<int> rank = number(env, n->rank);
  if (l.world < 1 || !rank || *rank < 0 || *rank >= l.world) {
    throw std::invalid_argument(std::string(n->source) + ": " + n->world + "=" +
                                std::to_string(l.world) + " needs " + n->rank + " in [0, " +
                                std::to_string(l.world) + "), got " +
                                (rank ? std::to_string(*rank) : std::string("none")) +
                                ": start the program through the launcher, or fix the variables");
  }
  l.rank = *rank;
  if (n->local_world != nullptr) l.local_world = number(env, n->local_world).value_or(0);
  l.local_rank =
      number(env, n->local_rank).value_or(l.local_world > 0 ? l.rank % l.local_world : l.rank);
  if (l.local_rank < 0)
    throw std::invalid_argument(std::string(n->local_rank) + "=" + std::to_string(l.local_rank) +
                                " is negative");
  l.job_key = job_key(env, *n);
  if (!l.multi_process()) return l;

  // How the ranks meet. MASTER_ADDR first: torchrun always sets it, and the rendezvous over it
  // can name a rank that never came and agree on the exit status at the end.
  if (auto addr = text(env, "MASTER_ADDR")) {
    l.bootstrap = Bootstrap::tcp;
    l.address = *addr;
    if (auto p = number(env, "MGPU_RENDEZVOUS_PORT")) {
      l.port = *p;
    } else if (auto mp = number(env, "MASTER_PORT")) {
      l.port = *mp + 1;  // MASTER_PORT itself is torchrun's own store
    } else {
      throw std::invalid_argument(
          "MASTER_ADDR is set but MASTER_PORT is not: export a free port in MASTER_PORT "
          "(the labs listen on MASTER_PORT + 1 on rank 0)");
    }
    if (l.port < 1 || l.port > 65535)
      throw std::invalid_argument("rendezvous port " + std::to_string(l.port) +
                                  " outside 1..65535: fix MASTER_PORT");
    if (l.job_key.empty()) l.job_key = *addr + ":" + std::to_string(l.port);
  } else if (auto id = text(env, "NCCL_COMM_ID")) {
    l.bootstrap = Bootstrap::nccl_env;
    l.address = *id;
  } else {
    l.bootstrap = Bootstrap::file;
    if (l.job_key.empty()) {
      throw std::invalid_argument(
          std::string(n->source) + " started " + std::to_string(l.world) +
          " ranks but names no job to meet in: export MASTER_ADDR and MASTER_PORT (rank 0's host "
          "and a free port), or NCCL_COMM_ID, or MGPU_JOB_ID (unique per run) with "
          "MGPU_RENDEZVOUS_DIR on a file system every node sees");
    }
    if (auto d = text(env, "MGPU_RENDEZVOUS_DIR")) {
      l.dir = *d;
    } else if (auto home = text(env, "HOME")) {
      l.dir = *home + "/.cache/mgpu/rendezvous";
    } else {
      throw std::invalid_argument(
          "neither MGPU_RENDEZVOUS_DIR nor HOME is set: point MGPU_RENDEZVOUS_DIR at a "
          "folder every node sees");
    }
  }
  return l;
}

Launch launch_from_environment() {
  return resolve_launch([](const char* name) { return std::getenv(name); });
}

std::string Launch::describe() const {
  if (!multi_process()) return "launch: " + source + " (1 rank)";
  std::string out = "launch: " + source + ", rank " + std::to_string(rank) + " of " +
                    std::to_string(world) + ", local rank " + std::to_string(local_rank);
  if (local_world > 0) out += " of " + std::to_string(local_world);
  switch (bootstrap) {
    case Bootstrap::tcp:
      out += ", rendezvous tcp " + address + ":" + std::to_string(port);
      break;
    case Bootstrap::nccl_env:
      out += ", NCCL's bootstrap at NCCL_COMM_ID=" + address;
      break;
    case Bootstrap::file:
      out += ", rendezvous file in " + dir;
      break;
    case Bootstrap::none:
      break;
  }
  if (!job_key.empty()) out += ", job " + job_key;
  return out + ", timeout " + std::to_string(timeout_s) + " s";
}

int local_device(const Launch& launch, int visible_devices) {
  if (visible_devices < 1)
    throw std::invalid_argument("no CUDA device visible to rank " + std::to_string(launch.rank));
  if (visible_devices == 1) return 0;
  if (launch.local_rank < visible_devices) return launch.local_rank;
  throw std::invalid_argument(
      "rank " + std::to_string(launch.rank) + " has local rank " +
      std::to_string(launch.local_rank) + " but this node shows only " +
      std::to_string(visible_devices) + " GPUs: start at most " + std::to_string(visible_devices) +
      " ranks per node, or give each rank its own GPU (srun --gpus-per-task=1)");
}

}  // namespace mgpu::gpu
