// Lab tp_ffn, harness: buffers, check, timing and baselines (see lab.hpp).
#include "tp_ffn/lab.hpp"

#include "common/kernels.hpp"
#include "common/lab_main.hpp"
#include "common/report.hpp"
#include "common/timer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mgpu::gpu {

double ffn_step_flops(const FfnShape& s, int ranks) {
  return 6.0 * gemm_flops(s.tokens, s.d, static_cast<double>(s.f) / ranks);
}

void validate_shape(const FfnShape& s, int ranks, const std::string& what) {
  if (s.tokens <= 0 || s.d <= 0 || s.f <= 0 || ranks <= 0 || s.f % ranks != 0) {
    throw std::invalid_argument(what + " shape tokens=" + std::to_string(s.tokens) +
                                " d=" + std::to_string(s.d) + " f=" + std::to_string(s.f) + " on " +
                                std::to_string(ranks) +
                                " ranks: sizes must be positive and f divisible by the rank count");
  }
}

int fit_hidden_to_ranks(int f, int ranks, int align) {
  if (ranks <= 0 || align <= 0)
    throw std::invalid_argument("fit_hidden_to_ranks: ranks and align must be positive");
  if (f > 0 && f % ranks == 0) return f;
  const int step = ranks * align;
  const int fitted = f / step * step;
  if (fitted <= 0) {
    throw std::invalid_argument(
        "hidden width f=" + std::to_string(f) + " is too small for " + std::to_string(ranks) +
        " ranks: pass --f (and --check-f) as a multiple of " + std::to_string(step));
  }
  return fitted;
}

FfnProblem make_problem(const FfnShape& s, std::uint32_t seed) {
  FfnProblem p;
  p.shape = s;
  // Scaled so h, a and y stay of order one, where bf16 error is easiest to read.
  p.x = random_bf16_matrix(s.tokens, s.d, 1.0, seed);
  p.w1 = random_bf16_matrix(s.d, s.f, 1.0 / std::sqrt(s.d), seed + 1);
  p.w2 = random_bf16_matrix(s.f, s.d, 1.0 / std::sqrt(s.f), seed + 2);
  p.dy = random_bf16_matrix(s.tokens, s.d, 1.0, seed + 3);
  MatD h(s.tokens, s.f);
  p.y.resize(s.tokens, s.d);
  ffn_forward_ref(p.x, p.w1, p.w2, h, p.y);
  p.dx.resize(s.tokens, s.d);
  p.dw1.resize(s.d, s.f);
  p.dw2.resize(s.f, s.d);
  ffn_backward_ref(p.x, p.w1, p.w2, p.dy, p.dx, p.dw1, p.dw2);
  return p;
}

namespace {

std::size_t sz(int a, int b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(b); }

// Every buffer of one rank for `s`; x, y, dy, dx are the replicated activations.
struct RankBuffers {
  TpFfnRank p;
  DeviceBuffer<bf16> x, y, dy, dx;
  RankBuffers(MemoryLedger& led, const FfnShape& s, int ranks) {
    const int fl = s.f / ranks;
    p.w1 = DeviceBuffer<bf16>(led, Category::weights, sz(s.d, fl));
    p.w2 = DeviceBuffer<bf16>(led, Category::weights, sz(fl, s.d));
    p.dw1 = DeviceBuffer<bf16>(led, Category::grads, sz(s.d, fl));
    p.dw2 = DeviceBuffer<bf16>(led, Category::grads, sz(fl, s.d));
    p.h = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, fl));
    p.a = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, fl));
    p.da = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, fl));
    x = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, s.d));
    y = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, s.d));
    dy = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, s.d));
    dx = DeviceBuffer<bf16>(led, Category::activations, sz(s.tokens, s.d));
  }
};

void upload(DeviceBuffer<bf16>& dst, const MatD& m, cudaStream_t s) {
  const std::vector<std::uint16_t> bits = to_bf16_bits(m);
  dst.upload_raw(bits.data(), bits.size() * sizeof(std::uint16_t), s);
}

MatD download(const DeviceBuffer<bf16>& src, int rows, int cols, cudaStream_t s) {
  std::vector<std::uint16_t> bits(src.size());
  src.download_raw(bits.data(), s);
  return from_bf16_bits(bits, rows, cols);
}

std::span<const double> flat(const MatD& m) {
  return {m.data(), static_cast<std::size_t>(m.size())};
}

}  // namespace

