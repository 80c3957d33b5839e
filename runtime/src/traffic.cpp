// The per-rank traffic meter and the nccl-tests bus-bandwidth factors.
#include "mgpu/traffic.hpp"

#include <string>

namespace mgpu {

double bus_bandwidth_factor(OpKind kind, int n) {
  if (n <= 0) return 0.0;
  const double nn = n;
  switch (kind) {
    case OpKind::all_reduce:
      return 2.0 * (nn - 1.0) / nn;
    case OpKind::reduce_scatter:
    case OpKind::all_gather:
    case OpKind::all_to_all:
    case OpKind::all_to_all_v:
      return (nn - 1.0) / nn;
    case OpKind::broadcast:
    case OpKind::send:
    case OpKind::recv:
      return 1.0;
    case OpKind::barrier:
    case OpKind::split:
      return 0.0;
  }
  return 0.0;
}

TrafficCounts& TrafficCounts::operator+=(const TrafficCounts& other) {
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  messages_sent += other.messages_sent;
  return *this;
}

void TrafficMeter::record(OpKind kind, std::string_view group, const TrafficCounts& counts) {
  const std::string op(to_string(kind));
  total_ += counts;
  by_op_[op] += counts;
  by_group_[std::string(group)] += counts;
  by_op_group_[op + "/" + std::string(group)] += counts;
}

namespace {
TrafficCounts find(const std::map<std::string, TrafficCounts, std::less<>>& m,
                   std::string_view key) {
  auto it = m.find(key);
  return it == m.end() ? TrafficCounts{} : it->second;
}
}  // namespace

TrafficCounts TrafficMeter::op(OpKind kind) const { return find(by_op_, to_string(kind)); }
TrafficCounts TrafficMeter::group(std::string_view name) const { return find(by_group_, name); }
TrafficCounts TrafficMeter::of(OpKind kind, std::string_view group) const {
  return find(by_op_group_, std::string(to_string(kind)) + "/" + std::string(group));
}

void TrafficMeter::reset() { *this = TrafficMeter{}; }

}  // namespace mgpu
