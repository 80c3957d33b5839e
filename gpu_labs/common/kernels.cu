// The CUDA kernels every lab shares. Each is a grid-stride loop: simple, fast enough for the
// memory-bound work here, and correct for any length.
#include "common/kernels.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace mgpu::gpu {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t count) {
  const std::size_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? (b == 0 ? 1 : b) : 65536);
}

struct Sources {
  const void* p[kMaxReduceInputs];
};

__device__ float load(const void* p, std::size_t i, DType t) {
  return t == DType::f32 ? static_cast<const float*>(p)[i]
                         : __bfloat162float(static_cast<const bf16*>(p)[i]);
}

__device__ void store(void* p, std::size_t i, float v, DType t) {
  if (t == DType::f32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<bf16*>(p)[i] = __float2bfloat16_rn(v);
  }
}

__global__ void reduce_sum_kernel(Sources src, int n_src, void* dst, std::size_t count, DType t) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n_src; ++j) acc += load(src.p[j], i, t);  // fixed order: deterministic
    store(dst, i, acc, t);
  }
}

__global__ void add_kernel(void* dst, const void* src, std::size_t count, DType t) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    store(dst, i, load(dst, i, t) + load(src, i, t), t);
  }
}

__global__ void accumulate_kernel(float* acc, const bf16* src, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    acc[i] += __bfloat162float(src[i]);
  }
}

__global__ void f32_to_bf16_kernel(const float* src, bf16* dst, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    dst[i] = __float2bfloat16_rn(src[i]);
  }
}

__global__ void bf16_to_f32_kernel(const bf16* src, float* dst, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    dst[i] = __bfloat162float(src[i]);
  }
}

__global__ void fill_uniform_kernel(bf16* x, std::size_t count, float scale, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    // splitmix64 finaliser: a good hash of the index is all a timing run needs.
    unsigned long long z = (static_cast<unsigned long long>(seed) << 32) ^ i;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x[i] = __float2bfloat16_rn(scale * (2.0f * u - 1.0f));
  }
}

__device__ float pattern(std::size_t i, std::size_t offset) {
  return static_cast<float>((i + offset) % 7 + 1);
}

__global__ void fill_pattern_kernel(float* x, std::size_t count, float factor, std::size_t offset) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    x[i] = factor * pattern(i, offset);
  }
}

__global__ void count_wrong_kernel(const float* y, std::size_t count, float factor,
                                   std::size_t offset, std::size_t segment,
                                   unsigned long long* wrong) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float f = segment == 0 ? factor : static_cast<float>(i / segment + 1);
    if (y[i] != f * pattern(i, offset)) ++local;
  }
  if (local != 0) atomicAdd(wrong, local);
}

__global__ void mse_grad_kernel(const bf16* y, const bf16* target, bf16* dy, std::size_t count,
                                float scale) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    dy[i] = __float2bfloat16_rn((__bfloat162float(y[i]) - __bfloat162float(target[i])) * scale);
  }
}

__global__ void adam_kernel(float* master, float* m, float* v, const bf16* grad, bf16* param,
                            std::size_t count, AdamConfig cfg, float c1, float c2) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float g = __bfloat162float(grad[i]);
    const float mi = cfg.beta1 * m[i] + (1.0f - cfg.beta1) * g;
    const float vi = cfg.beta2 * v[i] + (1.0f - cfg.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float w = master[i] - cfg.lr * (mi / c1) / (sqrtf(vi / c2) + cfg.eps);
    master[i] = w;
    param[i] = __float2bfloat16_rn(w);
  }
}

}  // namespace

void reduce_sum(const void* const* src, int n_src, void* dst, std::size_t count, DType type,
                cudaStream_t stream) {
  if (n_src < 1 || n_src > kMaxReduceInputs) {
    throw std::invalid_argument("reduce_sum: " + std::to_string(n_src) + " inputs; use 1.." +
                                std::to_string(kMaxReduceInputs));
  }
  Sources s{};
  for (int j = 0; j < n_src; ++j) s.p[j] = src[j];
  reduce_sum_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, n_src, dst, count, type);
  MGPU_CUDA_CHECK_LAUNCH();
}

void add_inplace(void* dst, const void* src, std::size_t count, DType type, cudaStream_t stream) {
  add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, src, count, type);
  MGPU_CUDA_CHECK_LAUNCH();
}

void accumulate_f32(float* acc, const bf16* src, std::size_t count, cudaStream_t stream) {
  accumulate_kernel<<<blocks_for(count), kThreads, 0, stream>>>(acc, src, count);
  MGPU_CUDA_CHECK_LAUNCH();
}

void f32_to_bf16(const float* src, bf16* dst, std::size_t count, cudaStream_t stream) {
  f32_to_bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, dst, count);
  MGPU_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(const bf16* src, float* dst, std::size_t count, cudaStream_t stream) {
  bf16_to_f32_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, dst, count);
  MGPU_CUDA_CHECK_LAUNCH();
}

void fill_uniform(bf16* x, std::size_t count, float scale, std::uint32_t seed,
                  cudaStream_t stream) {
  fill_uniform_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, count, scale, seed);
  MGPU_CUDA_CHECK_LAUNCH();
}

void fill_pattern(float* x, std::size_t count, float factor, std::size_t offset,
                  cudaStream_t stream) {
  fill_pattern_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, count, factor, offset);
  MGPU_CUDA_CHECK_LAUNCH();
}

void count_wrong(const float* y, std::size_t count, float factor, std::size_t offset,
                 std::size_t segment, unsigned long long* wrong, cudaStream_t stream) {
  count_wrong_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, count, factor, offset, segment,
                                                                 wrong);
  MGPU_CUDA_CHECK_LAUNCH();
}

void mse_grad(const bf16* y, const bf16* target, bf16* dy, std::size_t count, float scale,
              cudaStream_t stream) {
  mse_grad_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, target, dy, count, scale);
  MGPU_CUDA_CHECK_LAUNCH();
}

void adam_step(float* master, float* m, float* v, const bf16* grad, bf16* param, std::size_t count,
               const AdamConfig& cfg, int step, cudaStream_t stream) {
  if (step < 1)
    throw std::invalid_argument("adam_step: step " + std::to_string(step) + "; steps count from 1");
  const float c1 = 1.0f - std::pow(cfg.beta1, static_cast<float>(step));
  const float c2 = 1.0f - std::pow(cfg.beta2, static_cast<float>(step));
  adam_kernel<<<blocks_for(count), kThreads, 0, stream>>>(master, m, v, grad, param, count, cfg, c1,
                                                          c2);
  MGPU_CUDA_CHECK_LAUNCH();
}

}  // namespace mgpu::gpu
