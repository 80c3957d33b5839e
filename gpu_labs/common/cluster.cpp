// DeviceCluster: picks the backend and rank count, starts one thread per local rank, and turns
// a failure in any rank into one exception for the caller, with the other ranks stopped.
#include "common/backends.hpp"
#include "common/device_buffer.hpp"

#include <mgpu/not_implemented.hpp>

#include "common/job_link.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace mgpu::gpu {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::automatic:
      return "automatic";
    case Backend::nccl:
      return "nccl";
    case Backend::emulated:
      return "emulated";
  }
  return "?";
}

Backend parse_backend(const std::string& text) {
  if (text == "auto" || text == "automatic") return Backend::automatic;
  if (text == "nccl") return Backend::nccl;
  if (text == "emulated" || text == "emulate") return Backend::emulated;
  throw std::invalid_argument("backend '" + text + "': use auto, nccl or emulated");
}

namespace {

std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

std::string DeviceQuery::describe() const {
  if (status == cudaSuccess) {
    if (count == 0) return "no CUDA device visible: check nvidia-smi and CUDA_VISIBLE_DEVICES";
    return std::to_string(count) + " CUDA device(s), driver supports CUDA " +
           cuda_version_text(driver_version) + ", runtime CUDA " +
           cuda_version_text(runtime_version);
  }
  std::string what = std::string(cudaGetErrorName(status)) + " (" +
                     std::to_string(static_cast<int>(status)) + ": " + cudaGetErrorString(status) +
                     ")";
  if (status == cudaErrorNoDevice)
    return "no CUDA device visible, " + what + ": check nvidia-smi and CUDA_VISIBLE_DEVICES";
  std::string out = "CUDA device query failed: " + what;
  if (driver_version == 0) {
    out += "; no NVIDIA driver is loaded on this machine";
  } else if (driver_version < runtime_version) {
    out += "; the driver supports CUDA " + cuda_version_text(driver_version) +
           " but this program was built for CUDA " + cuda_version_text(runtime_version) +
           ": update the driver";
  }
  return out;
}

DeviceQuery DeviceCluster::query_devices() {
  DeviceQuery q;
  q.status = cudaGetDeviceCount(&q.count);
  if (q.status != cudaSuccess) q.count = 0;
  if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess) q.driver_version = 0;
  if (cudaRuntimeGetVersion(&q.runtime_version) != cudaSuccess) q.runtime_version = 0;
  cudaGetLastError();  // clear a sticky error so later checks start clean
  return q;
}

int DeviceCluster::device_count() {
  const DeviceQuery q = query_devices();
  return q.usable() ? q.count : 0;
}

namespace {

// NCCL's unique id, made on rank 0 and handed to every rank over the job's host link; with
// NCCL_COMM_ID every rank makes the same id from that address itself.
ncclUniqueId job_nccl_id(const Launch& launch) {
  ncclUniqueId id{};
  JobLink* link = join_job(launch);
  if (link == nullptr) {
    MGPU_NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
  }
  const std::string bytes = share_from_rank0(*link, launch.rank, [] {
    ncclUniqueId made{};
    MGPU_NCCL_CHECK(ncclGetUniqueId(&made));
    return std::string(made.internal, sizeof made.internal);
  });
  if (bytes.size() != sizeof id.internal)
    throw std::runtime_error("rank " + std::to_string(launch.rank) + " got " +
                             std::to_string(bytes.size()) + " bytes of NCCL id from rank 0, not " +
                             std::to_string(sizeof id.internal));
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  return id;
}

}  // namespace

DeviceCluster::DeviceCluster(ClusterOptions options) : backend_(options.backend) {
  if (backend_ == Backend::automatic) {
    if (const char* env = std::getenv("MGPU_BACKEND"); env != nullptr && *env != '\0') {
      backend_ = parse_backend(env);
    }
  }
  const DeviceQuery query = query_devices();
  if (!query.usable())
    throw std::runtime_error("the GPU labs need a CUDA device: " + query.describe());
  const int devices = query.count;
  // Emulation is always local to this process, so the launcher's variables do not apply to it
  // (a lab's one-GPU reference or baseline may run beside a multi-process job).
  if (backend_ != Backend::emulated) launch_ = launch_from_environment();
  if (launch_.multi_process()) {
    if (options.ranks != 0 && options.ranks != launch_.world) {
      throw std::invalid_argument("--ranks " + std::to_string(options.ranks) +
                                  " disagrees with the " + launch_.source + " world of " +
                                  std::to_string(launch_.world) + " ranks: drop --ranks");
    }
    // Every rank says how it was started, so that a job of N single-rank jobs shows at once.
    std::fprintf(stderr, "%s\n", launch_.describe().c_str());
    backend_ = Backend::nccl;
    ranks_ = launch_.world;
    first_rank_ = launch_.rank;
    local_ranks_ = 1;
    return;
  }
  ranks_ = options.ranks > 0 ? options.ranks : devices;
  if (backend_ == Backend::automatic)
    backend_ = ranks_ <= devices ? Backend::nccl : Backend::emulated;
  if (backend_ == Backend::nccl && ranks_ > devices) {
    throw std::invalid_argument(
        std::to_string(ranks_) + " NCCL ranks but only " + std::to_string(devices) +
        " GPUs visible: use --ranks <= " + std::to_string(devices) + " or --backend emulated");
  }
  if (backend_ == Backend::emulated && ranks_ > kMaxEmulatedRanks) {
    throw std::invalid_argument(std::to_string(ranks_) +
                                " emulated ranks: the emulation supports at most " +
                                std::to_string(kMaxEmulatedRanks));
  }
  first_rank_ = 0;
  local_ranks_ = ranks_;
}

void DeviceCluster::run(const std::function<void(DeviceComm&)>& body) {
  std::shared_ptr<detail::EmulatedHub> hub;
  auto aborted = std::make_shared<std::atomic<bool>>(false);
  ncclUniqueId id{};
  if (backend_ == Backend::emulated) {
    hub = detail::make_emulated_hub(ranks_);
  } else if (local_ranks_ == ranks_) {
    MGPU_NCCL_CHECK(ncclGetUniqueId(&id));
  } else {
    id = job_nccl_id(launch_);
  }
  const int devices = device_count();
  // This process's ranks meet here before creating their communicators: a rank that fails to
  // start (a bad device, no memory) aborts it, instead of leaving the others inside NCCL's init
  // waiting for a rank that never comes.
  AbortableBarrier started(local_ranks_);

  run_rank_threads(
      local_ranks_, first_rank_,
      [&](int rank) {
        std::unique_ptr<DeviceComm> comm;
        if (backend_ == Backend::emulated) {
          comm = detail::make_emulated_comm(hub, rank);
        } else {
          const int device = local_ranks_ == ranks_ ? rank : local_device(launch_, devices);
          nccl_rank_thread = true;  // see device_buffer.hpp: no device-wide waits while unwinding
          MGPU_CUDA_CHECK(cudaSetDevice(device));
          started.wait();
          comm = detail::make_nccl_comm(id, ranks_, rank, device, aborted, launch_.timeout_s);
        }
        body(*comm);
        comm->synchronize(nullptr);
      },
      [&] {
        aborted->store(true);
        started.abort();
        if (hub) detail::abort_emulated_hub(*hub);
      });
}

}  // namespace mgpu::gpu
