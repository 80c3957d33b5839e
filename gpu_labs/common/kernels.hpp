// Host entry points of the small CUDA kernels every lab shares (kernels.cu): reductions for the
// emulated backend and the ring, conversions, fill/check patterns, the loss gradient and Adam.
// Every function only enqueues work on `stream`; none synchronises.
#pragma once

#include "common/check.hpp"
#include "common/dtype.hpp"

#include <cstddef>
#include <cstdint>

namespace mgpu::gpu {

/// Most buffers reduce_sum accepts at once (the emulated backend's largest rank count).
inline constexpr int kMaxReduceInputs = 16;

/// dst[i] = sum over j = 0..n_src-1, in that order, of src[j][i], accumulated in fp32 and
/// rounded once to `type`: the same answer on every run and every rank.
void reduce_sum(const void* const* src, int n_src, void* dst, std::size_t count, DType type,
                cudaStream_t stream);

/// dst[i] += src[i] (fp32 accumulate, rounded once for bf16).
void add_inplace(void* dst, const void* src, std::size_t count, DType type, cudaStream_t stream);

/// acc[i] += float(src[i]): gradient accumulation over micro-batches, in fp32.
void accumulate_f32(float* acc, const bf16* src, std::size_t count, cudaStream_t stream);

/// dst[i] = bf16(src[i]) (round to nearest even).
void f32_to_bf16(const float* src, bf16* dst, std::size_t count, cudaStream_t stream);

/// dst[i] = float(src[i]).
void bf16_to_f32(const bf16* src, float* dst, std::size_t count, cudaStream_t stream);

/// x[i] uniform in [-scale, scale], from a hash of (seed, i): fast random data for timing runs,
/// identical for the same seed on any device.
void fill_uniform(bf16* x, std::size_t count, float scale, std::uint32_t seed, cudaStream_t stream);

/// The test pattern of the bandwidth lab: x[i] = factor * ((i + offset) % 7 + 1). Small
/// integers, so sums over up to thousands of ranks are exact in fp32.
void fill_pattern(float* x, std::size_t count, float factor, std::size_t offset,
                  cudaStream_t stream);

/// Adds to *wrong (device counter) the number of i where y[i] != expect(i), with
/// expect(i) = f(i) * ((i + offset) % 7 + 1) and f(i) = factor if segment == 0, else
/// (i / segment + 1) (the all-gather layout, rank r's block scaled by r + 1).
void count_wrong(const float* y, std::size_t count, float factor, std::size_t offset,
                 std::size_t segment, unsigned long long* wrong, cudaStream_t stream);

/// dy[i] = (y[i] - target[i]) * scale: gradient of 0.5 * scale * sum (y - target)^2.
void mse_grad(const bf16* y, const bf16* target, bf16* dy, std::size_t count, float scale,
              cudaStream_t stream);

/// Adam hyper-parameters (Kingma & Ba 2015), with bias correction.
struct AdamConfig {
  float lr = 1e-3f;      ///< learning rate
  float beta1 = 0.9f;    ///< first-moment decay
  float beta2 = 0.999f;  ///< second-moment decay
  float eps = 1e-8f;     ///< added to sqrt(v) for stability
};

/// One Adam step (step counts from 1) on an fp32 master slice from a bf16 gradient slice:
/// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; master -= lr mhat / (sqrt(vhat) + eps);
/// then param = bf16(master). `count` elements of each.
void adam_step(float* master, float* m, float* v, const bf16* grad, bf16* param, std::size_t count,
               const AdamConfig& cfg, int step, cudaStream_t stream);

}  // namespace mgpu::gpu
