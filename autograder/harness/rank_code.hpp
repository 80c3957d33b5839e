// Rank code of a graded case, kept apart from the rest of the case so that the process keeping
// the cluster's books never runs it. A case draws its inputs and judges the published results;
// what each rank runs is a rank body, registered by name, that gets only the input the case made
// for that rank, serialised. When the grader runs a student's case, the case runs in a program
// linked without any chapter code (cases_<chapter>_host) and each rank is a fresh program with the
// student's code (cases_<chapter>) that receives its own input over its socket (Cluster::
// run_programs); otherwise (the reference, local runs) the same bodies run as threads.
//
// A case file keeps its bodies in `<name>.cpp` and the case itself in `<name>.host.cpp`, which
// must call no chapter function (the host program does not link them): the input types both use
// live in `<name>.inputs.hpp`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "case.hpp"
#include "mgpu/bf16.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "untrusted.hpp"

namespace mgpu::model {
/// The course model's shape, which rank inputs carry so a rank builds the same model.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ModelConfig, d_in, d_model, d_ff, n_layers, n_heads, seq_len,
                                   d_out, attention, causal, loss)
}  // namespace mgpu::model

namespace nlohmann {

/// Eigen matrices and vectors as {rows, cols, data} (data row by row).
template <class S, int R, int C, int O, int MR, int MC>
struct adl_serializer<Eigen::Matrix<S, R, C, O, MR, MC>> {
  using M = Eigen::Matrix<S, R, C, O, MR, MC>;  ///< the matrix type serialized
  /// Writes m as {rows, cols, data}.
  static void to_json(json& j, const M& m) {
    std::vector<S> data;
    data.reserve(static_cast<std::size_t>(m.size()));
    for (Eigen::Index r = 0; r < m.rows(); ++r)
      for (Eigen::Index c = 0; c < m.cols(); ++c) data.push_back(m(r, c));
    j = {{"rows", m.rows()}, {"cols", m.cols()}, {"data", std::move(data)}};
  }
  /// Reads m back, refusing a data list that is not rows x cols long.
  static void from_json(const json& j, M& m) {
    const auto rows = j.at("rows").get<Eigen::Index>(), cols = j.at("cols").get<Eigen::Index>();
    const auto data = j.at("data").get<std::vector<S>>();
    if (rows < 0 || cols < 0 || static_cast<std::size_t>(rows * cols) != data.size())
      throw std::invalid_argument("a rank input's matrix does not hold rows x cols values");
    m.resize(rows, cols);
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index c = 0; c < cols; ++c)
        m(r, c) = data[static_cast<std::size_t>(r * cols + c)];
  }
};

/// bf16 as the float it holds (exact both ways).
template <>
struct adl_serializer<mgpu::bf16> {
  /// Writes x as a float.
  static void to_json(json& j, const mgpu::bf16& x) { j = static_cast<float>(x); }
  /// Reads x from a float (exact for any value to_json wrote).
  static void from_json(const json& j, mgpu::bf16& x) { x = mgpu::bf16(j.get<float>()); }
};

}  // namespace nlohmann

namespace mgpu::grade {

/// A registered rank body: runs on `rank` with the input the case made for it.
using RankBodyFn = void (*)(mgpu::Rank& rank, const nlohmann::json& input);

/// Registers a rank body at static-initialisation time; used by MGPU_RANK_BODY.
struct RankBodyRegistrar {
  /// Registers fn under name.
  RankBodyRegistrar(const char* name, RankBodyFn fn);
};

/// The body registered under name, or nullptr.
RankBodyFn find_rank_body(const std::string& name);

/// A registered student call: student code a case calls outside Cluster::run, on its input.
using StudentCallFn = nlohmann::json (*)(const nlohmann::json& input);

/// Registers a student call at static-initialisation time; used by MGPU_STUDENT_CALL.
struct StudentCallRegistrar {
  /// Registers fn under name.
  StudentCallRegistrar(const char* name, StudentCallFn fn);
};

/// The call registered under name, or nullptr.
StudentCallFn find_student_call(const std::string& name);

/// The host program's settings (case_main.cpp): the program that each rank of run_ranks, each
/// student call and each plain case starts as, and what to do in that process before it starts
/// (enter_folder("rank3"), "call" or "plain": its own working folder). Empty: they all run in
/// this program.
void set_rank_program(std::string path,
                      std::function<void(const std::string& folder)> enter_folder);
/// The program set_rank_program set ("" when none).
const std::string& rank_program();
/// Enters `folder` as set_rank_program says (nothing when none is set).
void enter_folder(const std::string& folder);

namespace detail {
void run_ranks_json(mgpu::Cluster& cluster, const std::string& body,
                    const std::function<nlohmann::json(int rank)>& input_of);
nlohmann::json call_student_json(const std::string& name, const nlohmann::json& input);
}  // namespace detail

/// Runs the rank body registered as `body` on every rank of `cluster`; rank r gets input_of(r)
/// (anything nlohmann::json can write: a struct with NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE) and
/// nothing else. Every input is made here, before any rank starts.
template <class InputOf>
void run_ranks(mgpu::Cluster& cluster, const std::string& body, InputOf&& input_of) {
  detail::run_ranks_json(cluster, body, [&](int rank) { return nlohmann::json(input_of(rank)); });
}

/// Calls the student call registered as `name` on `input` and returns its value as T: in a
/// program of its own (the rank program) when this is a host program, else here. Its exceptions
/// come back with their kind (untrusted.hpp).
template <class T, class Input>
T call_student(const std::string& name, const Input& input) {
  nlohmann::json value = detail::call_student_json(name, nlohmann::json(input));
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw UnreadableResult("the value of student call '" + name +
                           "' could not be read back: " + e.what());
  }
}

}  // namespace mgpu::grade

/// Defines a student call: `MGPU_STUDENT_CALL("11_5.gpipe", Shape) { return gpipe(in.p, in.m); }`,
/// where `in` is the input read back as `Input` and the value returned is anything
/// nlohmann::json can write.
#define MGPU_STUDENT_CALL(name, Input)                                                      \
  static nlohmann::json MGPU_CASE_CAT(mgpu_call_fn_, __LINE__)(const Input&);               \
  static const ::mgpu::grade::StudentCallRegistrar MGPU_CASE_CAT(mgpu_call_reg_, __LINE__)( \
      name, [](const nlohmann::json& j) {                                                   \
        return MGPU_CASE_CAT(mgpu_call_fn_, __LINE__)(j.get<Input>());                      \
      });                                                                                   \
  static nlohmann::json MGPU_CASE_CAT(mgpu_call_fn_, __LINE__)([[maybe_unused]] const Input& in)

/// Defines a rank body: `MGPU_RANK_BODY("11_2.ring", RingInput) { ... rank, in ... }`, where
/// `rank` is the mgpu::Rank and `in` the rank's input, read back as `Input`.
#define MGPU_RANK_BODY(name, Input)                                                        \
  static void MGPU_CASE_CAT(mgpu_rank_fn_, __LINE__)(::mgpu::Rank&, const Input&);         \
  static const ::mgpu::grade::RankBodyRegistrar MGPU_CASE_CAT(mgpu_rank_reg_, __LINE__)(   \
      name, [](::mgpu::Rank& r, const nlohmann::json& j) {                                 \
        MGPU_CASE_CAT(mgpu_rank_fn_, __LINE__)(r, j.get<Input>());                         \
      });                                                                                  \
  static void MGPU_CASE_CAT(mgpu_rank_fn_, __LINE__)([[maybe_unused]] ::mgpu::Rank & rank, \
                                                     [[maybe_unused]] const Input& in)