FfnRankResult tp_ffn_rank(DeviceComm& comm, const FfnProblem& problem, const FfnShape& perf,
                          int warmup, int iters) {
  const int t = comm.size(), r = comm.rank();
  cudaStream_t s = comm.stream();
  CublasHandle cublas(s);
  FfnRankResult out;
  {
    const FfnShape& cs = problem.shape;
    const int fl = cs.f / t;
    MemoryLedger scratch_ledger;  // the check's buffers are not part of the measured footprint
    RankBuffers b(scratch_ledger, cs, t);
    upload(b.p.w1, column_block(problem.w1, r * fl, fl), s);
    upload(b.p.w2, row_block(problem.w2, r * fl, fl), s);
    upload(b.x, problem.x, s);
    upload(b.dy, problem.dy, s);
    tp_ffn_forward(comm, cublas.get(), cs, b.p, b.x.data(), b.y.data());
    tp_ffn_backward(comm, cublas.get(), cs, b.p, b.x.data(), b.dy.data(), b.dx.data());
    comm.synchronize();
    out.y = download(b.y, cs.tokens, cs.d, s);
    out.dx = download(b.dx, cs.tokens, cs.d, s);
    out.dw1 = download(b.p.dw1, cs.d, fl, s);
    out.dw2 = download(b.p.dw2, fl, cs.d, s);
    const MatD want_dw1 = column_block(problem.dw1, r * fl, fl),
               want_dw2 = row_block(problem.dw2, r * fl, fl);
    const std::pair<const MatD*, const MatD*> pairs[] = {
        {&out.y, &problem.y}, {&out.dx, &problem.dx}, {&out.dw1, &want_dw1}, {&out.dw2, &want_dw2}};
    for (const auto& [got, want] : pairs) {
      out.err = worse_error(out.err, scaled_max_error(flat(*got), flat(*want)));
      out.err_norm = worse_error(out.err_norm, norm_rel_error(flat(*got), flat(*want)));
    }
  }
  RankBuffers b(comm.ledger(), perf, t);
  // Uniform values with about unit variance, as in the check. x and dy are replicated, so
  // every rank draws the same; the weight blocks differ per rank.
  const float w1_scale = 1.7f / std::sqrt(static_cast<float>(perf.d));
  const float w2_scale = 1.7f / std::sqrt(static_cast<float>(perf.f));
  const auto seed = static_cast<std::uint32_t>(r);
  fill_uniform(b.p.w1.data(), b.p.w1.size(), w1_scale, 1000u + 2u * seed, s);
  fill_uniform(b.p.w2.data(), b.p.w2.size(), w2_scale, 1001u + 2u * seed, s);
  fill_uniform(b.x.data(), b.x.size(), 1.7f, 7u, s);
  fill_uniform(b.dy.data(), b.dy.size(), 1.7f, 8u, s);
  auto step = [&] {
    tp_ffn_forward(comm, cublas.get(), perf, b.p, b.x.data(), b.y.data());
    tp_ffn_backward(comm, cublas.get(), perf, b.p, b.x.data(), b.dy.data(), b.dx.data());
  };
  out.ms = time_rank_steps(comm, warmup, iters, step);
  comm.synchronize();
  out.memory = comm.ledger();
  return out;
}

FfnBaseline ffn_baselines(const FfnShape& perf, int ranks, int warmup, int iters) {
  FfnBaseline out;
  DeviceCluster one({1, Backend::emulated});
  one.run([&](DeviceComm& comm) {
    cudaStream_t s = comm.stream();
    CublasHandle cublas(s);
    {
      // The six GEMMs of one rank's shapes, with nothing between them.
      RankBuffers b(comm.ledger(), perf, ranks);
      for (DeviceBuffer<bf16>* buf : {&b.p.w1, &b.p.w2, &b.x, &b.dy, &b.p.a}) {
        fill_uniform(buf->data(), buf->size(), 0.05f, 7, s);
      }
      const int B = perf.tokens, d = perf.d, f = perf.f / ranks;
      auto gemms = [&] {
        const cublasHandle_t h = cublas.get();
        gemm(h, Trans::no, Trans::no, B, f, d, b.x.data(), b.p.w1.data(), b.p.h.data(),
             DType::bf16);
        gemm(h, Trans::no, Trans::no, B, d, f, b.p.a.data(), b.p.w2.data(), b.y.data(),
             DType::bf16);
        gemm(h, Trans::yes, Trans::no, f, d, B, b.p.a.data(), b.dy.data(), b.p.dw2.data(),
             DType::bf16);
        gemm(h, Trans::no, Trans::yes, B, f, d, b.dy.data(), b.p.w2.data(), b.p.da.data(),
             DType::bf16);
        gemm(h, Trans::yes, Trans::no, d, f, B, b.x.data(), b.p.da.data(), b.p.dw1.data(),
             DType::bf16);
        gemm(h, Trans::no, Trans::yes, B, d, f, b.p.da.data(), b.p.w1.data(), b.dx.data(),
             DType::bf16);
      };
      out.gemm_ms = time_rank_steps(comm, warmup, iters, gemms);
    }
    RankBuffers b(comm.ledger(), perf, 1);
    for (DeviceBuffer<bf16>* buf : {&b.p.w1, &b.p.w2, &b.x, &b.dy})
      fill_uniform(buf->data(), buf->size(), 0.05f, 7, s);
    auto ffn = [&] {
      tp_ffn_forward(comm, cublas.get(), perf, b.p, b.x.data(), b.y.data());
      tp_ffn_backward(comm, cublas.get(), perf, b.p, b.x.data(), b.dy.data(), b.dx.data());
    };
    out.ffn_ms = time_rank_steps(comm, warmup, iters, ffn);
  });
  return out;
}

}  // namespace mgpu::gpu
