// Lab allreduce_bw, harness: sweep, time, check. Each collective is one small entry of the
// table below (what to fill, how to call, what to expect), in the manner of nccl-tests.
#include "allreduce_bw/bench.hpp"

#include "allreduce_bw/ring.hpp"
#include "common/device_buffer.hpp"
#include "common/kernels.hpp"
#include "common/shard.hpp"
#include "common/timer.hpp"

#include <mgpu/not_implemented.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

namespace mgpu::gpu {

BwRow make_row(const std::string& op, std::size_t bytes, std::size_t count, DType type, double us,
               unsigned long long wrong, int ranks) {
  BwRow r{op, bytes, count, type, us, 0.0, 0.0, wrong, true, {}};
  if (us > 0.0) {
    r.algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    r.busbw = r.algbw * busbw_factor(op.c_str(), ranks);
  }
  return r;
}

std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes,
                                    std::size_t factor) {
  if (factor < 2 || min_bytes < 4 || max_bytes < min_bytes) {
    throw std::invalid_argument("size sweep " + std::to_string(min_bytes) + ".." +
                                std::to_string(max_bytes) + " x" + std::to_string(factor) +
                                ": need 4 <= min <= max and factor >= 2");
  }
  std::vector<std::size_t> out;
  for (std::size_t b = min_bytes; b <= max_bytes; b *= factor) {
    out.push_back(b);
    if (b > max_bytes / factor) break;
  }
  return out;
}

std::string format_header() {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "%-16s %12s %12s %9s %6s %10s %8s %8s %8s\n%-16s %12s %12s %9s %6s %10s %8s %8s %8s",
      "# collective", "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong", "#",
      "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  return buf;
}

std::string format_row(const BwRow& row) {
  char buf[256];
  if (!row.implemented) {
    std::snprintf(buf, sizeof buf, "%-16s %12zu %12zu %9s %6s %10s %8s %8s %8s", row.op.c_str(),
                  row.bytes, row.count, dtype_name(row.type), "sum", "-", "-", "-", "n/i");
  } else {
    std::snprintf(buf, sizeof buf, "%-16s %12zu %12zu %9s %6s %10.1f %8.2f %8.2f %8llu",
                  row.op.c_str(), row.bytes, row.count, dtype_name(row.type), "sum", row.us,
                  row.algbw, row.busbw, row.wrong);
  }
  return buf;
}

