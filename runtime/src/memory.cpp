// The per-rank memory ledger: current and peak bytes per category, and the OOM report.
#include "mgpu/memory.hpp"

#include "isolation.hpp"

#include <sstream>

namespace mgpu {

namespace {
std::string human(std::size_t bytes) {
  std::ostringstream s;
  s.precision(3);
  if (bytes >= (std::size_t(1) << 30)) {
    s << double(bytes) / double(std::size_t(1) << 30) << " GiB";
  } else if (bytes >= (std::size_t(1) << 20)) {
    s << double(bytes) / double(std::size_t(1) << 20) << " MiB";
  } else if (bytes >= 1024) {
    s << double(bytes) / 1024.0 << " KiB";
  } else {
    s << bytes << " B";
  }
  return s.str();
}
std::size_t idx(Category c) { return static_cast<std::size_t>(c); }
}  // namespace

MemoryLedger::MemoryLedger(int rank, std::optional<std::size_t> capacity_bytes)
    : rank_(rank), capacity_(capacity_bytes) {}

void MemoryLedger::allocate(Category category, std::size_t bytes, std::string_view label) {
  if (capacity_ && current_total_ + bytes > *capacity_) {
    std::ostringstream s;
    s << "rank " << rank_ << ": out of memory allocating " << bytes << " bytes (" << human(bytes)
      << ") of " << to_string(category) << " for '" << label << "': " << current_total_
      << " bytes in use + request > capacity " << *capacity_ << " bytes (" << human(*capacity_)
      << "). In use by category:\n"
      << breakdown()
      << "Free something first (shard, recompute, or release buffers earlier) or raise "
         "ClusterConfig::memory_capacity_bytes.";
    throw OutOfMemory(s.str());
  }
  current_[idx(category)] += bytes;
  current_total_ += bytes;
  if (current_[idx(category)] > peak_[idx(category)])
    peak_[idx(category)] = current_[idx(category)];
  if (current_total_ > peak_total_) peak_total_ = current_total_;
  if (remote_) detail::remote_allocate(*remote_, category, bytes, label);
}

void MemoryLedger::release(Category category, std::size_t bytes) {
  if (bytes > current_[idx(category)]) {
    throw std::logic_error("rank " + std::to_string(rank_) + ": releasing " +
                           std::to_string(bytes) + " bytes of " + std::string(to_string(category)) +
                           " but only " + std::to_string(current_[idx(category)]) +
                           " are held; release exactly what was allocated");
  }
  current_[idx(category)] -= bytes;
  current_total_ -= bytes;
  if (remote_) detail::remote_release(*remote_, category, bytes);
}

std::size_t MemoryLedger::current(Category category) const { return current_[idx(category)]; }
std::size_t MemoryLedger::peak(Category category) const { return peak_[idx(category)]; }
std::size_t MemoryLedger::current_total() const { return current_total_; }
std::size_t MemoryLedger::peak_total() const { return peak_total_; }

void MemoryLedger::reset_peaks() {
  peak_ = current_;
  peak_total_ = current_total_;
  if (remote_) detail::remote_reset_peaks(*remote_);
}

std::string MemoryLedger::breakdown() const {
  std::ostringstream s;
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    s << "  " << to_string(static_cast<Category>(c)) << ": " << current_[c] << " bytes ("
      << human(current_[c]) << "), peak " << peak_[c] << " bytes\n";
  }
  s << "  total: " << current_total_ << " bytes (" << human(current_total_) << "), peak "
    << peak_total_ << " bytes\n";
  return s.str();
}

}  // namespace mgpu
