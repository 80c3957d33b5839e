// The device communicator every lab is written against, one object per rank, with the same shape
// as the CPU runtime: code is written for one rank and runs on one host thread per rank.
// Two backends: NCCL (real GPUs) and single-device emulation (t ranks on one GPU).
#pragma once

#include "common/check.hpp"
#include "common/dtype.hpp"
#include "common/launch.hpp"

#include <mgpu/memory.hpp>

#include <cstddef>
#include <functional>
#include <string>

namespace mgpu::gpu {

/// How ranks talk.
enum class Backend {
  automatic,  ///< nccl when there is a GPU per rank (or the multi-process env is set), else
              ///< emulated
  nccl,      ///< NCCL: one GPU per rank, one thread per GPU in this process, or one process per GPU
  emulated,  ///< all ranks on device 0, each with its own stream; collectives by device copies
};

/// "nccl", "emulated" or "automatic".
const char* backend_name(Backend b);
/// Parses "auto"/"automatic", "nccl", "emulated"/"emulate"; throws naming the bad value otherwise.
Backend parse_backend(const std::string& text);

/// One rank's view of a communicator. Every collective is enqueued on `stream` (nullptr: the
/// rank's own stream()) and returns at once, like NCCL; synchronize() waits. All ranks must call
/// the same collectives in the same order with the same counts and types.
class DeviceComm {
 public:
  virtual ~DeviceComm() = default;
  /// This rank's index, 0..size()-1.
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;
  /// CUDA device this rank runs on (already made current on this rank's thread).
  virtual int device() const = 0;
  /// The rank's main stream; collectives and lab kernels go here unless told otherwise.
  virtual cudaStream_t stream() const = 0;
  /// Which backend this is.
  virtual Backend backend() const = 0;
  /// The rank's memory ledger: DeviceBuffers a lab allocates for this rank are booked here.
  virtual MemoryLedger& ledger() = 0;
  /// The NCCL communicator, or nullptr under emulation.
  virtual ncclComm_t nccl() const = 0;

  /// recv[i] = sum over ranks of send[i], `count` elements; send == recv (in place) is allowed.
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DType type,
                          cudaStream_t stream = nullptr) = 0;
  /// recv[r * send_count + i] = rank r's send[i]. In place when send == recv + rank() * send_count.
  virtual void all_gather(const void* send, void* recv, std::size_t send_count, DType type,
                          cudaStream_t stream = nullptr) = 0;
  /// recv[i] = sum over ranks of send[rank() * recv_count + i]; send holds size() * recv_count.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                              cudaStream_t stream = nullptr) = 0;
  /// Starts a group: the send/recv calls up to group_end() are posted together, as
  /// ncclGroupStart/ncclGroupEnd, so a rank may send right and receive from left without deadlock.
  virtual void group_start() = 0;
  /// Ends a group and posts its operations.
  virtual void group_end() = 0;
  /// Sends `count` elements to rank `peer` (matched in order with that peer's recv from us).
  virtual void send(const void* buf, std::size_t count, DType type, int peer,
                    cudaStream_t stream = nullptr) = 0;
  /// Receives `count` elements from rank `peer` into buf.
  virtual void recv(void* buf, std::size_t count, DType type, int peer,
                    cudaStream_t stream = nullptr) = 0;
  /// Waits until this rank's stream (or `stream`) is idle; throws RankAborted if another rank
  /// failed.
  virtual void synchronize(cudaStream_t stream = nullptr) = 0;
  /// Waits until every rank's stream is idle and every rank has reached this point.
  virtual void barrier() = 0;
};

/// What asking the CUDA runtime for devices found. A failed query (no driver, a driver older than
/// the runtime, a broken installation) is kept apart from "no device", so that neither a lab nor a
/// test reports a machine that cannot run CUDA as one that merely has no GPU.
struct DeviceQuery {
  cudaError_t status = cudaSuccess;  ///< what cudaGetDeviceCount returned
  int count = 0;                     ///< devices it reported (0 unless status is cudaSuccess)
  int driver_version = 0;            ///< cudaDriverGetVersion: 0 when no driver is installed
  int runtime_version = 0;           ///< cudaRuntimeGetVersion, e.g. 13000 for CUDA 13.0
  /// True when the query succeeded and found at least one device.
  bool usable() const { return status == cudaSuccess && count > 0; }
  /// One line: the device count, or the error's name, code and message with the likely cause.
  std::string describe() const;
};

/// Most ranks the single-device emulation runs (the inputs one reduction kernel takes).
inline constexpr int kMaxEmulatedRanks = 16;

/// How to start a DeviceCluster.
struct ClusterOptions {
  int ranks = 0;  ///< number of ranks; 0: one per visible GPU (or the launcher's world size)
  Backend backend = Backend::automatic;  ///< see Backend; env MGPU_BACKEND overrides automatic
};

/// Starts the ranks and runs per-rank code on them: DeviceCluster(opts).run([](DeviceComm&
/// c){...}).
///
/// One process, several GPUs: one thread per rank, cudaSetDevice(rank), NCCL communicators made
/// with ncclCommInitRank from one shared ncclUniqueId. Several processes (torchrun, srun, mpirun;
/// see launch.hpp): one rank per process, the id shared over the job's link (job_link.hpp), the
/// GPU from the local rank (local_device); run() then runs this process's rank only. Emulation:
/// every rank on device 0 of this process, and the launcher's variables are ignored.
class DeviceCluster {
 public:
  /// Resolves the backend and rank count; throws with the fix if they cannot work here.
  explicit DeviceCluster(ClusterOptions options = {});
  /// Runs `body` once per rank (on this process's ranks), each on its own thread with its device
  /// current. If a rank throws, the others are stopped and the first error is rethrown here
  /// as "rank r: <message>".
  void run(const std::function<void(DeviceComm&)>& body);
  /// Total ranks.
  int ranks() const { return ranks_; }
  /// The backend in use (never automatic).
  Backend backend() const { return backend_; }
  /// Whether this process drives rank 0 (the one that prints).
  bool prints() const { return first_rank_ == 0; }
  /// The first rank this process drives (its only one when launched one process per GPU).
  int first_rank() const { return first_rank_; }
  /// How this process was launched (one process when the launcher's variables are absent).
  const Launch& launch() const { return launch_; }
  /// False under emulation: all ranks share one GPU, so times say nothing about real scaling.
  bool timing_representative() const { return backend_ != Backend::emulated; }
  /// Visible CUDA devices (0 when there is no driver or no device; query_devices() says which).
  static int device_count();
  /// Asks the runtime for devices and the driver and runtime versions; never throws, and leaves
  /// no sticky error behind.
  static DeviceQuery query_devices();

 private:
  int ranks_ = 0;
  int first_rank_ = 0;
  int local_ranks_ = 0;
  Backend backend_ = Backend::automatic;
  Launch launch_;
};

}  // namespace mgpu::gpu
