// Lab zero3, harness: data, setup, the step around the exercise, and the data-parallel baseline.
#include "zero3/lab.hpp"

#include "common/shard.hpp"

#include <Eigen/Core>

#include <cmath>
#include <random>

namespace mgpu::gpu {

namespace {

std::size_t sz(int a, int b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(b); }

float round_bf16(float v) { return static_cast<float>(Eigen::bfloat16(v)); }
std::uint16_t bits_bf16(float v) {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(v));
}

// Random bf16 values with a given scale, derived from the weights' distribution for speed.
void fill_random(DeviceBuffer<bf16>& b, float scale, std::uint32_t seed, cudaStream_t s) {
  fill_uniform(b.data(), b.size(), scale, seed, s);
}

}  // namespace

HostModel make_host_model(const Zero3Shape& shape, int ranks, std::uint32_t seed) {
  HostModel m;
  m.shape = shape;
  m.ranks = ranks;
  std::mt19937 gen(seed);
  std::normal_distribution<float> w(0.0f, 1.0f / std::sqrt(static_cast<float>(shape.d))),
      u(0.0f, 1.0f);
  m.weights.resize(static_cast<std::size_t>(shape.layers) * sz(shape.d, shape.d));
  for (float& v : m.weights) v = round_bf16(w(gen));
  const std::size_t rows = sz(ranks, shape.tokens);
  m.x.resize(rows * static_cast<std::size_t>(shape.d));
  m.target.resize(m.x.size());
  for (std::uint16_t& v : m.x) v = bits_bf16(u(gen));
  for (std::uint16_t& v : m.target) v = bits_bf16(u(gen));
  return m;
}

double zero3_params(const Zero3Shape& s) { return static_cast<double>(s.layers) * s.d * s.d; }

double zero3_step_flops(const Zero3Shape& s) {
  return 3.0 * s.layers * gemm_flops(s.tokens, s.d, s.d);
}

Zero3Setup::Zero3Setup(DeviceComm& comm, MemoryLedger& led, const Zero3Shape& shape,
                       const HostModel* model) {
  const int n = comm.size(), r = comm.rank();
  cudaStream_t s = comm.stream();
  const std::size_t dd = sz(shape.d, shape.d), act = sz(shape.tokens, shape.d);
  p.shape = shape;
  p.shard = padded_shard(dd, n);
  const std::size_t padded = p.shard * static_cast<std::size_t>(n);
  MGPU_CUDA_CHECK(cudaStreamCreateWithFlags(&p.side, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i) {
    MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&p.gathered_ready[i], cudaEventDisableTiming));
    MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&p.gathered_free[i], cudaEventDisableTiming));
  }
  MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&p.main_ready, cudaEventDisableTiming));
  for (int l = 0; l < shape.layers; ++l) {
    Zero3Layer layer;
    layer.param = DeviceBuffer<bf16>(led, Category::weights, p.shard);
    layer.grad = DeviceBuffer<bf16>(led, Category::grads, p.shard);
    layer.master = DeviceBuffer<float>(led, Category::master, p.shard);
    layer.adam_m = DeviceBuffer<float>(led, Category::optimizer, p.shard);
    layer.adam_v = DeviceBuffer<float>(led, Category::optimizer, p.shard);
    layer.adam_m.zero(s);
    layer.adam_v.zero(s);
    layer.grad.zero(s);
    if (model != nullptr) {
      // This rank's slice of W_l, zero past the end of the last shard.
      std::vector<float> shard(p.shard, 0.0f);
      const Chunk mine = padded_shard_range(dd, n, r);
      const float* w = model->weights.data() + static_cast<std::size_t>(l) * dd;
      for (std::size_t i = 0; i < mine.count; ++i) shard[i] = w[mine.offset + i];
      layer.master.upload(shard, s);
    } else {
      fill_random(layer.param, 1.7f / std::sqrt(static_cast<float>(shape.d)),
                  100u + static_cast<std::uint32_t>(l), s);
      bf16_to_f32(layer.param.data(), layer.master.data(), p.shard, s);
    }
    f32_to_bf16(layer.master.data(), layer.param.data(), p.shard, s);
    p.layers.push_back(std::move(layer));
  }
  for (int l = 0; l <= shape.layers; ++l) p.acts.emplace_back(led, Category::activations, act);
  p.target = DeviceBuffer<bf16>(led, Category::activations, act);
  p.dy = DeviceBuffer<bf16>(led, Category::activations, act);
  p.dx = DeviceBuffer<bf16>(led, Category::activations, act);
  for (DeviceBuffer<bf16>& g : p.gathered) {
    g = DeviceBuffer<bf16>(led, Category::comm, padded);
    g.zero(s);
  }
  p.full_grad = DeviceBuffer<bf16>(led, Category::comm, padded);
  p.full_grad.zero(s);  // the padding is never written and must add nothing
  if (model != nullptr) {
    const std::size_t off = static_cast<std::size_t>(r) * act;
    p.acts[0].upload_raw(model->x.data() + off, act * 2, s);
    p.target.upload_raw(model->target.data() + off, act * 2, s);
  } else {
    fill_random(p.acts[0], 1.7f, 7u + static_cast<std::uint32_t>(r), s);
    fill_random(p.target, 1.7f, 9u + static_cast<std::uint32_t>(r), s);
  }
  MGPU_CUDA_CHECK(cudaStreamSynchronize(s));
}

