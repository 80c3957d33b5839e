// DeviceCluster: picks the backend and rank count, starts one thread per local rank, and turns
// a failure in any rank into one exception for the caller, with the other ranks stopped.
#include "common/backends.hpp"
#include "common/device_buffer.hpp"

#include <mgpu/not_implemented.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
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

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string(name) + "='" + v + "' is not an integer");
  }
}

// Rank 0 writes the id to a temporary file and renames it, so a reader never sees half an id.
ncclUniqueId exchange_id_through_file(int rank) {
  const char* path = std::getenv("MGPU_NCCL_ID_FILE");
  if (path == nullptr || *path == '\0') {
    throw std::invalid_argument(
        "MGPU_WORLD_SIZE is set but MGPU_NCCL_ID_FILE is not: point it at a "
        "path on a file system every node sees (rank 0 writes the NCCL id there)");
  }
  ncclUniqueId id{};
  if (rank == 0) {
    MGPU_NCCL_CHECK(ncclGetUniqueId(&id));
    const std::string tmp = std::string(path) + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(id.internal, sizeof id.internal);
      if (!out) throw std::runtime_error(std::string("cannot write the NCCL id to ") + tmp);
    }
    std::filesystem::rename(tmp, path);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(std::string("rank ") + std::to_string(rank) +
                               " waited 120 s for rank 0 to write " + path +
                               ": is rank 0 running, and is the path shared between nodes?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(path, std::ios::binary);
  in.read(id.internal, sizeof id.internal);
  if (!in) throw std::runtime_error(std::string("cannot read a whole NCCL id from ") + path);
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
  const std::optional<int> world =
      backend_ == Backend::emulated ? std::nullopt : env_int("MGPU_WORLD_SIZE");
  if (world) {
    const std::optional<int> rank = env_int("MGPU_RANK");
    if (!rank || *rank < 0 || *rank >= *world) {
      throw std::invalid_argument("MGPU_WORLD_SIZE=" + std::to_string(*world) +
                                  " needs MGPU_RANK in [0, " + std::to_string(*world) + ")");
    }
    if (options.ranks != 0 && options.ranks != *world) {
      throw std::invalid_argument("--ranks " + std::to_string(options.ranks) +
                                  " disagrees with MGPU_WORLD_SIZE=" + std::to_string(*world) +
                                  ": drop one of them");
    }
    backend_ = Backend::nccl;
    ranks_ = *world;
    first_rank_ = *rank;
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
    id = exchange_id_through_file(first_rank_);
  }
  const int devices = device_count();
  const std::optional<int> local_rank = env_int("MGPU_LOCAL_RANK");
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
          const int device = local_ranks_ == ranks_ ? rank : local_rank.value_or(rank % devices);
          nccl_rank_thread = true;  // see device_buffer.hpp: no device-wide waits while unwinding
          MGPU_CUDA_CHECK(cudaSetDevice(device));
          started.wait();
          comm = detail::make_nccl_comm(id, ranks_, rank, device, aborted);
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
