// A rank program for test_rank_programs.cpp (Cluster::run_programs): what each rank does is named
// by the first argument. Every rank runs a fresh copy of this program and knows only its input.
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "mgpu/cluster.hpp"

#include "secret_scan.hpp"

namespace {

/// The input as floats (the sum test sends them as raw bytes).
std::vector<float> floats_of(std::string_view input) {
  std::vector<float> v(input.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), input.data(), v.size() * sizeof(float));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  return mgpu::serve_rank([&](mgpu::Rank& r, std::string_view input) {
    if (what == "sum") {
      std::vector<float> data = floats_of(input);
      r.world().all_reduce(std::span<float>(data), mgpu::ReduceOp::sum);
      r.publish("sum", data);
      std::vector<double> config{r.config().flops_per_second, double(r.world_size())};
      r.publish("config", config);
    } else if (what == "scan") {
      // How many different secrets this rank's own memory holds (its own is one).
      std::vector<double> found{double(mgpu::test::secrets_in_own_memory().size())};
      r.publish("secrets", found);
    } else if (what == "throw") {
      if (r.id() == 1) throw std::invalid_argument("rank 1 rejects its input");
      std::vector<float> one{1.0f};
      r.world().all_reduce(std::span<float>(one), mgpu::ReduceOp::sum);
    } else if (what == "crash") {
      if (r.id() == 1) std::raise(SIGSEGV);
      std::vector<float> one{1.0f};
      r.world().all_reduce(std::span<float>(one), mgpu::ReduceOp::sum);
    } else if (what == "deadlock") {
      std::vector<float> x(1);
      r.world().recv(std::span<float>(x), (r.id() + 1) % r.world_size(), 0);
    } else {
      throw std::logic_error("rank_program: unknown test '" + what + "'");
    }
  });
}
