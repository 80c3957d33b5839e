// Rank bodies: their registry, and run_ranks in the three ways a case program runs them (see
// rank_code.hpp).
#include "rank_code.hpp"

#include <map>
#include <stdexcept>
#include <utility>

namespace mgpu::grade {
namespace {

std::map<std::string, RankBodyFn>& bodies() {
  static std::map<std::string, RankBodyFn> registered;
  return registered;
}

std::map<std::string, StudentCallFn>& calls() {
  static std::map<std::string, StudentCallFn> registered;
  return registered;
}

std::string g_rank_program;
std::function<void(const std::string&)> g_enter_folder;

}  // namespace

RankBodyRegistrar::RankBodyRegistrar(const char* name, RankBodyFn fn) {
  if (!bodies().emplace(name, fn).second)
    throw std::logic_error(std::string("two rank bodies are named ") + name);
}

RankBodyFn find_rank_body(const std::string& name) {
  const auto it = bodies().find(name);
  return it == bodies().end() ? nullptr : it->second;
}

StudentCallRegistrar::StudentCallRegistrar(const char* name, StudentCallFn fn) {
  if (!calls().emplace(name, fn).second)
    throw std::logic_error(std::string("two student calls are named ") + name);
}

StudentCallFn find_student_call(const std::string& name) {
  const auto it = calls().find(name);
  return it == calls().end() ? nullptr : it->second;
}

void set_rank_program(std::string path,
                      std::function<void(const std::string& folder)> enter_folder) {
  g_rank_program = std::move(path);
  g_enter_folder = std::move(enter_folder);
}

const std::string& rank_program() { return g_rank_program; }

void enter_folder(const std::string& folder) {
  if (g_enter_folder) g_enter_folder(folder);
}

void detail::run_ranks_json(mgpu::Cluster& cluster, const std::string& body,
                            const std::function<nlohmann::json(int rank)>& input_of) {
  const int n = cluster.world_size();
  if (!g_rank_program.empty()) {
    mgpu::RankPrograms programs{g_rank_program, {"--rank-body", body}, {}, [](int rank) {
                                  enter_folder("rank" + std::to_string(rank));
                                }};
    for (int r = 0; r < n; ++r) {
      const std::vector<std::uint8_t> bytes = nlohmann::json::to_msgpack(input_of(r));
      programs.inputs.emplace_back(bytes.begin(), bytes.end());
    }
    cluster.run_programs(programs);
    return;
  }
  const RankBodyFn fn = find_rank_body(body);
  if (!fn) throw std::logic_error("this case program has no rank body named '" + body + "'");
  std::vector<nlohmann::json> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(input_of(r));
  cluster.run([&](mgpu::Rank& rank) { fn(rank, inputs[static_cast<std::size_t>(rank.id())]); });
}

nlohmann::json detail::call_student_json(const std::string& name, const nlohmann::json& input) {
  if (!g_rank_program.empty()) {
    const std::vector<std::uint8_t> bytes = nlohmann::json::to_msgpack(input);
    return detail::run_program(
        {g_rank_program, "--call", name}, [] { enter_folder("call"); },
        std::string(bytes.begin(), bytes.end()));
  }
  const StudentCallFn fn = find_student_call(name);
  if (!fn) throw std::logic_error("this case program has no student call named '" + name + "'");
  return fn(input);
}

}  // namespace mgpu::grade
