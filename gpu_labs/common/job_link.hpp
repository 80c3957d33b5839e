// The host-side link between the processes of one multi-process job: how they share NCCL's
// unique id at the start and agree on one exit status at the end. Over TCP to rank 0 (MASTER_ADDR)
// or through job-unique files in a shared folder; both wait at most Launch::timeout_s and then
// fail naming the ranks that never came. Host code only, tested without a GPU.
#pragma once

#include "common/launch.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mgpu::gpu {

/// One process's end of the job's link.
class JobLink {
 public:
  virtual ~JobLink() = default;
  /// Every rank's `mine`, indexed by rank; all ranks call it, in the same order. `what` names
  /// the step in errors. Throws std::runtime_error naming the ranks that did not take part in
  /// time, or that left; after that the link is broken and every later call throws at once.
  std::vector<std::string> all_gather(const std::string& mine, const std::string& what);

 protected:
  /// The exchange itself, one per transport.
  virtual std::vector<std::string> exchange(const std::string& mine, const std::string& what) = 0;

 private:
  std::string broken_;  // why the link failed, "" while it works
};

/// Connects this process to its job as `launch` says (tcp or file); nullptr for a bootstrap
/// without a host link (one process, NCCL_COMM_ID).
std::unique_ptr<JobLink> connect_job(const Launch& launch);

/// The process's link, made by the first call and kept until exit (its files removed then);
/// later calls return the same one. nullptr when `launch` has no host link.
JobLink* join_job(const Launch& launch);
/// The link join_job made, or nullptr.
JobLink* joined_job();

/// What rank 0's `make()` returned, on every rank (NCCL's unique id, say).
std::string share_from_rank0(JobLink& link, int rank, const std::function<std::string()>& make);

/// The exit status of the job: the largest of every rank's `code`. Rank 0 names, on stderr, the
/// ranks whose status was not 0. Without a joined link, `code` as it is; when the ranks cannot
/// agree (the link broke, a rank is gone), the reason on stderr and at least 1. Never throws.
int agree_exit_status(int code) noexcept;

}  // namespace mgpu::gpu
