// Error metrics, byte tables and the RESULT line of the GPU labs.
#include "common/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string_view>

namespace mgpu::gpu {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

std::string peak_table(const MemoryLedger& ledger) {
  std::string out;
  char buf[96];
  auto line = [&](std::string_view name, std::size_t bytes) {
    std::snprintf(buf, sizeof buf, "  %-12.*s %12s\n", static_cast<int>(name.size()), name.data(),
                  format_bytes(static_cast<double>(bytes)).c_str());
    out += buf;
  };
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    const auto category = static_cast<Category>(c);
    line(to_string(category), ledger.peak(category));
  }
  line("peak total", ledger.peak_total());
  return out;
}

ResultLine::ResultLine(std::string lab) : lab_(std::move(lab)) {}

ResultLine& ResultLine::add(const std::string& key, const std::string& value) {
  std::string v = value.empty() ? "-" : value;
  std::replace(v.begin(), v.end(), ' ', '_');
  fields_.emplace_back(key, v);
  return *this;
}

ResultLine& ResultLine::add(const std::string& key, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return add(key, std::string(buf));
}

ResultLine& ResultLine::add_int(const std::string& key, long long value) {
  return add(key, std::to_string(value));
}

std::string ResultLine::str() const {
  std::string out = "RESULT lab=" + lab_;
  for (const auto& [k, v] : fields_) out += " " + k + "=" + v;
  return out;
}

}  // namespace mgpu::gpu
