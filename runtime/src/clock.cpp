// The per-rank virtual clock: compute and idle spans on the program's lane, comm spans beside.
#include "mgpu/clock.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mgpu {

void VirtualClock::advance_compute(double seconds, std::string_view label) {
  if (!(seconds >= 0.0) || std::isinf(seconds)) {
    throw std::invalid_argument("compute '" + std::string(label) + "': duration " +
                                std::to_string(seconds) +
                                " s is negative, infinite or NaN; pass a finite FLOP count >= 0");
  }
  spans_.push_back({Stream::compute, SpanKind::compute, std::string(label), now_, now_ + seconds});
  now_ += seconds;
  compute_ += seconds;
}

void VirtualClock::wait_until(double t, std::string_view label) {
  if (t <= now_) return;
  spans_.push_back({Stream::compute, SpanKind::idle, std::string(label), now_, t});
  idle_ += t - now_;
  now_ = t;
}

void VirtualClock::record_comm(Stream stream, SpanKind kind, std::string_view label, double start,
                               double end) {
  spans_.push_back({stream, kind, std::string(label), start, end});
  if (stream == Stream::comm) {
    comm_free_ = std::max(comm_free_, end);
    comm_ += end - start;
  } else if (stream == Stream::network) {
    network_free_ = std::max(network_free_, end);
    network_ += end - start;
  }
}

double VirtualClock::end_time() const { return std::max({now_, comm_free_, network_free_}); }

double VirtualClock::overlap_time(double from, double to) const {
  // Spans on one stream never overlap each other, so summing pairwise intersections of compute
  // spans with comm spans counts every overlapped second once.
  double overlap = 0.0;
  for (const Span& c : spans_) {
    if (c.stream != Stream::compute || c.kind != SpanKind::compute) continue;
    for (const Span& m : spans_) {
      if (m.stream != Stream::comm) continue;
      const double lo = std::max({c.start, m.start, from}), hi = std::min({c.end, m.end, to});
      if (hi > lo) overlap += hi - lo;
    }
  }
  return overlap;
}

}  // namespace mgpu