Zero3Setup::~Zero3Setup() {
  // A failing NCCL rank must not wait here for a prefetch a dead peer never serves.
  if (!rank_unwinding()) cudaDeviceSynchronize();
  for (int i = 0; i < 2; ++i) {
    cudaEventDestroy(p.gathered_ready[i]);
    cudaEventDestroy(p.gathered_free[i]);
  }
  cudaEventDestroy(p.main_ready);
  cudaStreamDestroy(p.side);
}

void zero3_train_step(DeviceComm& comm, cublasHandle_t cublas, Zero3Rank& p, bool prefetch,
                      const AdamConfig& adam, int step) {
  const Zero3Shape& s = p.shape;
  zero3_forward(comm, cublas, p, prefetch);
  const float scale = 1.0f / static_cast<float>(s.tokens * comm.size());
  mse_grad(p.acts.back().data(), p.target.data(), p.dy.data(), sz(s.tokens, s.d), scale,
           comm.stream());
  zero3_backward(comm, cublas, p, prefetch);
  zero3_optimizer_step(comm, p, adam, step);
}

std::vector<float> gather_master(DeviceComm& comm, Zero3Rank& p) {
  const std::size_t dd = sz(p.shape.d, p.shape.d);
  MemoryLedger scratch;  // not part of the training footprint
  DeviceBuffer<float> full(scratch, Category::comm,
                           p.shard * static_cast<std::size_t>(comm.size()));
  std::vector<float> out;
  for (Zero3Layer& layer : p.layers) {
    comm.all_gather(layer.master.data(), full.data(), p.shard, DType::f32);
    // Wait through the communicator, which gives up if another rank failed; the download's own
    // wait would block for ever on a gather that a dead peer never joins.
    comm.synchronize();
    const std::vector<float> host = full.download(comm.stream());
    out.insert(out.end(), host.begin(), host.begin() + static_cast<std::ptrdiff_t>(dd));
  }
  return out;
}

DpRank make_dp_rank(DeviceComm& comm, MemoryLedger& led, const Zero3Shape& shape, int micro,
                    const HostModel* model, int first_row) {
  cudaStream_t s = comm.stream();
  const std::size_t total = static_cast<std::size_t>(shape.layers) * sz(shape.d, shape.d);
  const std::size_t act = sz(shape.tokens, shape.d);
  DpRank p;
  p.shape = shape;
  p.micro = micro;
  p.params = DeviceBuffer<bf16>(led, Category::weights, total);
  p.grads = DeviceBuffer<bf16>(led, Category::grads, total);
  if (micro > 1) {
    p.grad_acc = DeviceBuffer<float>(led, Category::grads, total);
    p.grad_acc.zero(s);
  }
  p.master = DeviceBuffer<float>(led, Category::master, total);
  p.adam_m = DeviceBuffer<float>(led, Category::optimizer, total);
  p.adam_v = DeviceBuffer<float>(led, Category::optimizer, total);
  p.adam_m.zero(s);
  p.adam_v.zero(s);
  p.x = DeviceBuffer<bf16>(led, Category::activations, act * static_cast<std::size_t>(micro));
  p.target = DeviceBuffer<bf16>(led, Category::activations, act * static_cast<std::size_t>(micro));
  for (int l = 0; l < shape.layers; ++l) p.acts.emplace_back(led, Category::activations, act);
  p.dy = DeviceBuffer<bf16>(led, Category::activations, act);
  p.dx = DeviceBuffer<bf16>(led, Category::activations, act);
  if (model != nullptr) {
    p.master.upload(model->weights, s);
    const std::size_t off = static_cast<std::size_t>(first_row) * static_cast<std::size_t>(shape.d);
    p.x.upload_raw(model->x.data() + off, p.x.bytes(), s);
    p.target.upload_raw(model->target.data() + off, p.target.bytes(), s);
  } else {
    fill_random(p.params, 1.7f / std::sqrt(static_cast<float>(shape.d)), 100u, s);
    bf16_to_f32(p.params.data(), p.master.data(), total, s);
    fill_random(p.x, 1.7f, 7u + static_cast<std::uint32_t>(first_row), s);
    fill_random(p.target, 1.7f, 9u + static_cast<std::uint32_t>(first_row), s);
  }
  f32_to_bf16(p.master.data(), p.params.data(), total, s);
  MGPU_CUDA_CHECK(cudaStreamSynchronize(s));
  return p;
}

