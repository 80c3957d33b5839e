// Memory ledger for the GPU labs: bytes per category, current and peak.
#include "common/ledger.hpp"

#include <cstdio>
#include <stdexcept>

namespace mgpu::gpu {

const char* category_name(Category c) {
  switch (c) {
    case Category::weights: return "weights";
    case Category::grads: return "grads";
    case Category::master: return "master";
    case Category::optimizer: return "optimizer";
    case Category::activations: return "activations";
    case Category::comm: return "comm";
  }
  return "?";
}

void MemoryLedger::add(Category c, std::size_t bytes) {
  current_[index(c)] += bytes;
  if (current_[index(c)] > peak_[index(c)]) peak_[index(c)] = current_[index(c)];
  const std::size_t total = current_total();
  if (total > peak_total_) peak_total_ = total;
}

void MemoryLedger::release(Category c, std::size_t bytes) {
  if (bytes > current_[index(c)]) {
    throw std::logic_error(std::string("memory ledger: releasing ") + std::to_string(bytes) +
                           " bytes of " + category_name(c) + " but only " +
                           std::to_string(current_[index(c)]) +
                           " are held; free each buffer once, with the category it was allocated in");
  }
  current_[index(c)] -= bytes;
}

std::size_t MemoryLedger::current_total() const {
  std::size_t total = 0;
  for (std::size_t b : current_) total += b;
  return total;
}

std::string MemoryLedger::summary() const {
  std::string out;
  for (int i = 0; i < kCategories; ++i) {
    out += category_name(static_cast<Category>(i));
    out += " " + format_bytes(static_cast<double>(peak_[i])) + " | ";
  }
  return out + "peak total " + format_bytes(static_cast<double>(peak_total_));
}

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

}  // namespace mgpu::gpu
