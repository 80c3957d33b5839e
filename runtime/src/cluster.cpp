// The cluster: rank threads, the run's error handling (first error wins, others stop),
// blocking with deadlock detection, and the per-rank reports.
#include "isolation.hpp"
#include "rank_thread.hpp"
#include "state.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

namespace mgpu {
namespace detail {

namespace {
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}
bool is_rank_stopped(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const RankStopped&) {
    return true;
  } catch (...) {
    return false;
  }
}
}  // namespace

std::string Group::describe() const {
  const std::size_t n = members.size();
  const bool abbreviate = n > kListedRanks;
  const std::size_t listed = abbreviate ? kListedRanks - 1 : n;  // the last one is added below
  std::string s = name + "{";
  for (std::size_t i = 0; i < listed; ++i) {
    // Appended piece by piece: GCC 12 at -O3 warns falsely (-Wrestrict) on "literal" + std::string.
    if (i > 0) s += ',';
    s += std::to_string(members[i]);
  }
  if (abbreviate) {
    s += ",...,";
    s += std::to_string(members.back());
    s += " (";
    s += std::to_string(n);
    s += " ranks)";
  }
  return s + "}";
}

namespace {
std::atomic<RankIsolation> g_default_isolation{RankIsolation::threads};
}  // namespace

ClusterState::ClusterState(ClusterConfig c)
    : config(std::move(c)), isolation(config.isolation.value_or(default_rank_isolation())) {
  auto bad = [](const std::string& what) {
    throw std::invalid_argument("mgpu::ClusterConfig: " + what);
  };
  if (config.world_size < 1)
    bad("world_size " + std::to_string(config.world_size) + " must be >= 1");
  if (config.gpus_per_node < 1)
    bad("gpus_per_node " + std::to_string(config.gpus_per_node) + " must be >= 1");
  if (!(config.flops_per_second > 0)) bad("flops_per_second must be > 0");
  if (!(config.intra_node_bytes_per_second > 0) || !(config.inter_node_bytes_per_second > 0))
    bad("bandwidths must be > 0 (use a huge value, or infinity, for free communication)");
  if (!(config.intra_node_latency_seconds >= 0) || !(config.inter_node_latency_seconds >= 0))
    bad("latencies must be >= 0");
}

std::pair<double, double> ClusterState::link(int a, int b) const {
  if (a / config.gpus_per_node == b / config.gpus_per_node)
    return {config.intra_node_latency_seconds, config.intra_node_bytes_per_second};
  return {config.inter_node_latency_seconds, config.inter_node_bytes_per_second};
}

std::shared_ptr<Group> ClusterState::make_group(std::string name, std::vector<int> members) const {
  auto g = std::make_shared<Group>();
  g->name = std::move(name);
  g->members = std::move(members);
  const std::size_t n = g->members.size();
  g->next_seq.assign(n, 0);
  g->unmatched.resize(n);
  g->posted.resize(n);
  std::map<int, int> per_node;  // members on each node the group touches
  for (int m : g->members) ++per_node[m / config.gpus_per_node];
  const bool one_node = per_node.size() == 1;
  g->alpha = one_node ? config.intra_node_latency_seconds : config.inter_node_latency_seconds;
  g->beta = one_node ? config.intra_node_bytes_per_second : config.inter_node_bytes_per_second;
  // k members on every node: k rings, one per member's NIC (ClusterConfig::ring_per_nic).
  int k = per_node.begin()->second;
  for (const auto& [node, members] : per_node) k = std::min(k, members);
  if (!one_node && config.ring_per_nic && k > 1)
    g->beta = std::min(k * config.inter_node_bytes_per_second,
                       config.intra_node_bytes_per_second * k / (k - 1));
  return g;
}

void ClusterState::reset() {
  ranks.clear();
  handles.clear();
  reports.clear();
  error = nullptr;
  error_is_primary = false;
  abort_reason.clear();
  aborting = false;
  live_ranks = config.world_size;
  asleep_ranks = 0;
  std::vector<int> all(static_cast<std::size_t>(config.world_size));
  for (int r = 0; r < config.world_size; ++r) all[static_cast<std::size_t>(r)] = r;
  auto world = make_group("world", all);
  for (int r = 0; r < config.world_size; ++r) {
    auto s = std::make_unique<RankState>();
    s->cluster = this;
    s->id = r;
    s->memory = MemoryLedger(r, config.memory_capacity_bytes);
    s->world = Comm(world, s.get(), r);
    ranks.push_back(std::move(s));
    handles.push_back(Rank(this, r));
  }
}