void dp_train_step(DeviceComm& comm, cublasHandle_t cublas, DpRank& p, const AdamConfig& adam,
                   int step, int global_rows, double* loss) {
  const int L = p.shape.layers, d = p.shape.d, b = p.shape.tokens;
  const std::size_t dd = sz(d, d), act = sz(b, d), total = static_cast<std::size_t>(L) * dd;
  cudaStream_t s = comm.stream();
  for (int m = 0; m < p.micro; ++m) {
    const bf16* x = p.x.data() + static_cast<std::size_t>(m) * act;
    const bf16* target = p.target.data() + static_cast<std::size_t>(m) * act;
    for (int l = 0; l < L; ++l) {
      const bf16* in = l == 0 ? x : p.acts[static_cast<std::size_t>(l - 1)].data();
      gemm(cublas, Trans::no, Trans::no, b, d, d, in,
           p.params.data() + static_cast<std::size_t>(l) * dd,
           p.acts[static_cast<std::size_t>(l)].data(), DType::bf16);
    }
    if (loss != nullptr) {
      comm.synchronize();  // earlier steps' all-reduces are on this stream too
      const std::vector<bf16> y = p.acts.back().download(s);
      std::vector<bf16> t(act);
      MGPU_CUDA_CHECK(
          cudaMemcpyAsync(t.data(), target, act * sizeof(bf16), cudaMemcpyDeviceToHost, s));
      MGPU_CUDA_CHECK(cudaStreamSynchronize(s));
      double sum = 0.0;
      for (std::size_t i = 0; i < act; ++i) {
        const double e = static_cast<double>(__bfloat162float(y[i])) -
                         static_cast<double>(__bfloat162float(t[i]));
        sum += e * e;
      }
      *loss += 0.5 * sum / global_rows;
    }
    mse_grad(p.acts.back().data(), target, p.dy.data(), act, 1.0f / static_cast<float>(global_rows),
             s);
    for (int l = L - 1; l >= 0; --l) {
      const bf16* in = l == 0 ? x : p.acts[static_cast<std::size_t>(l - 1)].data();
      const bf16* w = p.params.data() + static_cast<std::size_t>(l) * dd;
      gemm(cublas, Trans::yes, Trans::no, d, d, b, in, p.dy.data(),
           p.grads.data() + static_cast<std::size_t>(l) * dd, DType::bf16);
      gemm(cublas, Trans::no, Trans::yes, b, d, d, p.dy.data(), w, p.dx.data(), DType::bf16);
      std::swap(p.dy, p.dx);
    }
    if (p.micro > 1) accumulate_f32(p.grad_acc.data(), p.grads.data(), total, s);
  }
  if (p.micro > 1) {
    // One rounding to bf16 after an in-order fp32 sum: the same arithmetic as the emulated
    // reduce-scatter of N ranks' bf16 gradients, so the reference matches it closely.
    f32_to_bf16(p.grad_acc.data(), p.grads.data(), total, s);
    p.grad_acc.zero(s);
  }
  comm.all_reduce(p.grads.data(), p.grads.data(), total, DType::bf16);
  adam_step(p.master.data(), p.adam_m.data(), p.adam_v.data(), p.grads.data(), p.params.data(),
            total, adam, step, s);
}

}  // namespace mgpu::gpu
