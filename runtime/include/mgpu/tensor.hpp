// Eigen views of ledger-tracked Buffers: chapter maths uses Eigen while every byte stays counted.
// Views are row-major Eigen::Map objects over the buffer's storage; they own nothing.
#pragma once

#include "mgpu/memory.hpp"
#include "mgpu/types.hpp"

#include <Eigen/Core>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

namespace mgpu {

/// Row-major dynamic matrix of T (the layout every view uses).
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Column vector of T.
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
/// Mutable view of a row-major matrix.
template <class T>
using MatrixMap = Eigen::Map<Matrix<T>>;
/// Read-only view of a row-major matrix.
template <class T>
using ConstMatrixMap = Eigen::Map<const Matrix<T>>;
/// Mutable view of a vector.
template <class T>
using VectorMap = Eigen::Map<Vector<T>>;
/// Read-only view of a vector.
template <class T>
using ConstVectorMap = Eigen::Map<const Vector<T>>;

namespace detail {
inline void check_view(std::size_t have, std::size_t offset, std::size_t rows, std::size_t cols) {
  if (offset + rows * cols > have) {
    throw std::invalid_argument(
        "mgpu::as_matrix: a (" + std::to_string(rows) + ", " + std::to_string(cols) +
        ") view at offset " + std::to_string(offset) + " needs " +
        std::to_string(offset + rows * cols) + " elements but the buffer holds " +
        std::to_string(have) + "; allocate a larger buffer or fix the shape");
  }
}
}  // namespace detail

/// (rows, cols) row-major view of `span[offset, offset + rows*cols)`; throws
/// std::invalid_argument if it does not fit.
template <class T>
MatrixMap<T> as_matrix(std::span<T> span, std::size_t rows, std::size_t cols,
                       std::size_t offset = 0) {
  detail::check_view(span.size(), offset, rows, cols);
  return MatrixMap<T>(span.data() + offset, static_cast<Eigen::Index>(rows),
                      static_cast<Eigen::Index>(cols));
}
/// Read-only (rows, cols) row-major view of `span[offset, offset + rows*cols)`.
template <class T>
ConstMatrixMap<T> as_matrix(std::span<const T> span, std::size_t rows, std::size_t cols,
                            std::size_t offset = 0) {
  detail::check_view(span.size(), offset, rows, cols);
  return ConstMatrixMap<T>(span.data() + offset, static_cast<Eigen::Index>(rows),
                           static_cast<Eigen::Index>(cols));
}
/// (rows, cols) row-major view of a buffer, starting at element `offset`.
template <class T>
MatrixMap<T> as_matrix(Buffer<T>& buf, std::size_t rows, std::size_t cols, std::size_t offset = 0) {
  return as_matrix(buf.span(), rows, cols, offset);
}
/// Read-only (rows, cols) row-major view of a buffer, starting at element `offset`.
template <class T>
ConstMatrixMap<T> as_matrix(const Buffer<T>& buf, std::size_t rows, std::size_t cols,
                            std::size_t offset = 0) {
  return as_matrix(buf.span(), rows, cols, offset);
}
/// Vector view of `span[offset, offset + n)`; n defaults to the rest of the span.
template <class T>
VectorMap<T> as_vector(std::span<T> span, std::size_t offset = 0, std::size_t n = std::size_t(-1)) {
  if (n == std::size_t(-1)) n = offset <= span.size() ? span.size() - offset : 0;
  detail::check_view(span.size(), offset, n, 1);
  return VectorMap<T>(span.data() + offset, static_cast<Eigen::Index>(n));
}
/// Read-only vector view of `span[offset, offset + n)`.
template <class T>
ConstVectorMap<T> as_vector(std::span<const T> span, std::size_t offset = 0,
                            std::size_t n = std::size_t(-1)) {
  if (n == std::size_t(-1)) n = offset <= span.size() ? span.size() - offset : 0;
  detail::check_view(span.size(), offset, n, 1);
  return ConstVectorMap<T>(span.data() + offset, static_cast<Eigen::Index>(n));
}
/// Vector view of a whole buffer (or of `n` elements from `offset`).
template <class T>
VectorMap<T> as_vector(Buffer<T>& buf, std::size_t offset = 0, std::size_t n = std::size_t(-1)) {
  return as_vector(buf.span(), offset, n);
}
/// Read-only vector view of a whole buffer (or of `n` elements from `offset`).
template <class T>
ConstVectorMap<T> as_vector(const Buffer<T>& buf, std::size_t offset = 0,
                            std::size_t n = std::size_t(-1)) {
  return as_vector(buf.span(), offset, n);
}

}  // namespace mgpu