void ClusterState::record_error_locked(std::exception_ptr e) {
  const bool primary = !is_rank_stopped(e);
  if (!error || (primary && !error_is_primary)) {
    error = e;
    error_is_primary = primary;
  }
}

void ClusterState::abort_locked(const std::string& reason) {
  if (!aborting) {
    abort_reason = reason;
    aborting = true;
  }
  for (auto& r : ranks) wake_locked(*r);
}

void ClusterState::mark_awake_locked(RankState& rank) {
  if (rank.asleep) {
    rank.asleep = false;
    --asleep_ranks;
  }
}

void ClusterState::wake_locked(RankState& rank) {
  mark_awake_locked(rank);
  // Also reaches a rank waiting in a collective's cancel() for helpers to leave its buffers.
  rank.wake.notify_one();
}

void ClusterState::check_abort(const RankState& self) const {
  if (aborting.load()) {
    // The first line only: a deadlock report has a line per rank, and every rank throws this.
    const std::string reason = abort_reason.substr(0, abort_reason.find('\n'));
    throw RankStopped("rank " + std::to_string(self.id) +
                      " stopped because the run failed: " + reason);
  }
}

bool ClusterState::deadlocked_locked() const {
  bool any_live = false;
  for (const auto& r : ranks) {
    if (!r->live) continue;
    any_live = true;
    if (!r->wait_progress || r->wait_progress()) return false;
  }
  return any_live;
}

std::string ClusterState::deadlock_report_locked() const {
  std::ostringstream s;
  s << "deadlock: every rank still running is blocked, and nothing any rank can do would wake "
       "one of them.\n";
  for (const auto& r : ranks) {
    s << "  rank " << r->id << ": ";
    if (!r->live) {
      s << "finished\n";
    } else {
      s << "waits for " << (r->wait_what ? r->wait_what() : std::string("?")) << "\n";
    }
  }
  s << "Fix: make sure every recv has a matching send (same peer, tag and group) that its sender "
       "reaches, and that all members of a group call the same collectives in the same order.";
  return s.str();
}

bool ClusterState::stop_if_deadlocked_locked() {
  // Every event that lets a rank move on wakes it, so a deadlock needs every live rank asleep;
  // counting them keeps this check O(1) per blocking call. The full check runs only then.
  if (aborting.load() || live_ranks == 0 || asleep_ranks < live_ranks) return false;
  if (!deadlocked_locked()) {
    // Some sleeper could move on but was not woken: wake it rather than risk a hang.
    for (auto& r : ranks)
      if (r->asleep && r->wait_progress()) wake_locked(*r);
    return false;
  }
  std::string report = deadlock_report_locked();
  record_error_locked(std::make_exception_ptr(DeadlockError(report)));
  abort_locked(report);
  return true;
}

void ClusterState::block(Lock& lk, RankState& self, std::function<bool()> progress,
                         std::function<std::string()> what) {
  check_abort(self);
  self.wait_progress = std::move(progress);
  self.wait_what = std::move(what);
  self.asleep = true;
  ++asleep_ranks;
  struct Clear {
    ClusterState& c;
    RankState& s;
    ~Clear() {
      if (s.asleep) {
        s.asleep = false;
        --c.asleep_ranks;
      }
      s.wait_progress = nullptr;
      s.wait_what = nullptr;
    }
  } clear{*this, self};
  if (stop_if_deadlocked_locked()) throw DeadlockError(abort_reason);  // the report
  self.wake.wait(lk, [&] { return !self.asleep || aborting.load(); });
  check_abort(self);
}