namespace {

// One collective in the sweep: buffers of `in` and `out` floats, how to fill the input, how to
// call it, and what the output must be (see fill_pattern / count_wrong in common/kernels.hpp).
struct Case {
  const char* op;
  std::size_t in, out, bytes, count;
  std::function<void(float* in)> fill;
  std::function<void(const float* in, float* out)> call;
  std::function<void(const float* out, unsigned long long* wrong)> check;
};

Case make_case(DeviceComm& comm, const std::string& op, std::size_t bytes, float* scratch) {
  const std::size_t n = static_cast<std::size_t>(comm.size()),
                    r = static_cast<std::size_t>(comm.rank());
  const float mine = static_cast<float>(r + 1), total = static_cast<float>(n * (n + 1) / 2);
  cudaStream_t s = comm.stream();
  const std::size_t count = bytes / 4;
  if (op == "all_reduce") {
    return {"all_reduce",
            count,
            count,
            count * 4,
            count,
            [=](float* in) { fill_pattern(in, count, mine, 0, s); },
            [&comm, count](const float* in, float* out) {
              comm.all_reduce(in, out, count, DType::f32);
            },
            [=](const float* out, unsigned long long* w) {
              count_wrong(out, count, total, 0, 0, w, s);
            }};
  }
  if (op == "ring_all_reduce") {
    return {"ring_all_reduce",
            count,
            count,
            count * 4,
            count,
            [=](float* in) { fill_pattern(in, count, mine, 0, s); },
            [&comm, count, scratch](const float* in, float*) {
              ring_all_reduce(comm, const_cast<float*>(in), count, scratch);  // in place
            },
            [=](const float* out, unsigned long long* w) {
              count_wrong(out, count, total, 0, 0, w, s);
            }};
  }
  const std::size_t block = count / n;  // per-rank block; sizes are rounded down to n blocks
  if (op == "all_gather") {
    return {"all_gather",
            block,
            block * n,
            block * n * 4,
            block * n,
            [=](float* in) { fill_pattern(in, block, mine, r * block, s); },
            [&comm, block](const float* in, float* out) {
              comm.all_gather(in, out, block, DType::f32);
            },
            [=](const float* out, unsigned long long* w) {
              count_wrong(out, block * n, 0, 0, block, w, s);
            }};
  }
  if (op == "reduce_scatter") {
    return {"reduce_scatter",
            block * n,
            block,
            block * n * 4,
            block * n,
            [=](float* in) { fill_pattern(in, block * n, mine, 0, s); },
            [&comm, block](const float* in, float* out) {
              comm.reduce_scatter(in, out, block, DType::f32);
            },
            [=](const float* out, unsigned long long* w) {
              count_wrong(out, block, total, r * block, 0, w, s);
            }};
  }
  throw std::invalid_argument("unknown collective " + op);
}

// kSamplePoints evenly spaced elements of a device result, the last one included.
std::vector<double> sample_result(const float* result, std::size_t count, cudaStream_t s) {
  const std::size_t n = std::min(count, kSamplePoints);
  std::vector<float> host(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = n == 1 ? 0 : k * (count - 1) / (n - 1);
    MGPU_CUDA_CHECK(
        cudaMemcpyAsync(&host[k], result + i, sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  MGPU_CUDA_CHECK(cudaStreamSynchronize(s));
  return {host.begin(), host.end()};
}

}  // namespace

std::vector<BwRow> run_sweep(DeviceComm& comm, const SweepOptions& o) {
  std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter"};
  if (o.ring) ops.push_back("ring_all_reduce");
  const std::vector<std::size_t> sizes = size_sweep(o.min_bytes, o.max_bytes, o.factor);
  const std::size_t largest = sizes.back() / 4;
  MemoryLedger& led = comm.ledger();
  DeviceBuffer<float> in(led, Category::comm, largest), out(led, Category::comm, largest);
  DeviceBuffer<float> scratch(led, Category::comm,
                              largest / static_cast<std::size_t>(comm.size()) + 1);
  DeviceBuffer<float> stats(led, Category::comm, 2);  // time, wrong, summed over ranks
  DeviceBuffer<unsigned long long> wrong(led, Category::comm, 1);
  cudaStream_t s = comm.stream();
  std::vector<BwRow> rows;
  for (const std::string& op : ops) {
    for (std::size_t bytes : sizes) {
      Case c = make_case(comm, op, bytes, scratch.data());
      if (c.count == 0) continue;
      try {
        // Check on a fresh input first: the ring works in place, so later calls change the data.
        c.fill(in.data());
        c.call(in.data(), out.data());
        const float* result = op == "ring_all_reduce" ? in.data() : out.data();
        wrong.zero(s);
        c.check(result, wrong.data());
        // Every copy to the host waits through the communicator first: a plain stream wait (or a
        // copy into pageable memory, which is one) would hang on a dead peer instead of failing.
        comm.synchronize();
        std::vector<double> sample;
        if (op == "ring_all_reduce") sample = sample_result(result, c.count, s);
        const int iters = bytes > (16u << 20) ? std::max(2, o.iters / 4) : o.iters;
        const double ms = time_per_call(
            s, o.warmup, iters, [&] { c.call(in.data(), out.data()); }, [&] { comm.barrier(); },
            [&] { comm.synchronize(); });
        const auto us = static_cast<float>(ms * 1000.0);
        comm.synchronize();
        const unsigned long long wrong_host = wrong.download(s)[0];
        // Average the time and add up #wrong over ranks with the communicator itself.
        const float local[2] = {us, static_cast<float>(wrong_host)};
        MGPU_CUDA_CHECK(
            cudaMemcpyAsync(stats.data(), local, sizeof local, cudaMemcpyHostToDevice, s));
        comm.all_reduce(stats.data(), stats.data(), 2, DType::f32);
        comm.synchronize();
        float summed[2] = {0, 0};
        MGPU_CUDA_CHECK(
            cudaMemcpyAsync(summed, stats.data(), sizeof summed, cudaMemcpyDeviceToHost, s));
        MGPU_CUDA_CHECK(cudaStreamSynchronize(s));
        rows.push_back(make_row(op, c.bytes, c.count, DType::f32,
                                summed[0] / static_cast<float>(comm.size()),
                                static_cast<unsigned long long>(summed[1]), comm.size()));
        rows.back().sample = std::move(sample);
      } catch (const mgpu::NotImplemented&) {
        // Every rank throws at the same call before any communication, so all skip together.
        BwRow row = make_row(op, c.bytes, c.count, DType::f32, 0.0, 0, comm.size());
        row.implemented = false;
        rows.push_back(row);
      }
    }
  }
  return rows;
}

}  // namespace mgpu::gpu
