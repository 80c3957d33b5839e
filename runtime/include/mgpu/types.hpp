// Element types, reduction operators and memory categories shared by the whole runtime.
// bf16 is only declared here: Eigen/Core, which defines it, takes seconds to parse, and most
// code never touches a bf16 value. Code that does includes mgpu/bf16.hpp.
#pragma once

#include <concepts>
#include <cstddef>
#include <string_view>

namespace Eigen {
struct bfloat16;
}  // namespace Eigen

namespace mgpu {

/// 16-bit brain float (8-bit exponent, 7-bit mantissa), the usual training precision.
using bf16 = Eigen::bfloat16;

/// Element type of a buffer taking part in communication.
enum class DType {
  f32,   ///< float, 4 bytes
  f64,   ///< double, 8 bytes
  bf16,  ///< Eigen::bfloat16, 2 bytes
};

/// How a collective combines the ranks' contributions.
enum class ReduceOp {
  sum,  ///< element-wise sum, in rank order
  avg,  ///< element-wise sum in rank order, then divided by the group size
  max,  ///< element-wise maximum
};

/// What a block of rank memory holds; the ledger keeps current and peak bytes per category.
enum class Category {
  weights,      ///< model parameters in the working precision
  grads,        ///< gradients
  master,       ///< fp32 master copy of the weights (mixed precision)
  optimizer,    ///< optimizer state (e.g. Adam's two moments)
  activations,  ///< activations kept for the backward pass
  comm,         ///< communication buffers (buckets, gathered shards, staging)
};

/// Number of values in Category, for arrays indexed by category.
inline constexpr std::size_t kCategoryCount = 6;

/// Lower-case name of a dtype: "f32", "f64", "bf16".
std::string_view to_string(DType dtype);
/// Lower-case name of a reduction: "sum", "avg", "max".
std::string_view to_string(ReduceOp op);
/// Lower-case name of a category: "weights", "grads", ...
std::string_view to_string(Category category);
/// Bytes per element of a dtype (4, 8 or 2).
std::size_t dtype_bytes(DType dtype);

/// Compile-time facts about an element type; defined for float, double and bf16 only.
template <class T>
struct ElementTraits;

/// float: reduces in float.
template <>
struct ElementTraits<float> {
  static constexpr DType dtype = DType::f32;  ///< runtime tag
  using Accum = float;                        ///< type reductions accumulate in
};

/// double: reduces in double.
template <>
struct ElementTraits<double> {
  static constexpr DType dtype = DType::f64;  ///< runtime tag
  using Accum = double;                       ///< type reductions accumulate in
};

/// bf16: reduces in float and rounds once at the end, as NCCL does for bf16 sums.
template <>
struct ElementTraits<bf16> {
  static constexpr DType dtype = DType::bf16;  ///< runtime tag
  using Accum = float;                         ///< type reductions accumulate in
};

/// True for the element types the runtime can move and reduce: float, double, bf16.
template <class T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, bf16>;

/// The DType tag of an element type, e.g. `dtype_of<float> == DType::f32`.
template <Element T>
inline constexpr DType dtype_of = ElementTraits<T>::dtype;

}  // namespace mgpu
