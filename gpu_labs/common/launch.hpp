// How this process was launched: which launcher's variables say its rank, the world size and
// its GPU on the node, and how its ranks find each other. Host code only (no CUDA), so every
// launcher's case is tested on a machine without a GPU (tests/launch_matrix_test.sh).
#pragma once

#include <functional>
#include <string>

namespace mgpu::gpu {

/// Looks a variable up: nullptr or "" when it is unset. The labs pass std::getenv; tests pass a
/// map.
using EnvLookup = std::function<const char*(const char*)>;

/// How the ranks of a multi-process job meet to share NCCL's unique id (and, at the end, their
/// exit statuses).
enum class Bootstrap {
  none,      ///< one process: it makes the id itself
  tcp,       ///< rank 0 listens on MASTER_ADDR, port MGPU_RENDEZVOUS_PORT or MASTER_PORT + 1
  nccl_env,  ///< NCCL_COMM_ID=host:port: NCCL's own bootstrap, no id to share
  file,      ///< a job-unique file in MGPU_RENDEZVOUS_DIR, removed by rank 0 at exit
};

/// What the launcher told this process.
struct Launch {
  std::string source = "single process";  ///< "torchrun", "Slurm", "Open MPI", "MGPU_*" or this
  int world = 1;                          ///< ranks in the job
  int rank = 0;                           ///< this process's rank
  int local_rank = 0;                     ///< its index among the ranks of its node (picks the GPU)
  int local_world = 0;                    ///< ranks on this node, 0 when the launcher does not say
  std::string job_key;  ///< unique to one run of the job ("" when the launcher names none)
  Bootstrap bootstrap = Bootstrap::none;  ///< how the ranks share NCCL's unique id
  std::string address;                    ///< tcp: rank 0's host; nccl_env: NCCL_COMM_ID
  int port = 0;                           ///< tcp: the port rank 0 listens on
  std::string dir;                        ///< file: the folder every node sees
  int timeout_s = 300;  ///< MGPU_INIT_TIMEOUT: how long ranks wait for each other, seconds

  /// Whether this process is one rank of several processes.
  bool multi_process() const { return world > 1; }
  /// One line for the start of a run: launcher, rank, world, local rank, bootstrap.
  std::string describe() const;
};

/// Reads the launcher's variables. Precedence: MGPU_WORLD_SIZE/MGPU_RANK/MGPU_LOCAL_RANK (the
/// project's own, to override), then torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR),
/// Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID), Open MPI's
/// (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, PMIX_NAMESPACE). Slurm's are skipped when Open MPI's
/// are present: mpirun inside a batch script passes on the script's SLURM_PROCID (0) to every
/// process. Throws std::invalid_argument naming the variable and the fix for values that cannot
/// work (a rank outside the world, no way to meet, a non-number).
Launch resolve_launch(const EnvLookup& env);
/// resolve_launch(std::getenv).
Launch launch_from_environment();

/// The CUDA device a rank uses, from its local rank and the devices this process sees: a
/// launcher that gives each task its own GPU (srun --gpus-per-task, CUDA_VISIBLE_DEVICES per
/// rank) leaves one visible device, which is then device 0 whatever the local rank. Throws when
/// several devices are visible but fewer than the local rank needs (two ranks would share one).
int local_device(const Launch& launch, int visible_devices);

}  // namespace mgpu::gpu