void ClusterState::wait(Operation& op) {
  RankState& self = *op.owner;
  {
    Lock lk(mu);
    for (;;) {
      if (aborting.load()) {
        op.cancel(lk);
        check_abort(self);
      }
      if (op.ready_locked()) break;
      if (op.helpable_locked()) {
        op.help(lk);
        continue;
      }
      try {
        block(
            lk, self, [&op] { return op.progress_locked(); },
            [&op] { return op.describe_locked(); });
      } catch (...) {
        op.cancel(lk);
        throw;
      }
    }
  }
  op.finish();
}

bool ClusterState::test_locked(Lock& lk, Operation& op) {
  if (aborting.load()) {
    op.cancel(lk);
    check_abort(*op.owner);
  }
  if (op.ready_locked()) return true;
  while (op.helpable_locked()) op.help(lk);
  return op.ready_locked();
}

void ClusterState::rank_finished(int id) {
  Lock lk(mu);
  ranks[static_cast<std::size_t>(id)]->live = false;
  --live_ranks;
  stop_if_deadlocked_locked();
}

void ClusterState::run_rank(int r, const std::function<void(Rank&)>& body) {
  try {
    body(handles[static_cast<std::size_t>(r)]);
    settle_stream_if_known(*ranks[static_cast<std::size_t>(r)]);
  } catch (...) {
    auto e = std::current_exception();
    Lock lk(mu);
    record_error_locked(e);
    abort_locked("rank " + std::to_string(r) + " threw: " + what_of(e));
  }
  rank_finished(r);
}

void ClusterState::run(const std::function<void(Rank&)>& body) {
  reset();
  if (isolation == RankIsolation::processes) {
    run_isolated(*this, body);
  } else {
    run_threads(body);
  }
}

void ClusterState::run_threads(const std::function<void(Rank&)>& body) {
  std::vector<RankThread> threads;
  threads.reserve(ranks.size());
  std::exception_ptr start_error;
  for (int r = 0; r < config.world_size && !start_error; ++r) {
    try {
      threads.emplace_back([this, r, &body] { run_rank(r, body); });
    } catch (...) {
      // Ranks already started may wait for this one forever: stop them before joining.
      start_error = std::current_exception();
      Lock lk(mu);
      abort_locked("could not start the thread of rank " + std::to_string(r) + ": " +
                   what_of(start_error));
    }
  }
  for (auto& t : threads) t.join();
  if (start_error) std::rethrow_exception(start_error);
  ran = true;
  // Timelines are moved, not copied: a ring over 1,024 ranks records tens of millions of spans,
  // and a copy would double the run's peak memory at its very end.
  for (const auto& s : ranks)
    reports.push_back(
        RankReport{s->id, s->memory, s->traffic, std::move(s->clock), std::move(s->checkpoints)});
  if (error) std::rethrow_exception(error);
}

}  // namespace detail

RankIsolation default_rank_isolation() { return detail::g_default_isolation.load(); }
void set_default_rank_isolation(RankIsolation isolation) {
  detail::g_default_isolation.store(isolation);
}

// ------------------------------------------------------------------------------------ Rank

Rank::Rank(detail::ClusterState* cluster, int id) : cluster_(cluster), id_(id) {}
int Rank::id() const { return id_; }
int Rank::world_size() const { return cluster_->config.world_size; }
int Rank::node() const { return id_ / cluster_->config.gpus_per_node; }
Comm& Rank::world() { return cluster_->ranks[static_cast<std::size_t>(id_)]->world; }
MemoryLedger& Rank::memory() { return cluster_->ranks[static_cast<std::size_t>(id_)]->memory; }

namespace {
// In a rank's own process the meter and clock live in the trusted process; a copy here would
// show numbers that the cluster does not report.
void refuse_in_process(const detail::RankState& self, const char* what) {
  if (self.remote) {
    throw std::logic_error(std::string("mgpu::Rank::") + what +
                           ": with ranks in processes the meter and clock belong to the "
                           "cluster; read them from Cluster::report after run");
  }
}
}  // namespace

TrafficMeter& Rank::traffic() {
  auto& self = *cluster_->ranks[static_cast<std::size_t>(id_)];
  refuse_in_process(self, "traffic");
  return self.traffic;
}
VirtualClock& Rank::clock() {
  auto& self = *cluster_->ranks[static_cast<std::size_t>(id_)];
  refuse_in_process(self, "clock");
  return self.clock;
}
const ClusterConfig& Rank::config() const { return cluster_->config; }
double Rank::now() const {
  const auto& self = *cluster_->ranks[static_cast<std::size_t>(id_)];
  if (self.remote) return detail::remote_now(*self.remote);
  return self.clock.now();
}

