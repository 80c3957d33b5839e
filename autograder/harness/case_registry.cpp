// The case registry and the value recording behind Ctx. Kept free of any judgement: a case
// program only reports numbers; the grader decides what they are worth.
#include "case.hpp"

#include <cmath>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mgpu::grade {
namespace {

struct Registered {
  CaseFn fn = nullptr;
  bool isolated = false;
};

std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> cases;
  return cases;
}

// FNV-1a: a stable hash of the case name, so two cases never share a stream of inputs.
std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The names the rubric's tolerances are keyed by.
const char* dtype_name(DType d) {
  switch (d) {
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "fp32";
    case DType::f64:
      return "fp64";
  }
  return "fp64";
}

// JSON encoding of one number that keeps NaN and infinities ("nan", "inf", "-inf").
nlohmann::json encode_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

}  // namespace

Ctx::Ctx(std::string case_name, std::uint64_t seed)
    : result_(std::make_unique<nlohmann::json>(nlohmann::json{
          {"values", nlohmann::json::object()}, {"measures", nlohmann::json::object()}})) {
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(name_hash(case_name)),
                    static_cast<std::uint32_t>(name_hash(case_name) >> 32)};
  rng_.seed(seq);
}

Ctx::~Ctx() = default;

const nlohmann::json& Ctx::result() const { return *result_; }

int Ctx::uniform_int(int lo, int hi) {
  if (lo > hi)
    throw std::invalid_argument("uniform_int: lo " + std::to_string(lo) + " > hi " +
                                std::to_string(hi));
  return std::uniform_int_distribution<int>(lo, hi)(rng_);
}

double Ctx::uniform_real(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng_);
}

std::vector<double> Ctx::normal_vector(std::size_t n, double stddev) {
  std::normal_distribution<double> d(0.0, stddev);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng_);
  return v;
}

double Ctx::log_uniform(double lo, double hi) {
  if (!(lo > 0 && hi > lo)) throw std::invalid_argument("log_uniform: need 0 < lo < hi");
  return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng_));
}

Eigen::MatrixXd Ctx::normal_matrix(Eigen::Index rows, Eigen::Index cols, double stddev) {
  std::normal_distribution<double> d(0.0, stddev);
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index c = 0; c < cols; ++c) m(r, c) = d(rng_);
  return m;
}

void Ctx::emit(const std::string& name, double value, DType dtype) {
  if ((*result_)["values"].contains(name))
    throw std::logic_error("case emitted '" + name + "' twice: give each value its own name");
  (*result_)["values"][name] = {{"dtype", dtype_name(dtype)}, {"data", encode_number(value)}};
}

void Ctx::emit(const std::string& name, const std::vector<double>& values, DType dtype) {
  if ((*result_)["values"].contains(name))
    throw std::logic_error("case emitted '" + name + "' twice: give each value its own name");
  nlohmann::json data = nlohmann::json::array();
  for (double v : values) data.push_back(encode_number(v));
  (*result_)["values"][name] = {{"dtype", dtype_name(dtype)}, {"data", std::move(data)}};
}

void Ctx::emit_per_rank(const std::string& name, const std::vector<double>& values, DType dtype) {
  emit(name, values, dtype);
  (*result_)["values"][name]["index"] = "rank";
}

void Ctx::measure(const std::string& name, double value) {
  (*result_)["measures"][name] = encode_number(value);
}

CaseRegistrar::CaseRegistrar(const char* name, CaseFn fn, bool isolated) {
  if (!registry().emplace(name, Registered{fn, isolated}).second)
    throw std::logic_error(std::string("two graded cases are named '") + name + "': rename one");
}

CaseFn find_case(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second.fn;
}

bool case_isolated(const std::string& name) {
  auto it = registry().find(name);
  return it != registry().end() && it->second.isolated;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& [n, entry] : registry()) names.push_back(n);
  return names;
}

}  // namespace mgpu::grade
