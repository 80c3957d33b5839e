// Per-rank memory ledger and the ledger-tracked Buffer<T> every chapter allocates through.
// The ledger's peaks are what the tests and the grader compare with the memory formulas.
#pragma once

#include "mgpu/types.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace mgpu {

namespace detail {
struct RemoteLink;
}

/// Thrown when an allocation would take a rank past its memory capacity.
///
/// The message names the rank, the request (bytes, category, label), the capacity, and the
/// ledger's current bytes per category, i.e. what a GPU's out-of-memory error should say.
class OutOfMemory : public std::runtime_error {
 public:
  /// @param message the full, formatted report.
  explicit OutOfMemory(const std::string& message) : std::runtime_error(message) {}
};

/// Bytes held by one rank, per category: current, peak, and the peak of the total.
///
/// Owned and used by one rank's thread only (no locking). The total peak is the highest
/// value the sum over categories ever reached, which is at most the sum of per-category peaks.
class MemoryLedger {
 public:
  /// @param rank global rank this ledger belongs to (named in error messages).
  /// @param capacity_bytes per-rank capacity; std::nullopt means unlimited.
  explicit MemoryLedger(int rank = 0, std::optional<std::size_t> capacity_bytes = std::nullopt);

  /// Records `bytes` more in `category`. Throws OutOfMemory (and records nothing) if the
  /// total would exceed the capacity. `label` names the allocation in that message.
  void allocate(Category category, std::size_t bytes, std::string_view label);
  /// Records `bytes` fewer in `category`. Throws std::logic_error if more than is held.
  void release(Category category, std::size_t bytes);

  /// Bytes held now in one category.
  std::size_t current(Category category) const;
  /// Highest bytes ever held in one category (since construction or reset_peaks()).
  std::size_t peak(Category category) const;
  /// Bytes held now, all categories.
  std::size_t current_total() const;
  /// Highest total ever held (since construction or reset_peaks()).
  std::size_t peak_total() const;
  /// The capacity, if one was set.
  std::optional<std::size_t> capacity() const { return capacity_; }
  /// Global rank this ledger belongs to.
  int rank() const { return rank_; }

  /// Sets every peak to the current value, so the next phase can be measured on its own.
  void reset_peaks();
  /// One line per category with current and peak bytes, e.g. for an error message.
  std::string breakdown() const;

 private:
  int rank_;
  std::optional<std::size_t> capacity_;
  std::array<std::size_t, kCategoryCount> current_{};
  std::array<std::size_t, kCategoryCount> peak_{};
  std::size_t current_total_ = 0;
  std::size_t peak_total_ = 0;
  // In a rank's own process (RankIsolation::processes): where every change is also sent, so
  // that the ledger the cluster reports is the trusted side's, kept in step with this copy.
  friend struct detail::RemoteLink;
  detail::RemoteLink* remote_ = nullptr;
};

/// A zero-initialised array of `T` on one rank, counted in that rank's ledger while it lives.
///
/// Move-only and RAII: the bytes are released from the ledger when the buffer is destroyed,
/// reset, or moved-from storage is overwritten. It is a contiguous range, so it can be passed
/// straight to Comm calls and to `as_vector` / `as_matrix` (tensor.hpp).
template <class T>
class Buffer {
 public:
  /// An empty buffer that owns nothing and is tracked by no ledger.
  Buffer() = default;

  /// Allocates `count` elements of `T`, all zero, and records `count * sizeof(T)` bytes in
  /// `ledger` under `category`. Throws OutOfMemory when the ledger's capacity would be exceeded.
  Buffer(MemoryLedger& ledger, Category category, std::size_t count, std::string label)
      : ledger_(&ledger), category_(category), count_(count), label_(std::move(label)) {
    ledger.allocate(category, bytes(), label_);
    // Zero bits are +0 for float, double and bf16, so one memset zero-initialises all three.
    data_.reset(new T[count]);
    if (count != 0) std::memset(static_cast<void*>(data_.get()), 0, bytes());
  }

  /// Releases the bytes from the ledger.
  ~Buffer() { reset(); }

  /// Takes over another buffer's storage and ledger entry; `other` becomes empty.
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  /// Releases this buffer, then takes over `other`'s storage; `other` becomes empty.
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      ledger_ = std::exchange(other.ledger_, nullptr);
      category_ = other.category_;
      count_ = std::exchange(other.count_, 0);
      label_ = std::move(other.label_);
      data_ = std::move(other.data_);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  /// Frees the storage now and releases its bytes from the ledger; the buffer becomes empty.
  void reset() noexcept {
    if (ledger_ != nullptr) ledger_->release(category_, bytes());
    ledger_ = nullptr;
    count_ = 0;
    data_.reset();
  }

  /// First element (nullptr when empty).
  T* data() { return data_.get(); }
  /// First element (nullptr when empty).
  const T* data() const { return data_.get(); }
  /// Number of elements.
  std::size_t size() const { return count_; }
  /// Size in bytes, as recorded in the ledger.
  std::size_t bytes() const { return count_ * sizeof(T); }
  /// True when the buffer holds no elements.
  bool empty() const { return count_ == 0; }
  /// Category the bytes are recorded under.
  Category category() const { return category_; }
  /// Label given at allocation.
  const std::string& label() const { return label_; }

  /// The elements as a span.
  std::span<T> span() { return {data(), count_}; }
  /// The elements as a read-only span.
  std::span<const T> span() const { return {data(), count_}; }
  /// Element `i` (unchecked).
  T& operator[](std::size_t i) { return data_[i]; }
  /// Element `i` (unchecked).
  const T& operator[](std::size_t i) const { return data_[i]; }
  /// Iterator to the first element (makes Buffer a contiguous range).
  T* begin() { return data(); }
  /// Iterator past the last element.
  T* end() { return data() + count_; }
  /// Iterator to the first element.
  const T* begin() const { return data(); }
  /// Iterator past the last element.
  const T* end() const { return data() + count_; }

 private:
  MemoryLedger* ledger_ = nullptr;
  Category category_ = Category::weights;
  std::size_t count_ = 0;
  std::string label_;
  std::unique_ptr<T[]> data_;
};

}  // namespace mgpu