void Rank::checkpoint(const std::string& name) {
  auto& self = *cluster_->ranks[static_cast<std::size_t>(id_)];
  if (self.remote) {
    detail::remote_checkpoint(*self.remote, name);
    return;
  }
  cluster_->check_abort(self);
  self.checkpoints[name] =
      Checkpoint{self.clock.now(), self.clock.compute_time(), self.traffic, self.memory};
}

void Rank::publish_raw(const std::string& name, const void* data, std::size_t count, DType dtype) {
  auto& self = *cluster_->ranks[static_cast<std::size_t>(id_)];
  if (self.remote) {
    detail::remote_publish(*self.remote, name, data, count, dtype);
    return;
  }
  auto& p = self.published[name];
  p.dtype = dtype;
  p.bytes.assign(static_cast<const unsigned char*>(data),
                 static_cast<const unsigned char*>(data) + count * dtype_bytes(dtype));
}

void Rank::compute(double flops, std::string_view label) {
  compute_seconds(flops / cluster_->config.flops_per_second, label);
}

void Rank::compute_seconds(double seconds, std::string_view label) {
  auto& self = *cluster_->ranks[static_cast<std::size_t>(id_)];
  if (self.remote) {
    detail::remote_compute(*self.remote, seconds, label);
    return;
  }
  cluster_->check_abort(self);
  self.clock.advance_compute(seconds, label);
}

double RankReport::idle_fraction() const {
  const double end = clock.now();
  return end > 0 ? clock.idle_time() / end : 0.0;
}

// ------------------------------------------------------------------------------------ Cluster

namespace {
ClusterConfig with_world_size(int world_size) {
  ClusterConfig c;
  c.world_size = world_size;
  return c;
}
}  // namespace

Cluster::Cluster(int world_size) : Cluster(with_world_size(world_size)) {}
Cluster::Cluster(ClusterConfig config)
    : state_(std::make_unique<detail::ClusterState>(std::move(config))) {}
Cluster::~Cluster() = default;

void Cluster::run(const std::function<void(Rank&)>& body) { state_->run(body); }
void Cluster::run_programs(const RankPrograms& programs) {
  state_->reset();
  detail::run_isolated_programs(*state_, programs);
}
const ClusterConfig& Cluster::config() const { return state_->config; }
int Cluster::world_size() const { return state_->config.world_size; }

const RankReport& Cluster::report(int rank) const {
  if (!state_->ran) throw std::logic_error("mgpu::Cluster::report: call run() first");
  if (rank < 0 || rank >= world_size()) {
    throw std::out_of_range("mgpu::Cluster::report: rank " + std::to_string(rank) +
                            " is outside 0.." + std::to_string(world_size() - 1));
  }
  return state_->reports[static_cast<std::size_t>(rank)];
}

const std::vector<RankReport>& Cluster::reports() const {
  if (!state_->ran) throw std::logic_error("mgpu::Cluster::reports: call run() first");
  return state_->reports;
}

std::vector<unsigned char> Cluster::published_raw(int rank, const std::string& name,
                                                  DType dtype) const {
  report(rank);  // the same checks: a run happened, the rank exists
  const auto& all = state_->ranks[static_cast<std::size_t>(rank)]->published;
  auto it = all.find(name);
  if (it == all.end()) {
    throw std::out_of_range("mgpu::Cluster::published: rank " + std::to_string(rank) +
                            " published nothing named '" + name + "' in the last run");
  }
  if (it->second.dtype != dtype) {
    throw std::invalid_argument(
        "mgpu::Cluster::published: rank " + std::to_string(rank) + " published '" + name + "' as " +
        std::string(to_string(it->second.dtype)) + ", not " + std::string(to_string(dtype)));
  }
  return it->second.bytes;
}

double Cluster::makespan() const {
  double m = 0.0;
  for (const auto& r : reports()) m = std::max(m, r.clock.end_time());
  return m;
}

}  // namespace mgpu
