// The per-rank traffic meter; the bus-bandwidth factors and names come from the collective table.
#include "mgpu/traffic.hpp"

#include "collectives.hpp"

#include <string>

namespace mgpu {

double bus_bandwidth_factor(OpKind kind, int n) { return detail::bus_factor(kind, n); }

std::optional<OpKind> op_kind_named(std::string_view name) {
  for (std::size_t i = 0; i < detail::op_kind_count(); ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (detail::collective(kind).name == name) return kind;
  }
  return std::nullopt;
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
