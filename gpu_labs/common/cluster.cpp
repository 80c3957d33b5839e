// DeviceCluster: picks the backend and rank count, starts one thread per local rank, and turns
// a failure in any rank into one exception for the caller, with the other ranks stopped.
#include "common/backends.hpp"

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
    case Backend::automatic: return "automatic";
    case Backend::nccl: return "nccl";
    case Backend::emulated: return "emulated";
  }
  return "?";
}

Backend parse_backend(const std::string& text) {
  if (text == "auto" || text == "automatic") return Backend::automatic;
  if (text == "nccl") return Backend::nccl;
  if (text == "emulated" || text == "emulate") return Backend::emulated;
  throw std::invalid_argument("backend '" + text + "': use auto, nccl or emulated");
}

int DeviceCluster::device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later checks start clean
    return 0;
  }
  return n;
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
    throw std::invalid_argument("MGPU_WORLD_SIZE is set but MGPU_NCCL_ID_FILE is not: point it at a "
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
      throw std::runtime_error(std::string("rank ") + std::to_string(rank) + " waited 120 s for rank 0 to write " +
                               path + ": is rank 0 running, and is the path shared between nodes?");
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
  const int devices = device_count();
  if (devices == 0) {
    throw std::runtime_error("no CUDA device visible: the GPU labs need at least one "
                             "(check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  }
  // Emulation is always local to this process, so the launcher's variables do not apply to it
  // (a lab's one-GPU reference or baseline may run beside a multi-process job).
  const std::optional<int> world = backend_ == Backend::emulated ? std::nullopt : env_int("MGPU_WORLD_SIZE");
  if (world) {
    const std::optional<int> rank = env_int("MGPU_RANK");
    if (!rank || *rank < 0 || *rank >= *world) {
      throw std::invalid_argument("MGPU_WORLD_SIZE=" + std::to_string(*world) +
                                  " needs MGPU_RANK in [0, " + std::to_string(*world) + ")");
    }
    if (options.ranks != 0 && options.ranks != *world) {
      throw std::invalid_argument("--ranks " + std::to_string(options.ranks) + " disagrees with MGPU_WORLD_SIZE=" +
                                  std::to_string(*world) + ": drop one of them");
    }
    backend_ = Backend::nccl;
    ranks_ = *world;
    first_rank_ = *rank;
    local_ranks_ = 1;
    return;
  }
  ranks_ = options.ranks > 0 ? options.ranks : devices;
  if (backend_ == Backend::automatic) backend_ = ranks_ <= devices ? Backend::nccl : Backend::emulated;
  if (backend_ == Backend::nccl && ranks_ > devices) {
    throw std::invalid_argument(std::to_string(ranks_) + " NCCL ranks but only " + std::to_string(devices) +
                                " GPUs visible: use --ranks <= " + std::to_string(devices) + " or --backend emulated");
  }
  if (backend_ == Backend::emulated && ranks_ > kMaxEmulatedRanks) {
    throw std::invalid_argument(std::to_string(ranks_) + " emulated ranks: the emulation supports at most " +
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

  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(local_ranks_));
  std::vector<std::thread> threads;
  for (int i = 0; i < local_ranks_; ++i) {
    threads.emplace_back([&, i] {
      const int rank = first_rank_ + i;
      try {
        std::unique_ptr<DeviceComm> comm;
        if (backend_ == Backend::emulated) {
          comm = detail::make_emulated_comm(hub, rank);
        } else {
          const int device = local_ranks_ == ranks_ ? rank : local_rank.value_or(rank % devices);
          MGPU_CUDA_CHECK(cudaSetDevice(device));
          comm = detail::make_nccl_comm(id, ranks_, rank, device, aborted);
        }
        body(*comm);
        comm->synchronize(nullptr);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
        aborted->store(true);
        if (hub) detail::abort_emulated_hub(*hub);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  // Report the rank that failed first-hand, not the ones stopped because of it.
  // An unfinished exercise is rethrown as it is, so a lab can report "not implemented".
  std::optional<std::pair<int, std::string>> first, fallback;
  for (int i = 0; i < local_ranks_; ++i) {
    if (!errors[static_cast<std::size_t>(i)]) continue;
    try {
      std::rethrow_exception(errors[static_cast<std::size_t>(i)]);
    } catch (const mgpu::NotImplemented&) {
      std::rethrow_exception(errors[static_cast<std::size_t>(i)]);
    } catch (const RankAborted& e) {
      if (!fallback) fallback = {first_rank_ + i, e.what()};
    } catch (const std::exception& e) {
      if (!first) first = {first_rank_ + i, e.what()};
    } catch (...) {
      if (!first) first = {first_rank_ + i, "unknown exception"};
    }
  }
  if (!first) first = fallback;
  if (first) throw std::runtime_error("rank " + std::to_string(first->first) + ": " + first->second);
}

}  // namespace mgpu::gpu
