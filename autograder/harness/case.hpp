// The graded-case harness: a case is a named block of code that runs chapter functions on inputs
// drawn from a seed and emits named values. The grader runs every case in its own process, once
// against the student build and once against the reference, and compares the values itself.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json_fwd.hpp>  // the result is built in case_registry.cpp: cases never parse json.hpp

#include "mgpu/types.hpp"

namespace mgpu::grade {

/// The random engine a case draws its inputs from; seeded from the grading seed and the case name.
using Rng = std::mt19937_64;

/// Number format a value was computed in (the runtime's element types): picks the default
/// tolerance of the comparison, named bf16, fp32 and fp64 in the rubric.
using mgpu::DType;

/// What a running case sees: its random inputs and the place its named results go.
class Ctx {
 public:
  /// @param case_name the registered name (mixed into the seed so cases draw different inputs)
  /// @param seed the grading seed chosen by the grader
  Ctx(std::string case_name, std::uint64_t seed);
  /// Out of line: the result's JSON type is complete only in case_registry.cpp.
  ~Ctx();

  /// The case's random engine. Draw every input from it so the reference sees the same inputs.
  Rng& rng() { return rng_; }
  /// Uniform integer in [lo, hi], both ends included.
  int uniform_int(int lo, int hi);
  /// Uniform real in [lo, hi).
  double uniform_real(double lo, double hi);
  /// n independent draws from N(0, stddev^2).
  std::vector<double> normal_vector(std::size_t n, double stddev = 1.0);
  /// Log-uniform real in [lo, hi) (for sizes spanning orders of magnitude, e.g. parameter counts).
  double log_uniform(double lo, double hi);
  /// One of the given choices, uniformly.
  template <class T>
  T pick(std::initializer_list<T> choices) {
    auto i = static_cast<std::size_t>(uniform_int(0, static_cast<int>(choices.size()) - 1));
    return *(choices.begin() + i);
  }
  /// A (rows, cols) matrix of N(0, stddev^2) draws.
  Eigen::MatrixXd normal_matrix(Eigen::Index rows, Eigen::Index cols, double stddev = 1.0);

  /// A scalar result, compared with the reference's value of the same name.
  void emit(const std::string& name, double value, DType dtype = DType::f64);
  /// A vector result, compared element by element.
  void emit(const std::string& name, const std::vector<double>& values, DType dtype = DType::f64);
  /// An Eigen vector or matrix (any scalar), flattened row by row.
  template <class Derived>
  void emit(const std::string& name, const Eigen::DenseBase<Derived>& m, DType dtype = DType::f64) {
    std::vector<double> flat;
    flat.reserve(static_cast<std::size_t>(m.size()));
    for (Eigen::Index r = 0; r < m.rows(); ++r)
      for (Eigen::Index c = 0; c < m.cols(); ++c) flat.push_back(static_cast<double>(m(r, c)));
    emit(name, flat, dtype);
  }
  /// Any integer or floating-point vector, converted to double.
  template <class T>
  requires std::is_arithmetic_v<T> &&
      (!std::is_same_v<T, double>)void emit(const std::string& name, const std::vector<T>& values,
                                            DType dtype = DType::f64) {
    emit(name, std::vector<double>(values.begin(), values.end()), dtype);
  }

  /// A per-rank vector: element i belongs to rank i, so feedback names the rank of a mismatch.
  void emit_per_rank(const std::string& name, const std::vector<double>& values,
                     DType dtype = DType::f64);

  /// Emits 1 when f() throws std::invalid_argument (the documented rejection of bad input), 0
  /// when it returns. Any other exception, NotImplemented included, escapes to the harness.
  template <class F>
  void emit_rejects(const std::string& name, F&& f) {
    double rejected = 0;
    try {
      f();
    } catch (const std::invalid_argument&) {
      rejected = 1;
    }
    emit(name, rejected);
  }

  /// A measured cost (bytes sent, peak bytes, virtual seconds). Not checked for correctness; the
  /// rubric's budgets compare it with the reference's measurement (<= reference * factor).
  void measure(const std::string& name, double value);

  /// The JSON the harness sends to the grader: {"values": {...}, "measures": {...}}.
  const nlohmann::json& result() const;

 private:
  Rng rng_;
  std::unique_ptr<nlohmann::json> result_;
};

/// A case body.
using CaseFn = void (*)(Ctx&);

/// Registers a case at static-initialisation time; used by MGPU_CASE.
struct CaseRegistrar {
  /// @param name the case name the rubric refers to, e.g. "11_5.bubble"
  /// @param fn the body
  /// @param isolated the case runs clusters (MGPU_CASE_ISOLATED): a rank program refuses to run
  ///        it whole
  CaseRegistrar(const char* name, CaseFn fn, bool isolated = false);
};

/// The body registered under name, or nullptr.
CaseFn find_case(const std::string& name);
/// True when the case was registered with MGPU_CASE_ISOLATED.
bool case_isolated(const std::string& name);
/// Every registered name (for humans debugging a case program; the grader never asks).
std::vector<std::string> case_names();

}  // namespace mgpu::grade

#define MGPU_CASE_CAT2(a, b) a##b
#define MGPU_CASE_CAT(a, b) MGPU_CASE_CAT2(a, b)
/// Defines a graded case: `MGPU_CASE("11_5.bubble") { ... ctx.emit("bubble", b); }`.
#define MGPU_CASE(name)                                                              \
  static void MGPU_CASE_CAT(mgpu_case_fn_, __LINE__)(::mgpu::grade::Ctx & ctx);      \
  static const ::mgpu::grade::CaseRegistrar MGPU_CASE_CAT(mgpu_case_reg_, __LINE__)( \
      name, &MGPU_CASE_CAT(mgpu_case_fn_, __LINE__));                                \
  static void MGPU_CASE_CAT(mgpu_case_fn_, __LINE__)([[maybe_unused]] ::mgpu::grade::Ctx & ctx)
/// A graded case that runs clusters, in a `*.host.cpp` file (rank_code.hpp): its ranks run rank
/// bodies, hand results out only through Rank::publish, and the case reads meters and clocks only
/// from the reports after the run. It runs only in the host program (or whole, with threads):
/// never whole in a student's program, where its meter would be the student's to write.
#define MGPU_CASE_ISOLATED(name)                                                     \
  static void MGPU_CASE_CAT(mgpu_case_fn_, __LINE__)(::mgpu::grade::Ctx & ctx);      \
  static const ::mgpu::grade::CaseRegistrar MGPU_CASE_CAT(mgpu_case_reg_, __LINE__)( \
      name, &MGPU_CASE_CAT(mgpu_case_fn_, __LINE__), true);                          \
  static void MGPU_CASE_CAT(mgpu_case_fn_, __LINE__)([[maybe_unused]] ::mgpu::grade::Ctx & ctx)
