// Per-rank accounting of device memory by what the bytes are for (weights, grads, master,
// optimizer, activations, comm), so a lab can print measured bytes per GPU beside the formula.
// Pure host code: no CUDA here, so it is tested on any machine.
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace mgpu::gpu {

/// What a device allocation holds; the categories of the course's memory tables.
enum class Category { weights, grads, master, optimizer, activations, comm };

/// Number of categories, for arrays indexed by Category.
inline constexpr int kCategories = 6;

/// Lower-case name of a category ("weights", ..., "comm").
const char* category_name(Category c);

/// Current and peak bytes per category for one rank. Not thread-safe: one rank, one thread.
class MemoryLedger {
 public:
  /// Records `bytes` newly allocated in `c`; updates the peaks.
  void add(Category c, std::size_t bytes);
  /// Records `bytes` freed from `c`. Throws std::logic_error if more is freed than is held.
  void release(Category c, std::size_t bytes);
  /// Bytes currently held in `c`.
  std::size_t current(Category c) const { return current_[index(c)]; }
  /// Largest value current(c) has had.
  std::size_t peak(Category c) const { return peak_[index(c)]; }
  /// Bytes currently held over all categories.
  std::size_t current_total() const;
  /// Largest total ever held at one moment (not the sum of per-category peaks).
  std::size_t peak_total() const { return peak_total_; }
  /// One line, e.g. "weights 1.00 MiB | grads ... | peak total 5.00 MiB" (peaks per category).
  std::string summary() const;

 private:
  static int index(Category c) { return static_cast<int>(c); }
  std::array<std::size_t, kCategories> current_{};
  std::array<std::size_t, kCategories> peak_{};
  std::size_t peak_total_ = 0;
};

/// Byte count as text in binary units with two decimals, e.g. "12.00 MiB".
std::string format_bytes(double bytes);

}  // namespace mgpu::gpu
