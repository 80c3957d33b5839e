// The course model assembled from its layers (see mgpu/model/model.hpp): layout of the flat
// parameter buffer, initialisation, synthetic data, and unit-by-unit forward and backward that
// charge FLOPs to the rank's clock and keep saved activations in its ledger.
#include "mgpu/model/model.hpp"

#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mgpu::model {

namespace {

using RowVecMap = Eigen::Map<Eigen::RowVectorXf>;
using ConstRowVecMap = Eigen::Map<const Eigen::RowVectorXf>;

void require_positive(std::int64_t value, const char* field) {
  if (value < 1) {
    throw std::invalid_argument(std::string("ModelConfig.") + field + " = " +
                                std::to_string(value) + " must be at least 1");
  }
}

void require_size(std::size_t have, std::size_t want, const std::string& what) {
  if (have != want) {
    throw std::invalid_argument(what + " holds " + std::to_string(have) + " values, expected " +
                                std::to_string(want));
  }
}

Buffer<float> activation(Rank& rank, std::size_t count, const std::string& label) {
  return Buffer<float>(rank.memory(), Category::activations, count, label);
}

// The checks every backward (whole, or its input half) makes of the cache it is given.
void require_saved_forward(const std::string& who, const std::string& unit, const UnitCache& cache,
                           bool needs_core) {
  if (!cache.filled) {
    throw std::logic_error(who + ": the cache of " + unit +
                           " is empty; run unit_forward with a cache first (or recompute it)");
  }
  if (cache.weight_pending) {
    throw std::logic_error(who + ": the input gradient of " + unit +
                           " was already computed (unit_backward_input) and its weight half is "
                           "pending; run unit_backward_weight on this cache first");
  }
  if (needs_core && (cache.p.empty() || cache.o.empty())) {
    throw std::logic_error(
        who + ": " + unit +
        " was saved without its attention core (Save::without_attention_core); rebuild "
        "cache.p and cache.o from cache.q, k, v with attention_core_forward first");
  }
}

Buffer<float> copy_activation(Rank& rank, std::span<const float> from, const std::string& label) {
  Buffer<float> to = activation(rank, from.size(), label);
  std::copy(from.begin(), from.end(), to.begin());
  return to;
}

// One unit's tensors as views of its slice of the flat buffer: `t` its first tensor, `base` the
// unit's first element; weights and biases view the unit's parameters, dweight and dbias its
// gradients.
struct UnitTensors {
  const TensorInfo* t;
  std::size_t base;

  ConstMatrixMap<float> weight(std::span<const float> params, int i) const {
    return as_matrix(params, static_cast<std::size_t>(t[i].rows),
                     static_cast<std::size_t>(t[i].cols), t[i].offset - base);
  }
  ConstRowVecMap bias(std::span<const float> params, int i) const {
    return ConstRowVecMap(params.data() + (t[i].offset - base), t[i].cols);
  }
  MatrixMap<float> dweight(std::span<float> grads, int i) const {
    return as_matrix(grads, static_cast<std::size_t>(t[i].rows),
                     static_cast<std::size_t>(t[i].cols), t[i].offset - base);
  }
  RowVecMap dbias(std::span<float> grads, int i) const {
    return RowVecMap(grads.data() + (t[i].offset - base), t[i].cols);
  }
};

// A saved activation as a (rows, cols) matrix.
ConstMatrixMap<float> saved(const Buffer<float>& b, std::size_t rows, std::size_t cols) {
  return as_matrix(std::span<const float>(b.span()), rows, cols);
}

std::size_t width(std::int64_t w) { return static_cast<std::size_t>(w); }

// The checks of unit_forward's arguments: the unit's parameters, a cache that is not waiting for
// its weight half, an input of tokens x in_width, whole sequences.
void require_forward_args(const UnitInfo& info, std::size_t params, const UnitCache* cache,
                          std::size_t x_size, std::int64_t tokens, std::int64_t seq_len) {
  require_size(params, info.count, "Model::unit_forward: parameters of " + info.name);
  if (cache != nullptr && cache->weight_pending) {
    throw std::logic_error("Model::unit_forward: the cache of " + info.name +
                           " still waits for its weight half; run unit_backward_weight on it "
                           "before reusing it (its gradients would be lost)");
  }
  require_size(x_size, static_cast<std::size_t>(tokens * info.in_width),
               "Model::unit_forward: input of " + info.name);
  if (tokens % seq_len != 0) {
    throw std::invalid_argument("Model::unit_forward: " + std::to_string(tokens) +
                                " tokens is not a whole number of sequences of " +
                                std::to_string(seq_len));
  }
}

// A block's attention and its residual, X (n, d) -> local.mid (n, d), saving q, k, v, p and o.
void attention_part_forward(Rank& rank, const ModelConfig& c, const UnitTensors& ut,
                            std::span<const float> params, ConstMatrixMap<float> X, std::size_t n,
                            const std::string& name, UnitCache& local) {
  const std::size_t d = width(c.d_model), heads = width(c.n_heads), seq = width(c.seq_len);
  local.q = activation(rank, n * d, name + ".q");
  local.k = activation(rank, n * d, name + ".k");
  local.v = activation(rank, n * d, name + ".v");
  local.o = activation(rank, n * d, name + ".o");
  local.p = activation(rank, n * heads * seq, name + ".p");
  local.mid = activation(rank, n * d, name + ".mid");
  auto XM = as_matrix(local.mid.span(), n, d);
  const auto w = [&](int i) { return ut.weight(params, i); };
  attention_forward(X, c.seq_len, c.n_heads, c.causal, w(0), w(1), w(2), w(3),
                    as_matrix(local.q.span(), n, d), as_matrix(local.k.span(), n, d),
                    as_matrix(local.v.span(), n, d), as_matrix(local.p.span(), n * heads, seq),
                    as_matrix(local.o.span(), n, d), XM);
  XM += X;  // residual
}

// A block, x (n, d) -> Y (n, d): attention (when the model has it), then the FFN, each with its
// residual, saving into `local` what the backward needs under `save`.
void block_forward(Rank& rank, const ModelConfig& c, const UnitTensors& ut,
                   std::span<const float> params, std::span<const float> x, std::size_t n,
                   const std::string& name, Save save, UnitCache& local, MatrixMap<float> Y) {
  const std::size_t d = width(c.d_model), f = width(c.d_ff);
  int next = 0;
  std::span<const float> ffn_in = x;
  if (c.attention) {
    attention_part_forward(rank, c, ut, params, as_matrix(x, n, d), n, name, local);
    ffn_in = local.mid.span();
    next = 4;
  }
  local.h = activation(rank, n * f, name + ".h");
  local.a = activation(rank, n * f, name + ".a");
  const auto FI = as_matrix(ffn_in, n, d);
  ffn_forward(FI, ut.weight(params, next), ut.bias(params, next + 1), ut.weight(params, next + 2),
              ut.bias(params, next + 3), as_matrix(local.h.span(), n, f),
              as_matrix(local.a.span(), n, f), Y);
  Y += FI;  // residual
  if (save == Save::without_attention_core) {
    // The core is a function of q, k, v alone: drop it now, the caller rebuilds it for the
    // backward.
    local.p.reset();
    local.o.reset();
  }
}

// A block's backward from its saved forward: DY (n, d) -> DX (n, d), the gradients into `grads`.
void block_backward(const ModelConfig& c, const UnitTensors& ut, std::span<const float> params,
                    std::span<float> grads, const UnitCache& cache, std::size_t n,
                    ConstMatrixMap<float> DY, MatrixMap<float> DX) {
  const std::size_t d = width(c.d_model), f = width(c.d_ff);
  const int next = c.attention ? 4 : 0;
  const auto w = [&](int i) { return ut.weight(params, i); };
  const auto dw = [&](int i) { return ut.dweight(grads, i); };
  const auto FI = saved(c.attention ? cache.mid : cache.x, n, d);  // (tokens, d_model) FFN input
  // y = FI + ffn(FI): the residual passes dy straight through, the FFN adds its part.
  MatrixRM dmid(n, d);
  ffn_backward(FI, w(next), w(next + 2), saved(cache.h, n, f), saved(cache.a, n, f), DY, dmid,
               dw(next), ut.dbias(grads, next + 1), dw(next + 2), ut.dbias(grads, next + 3));
  dmid += DY;
  if (!c.attention) {
    DX = dmid;
    return;
  }
  const std::size_t heads = width(c.n_heads), seq = width(c.seq_len);
  attention_backward(saved(cache.x, n, d), c.seq_len, c.n_heads, w(0), w(1), w(2), w(3),
                     saved(cache.q, n, d), saved(cache.k, n, d), saved(cache.v, n, d),
                     saved(cache.p, n * heads, seq), saved(cache.o, n, d), dmid, DX, dw(0), dw(1),
                     dw(2), dw(3));
  DX += dmid;
}

// The input half of a block's backward: DY (n, d) -> DX (n, d), keeping in `cache` what the
// weight half needs (dh; with attention dq, dk, dv and dmid) and freeing what it does not.
void block_backward_input(Rank& rank, const ModelConfig& c, const UnitTensors& ut,
                          std::span<const float> params, UnitCache& cache, std::size_t n,
                          const std::string& name, ConstMatrixMap<float> DY, MatrixMap<float> DX) {
  const std::size_t d = width(c.d_model), f = width(c.d_ff);
  const int next = c.attention ? 4 : 0;
  const auto w = [&](int i) { return ut.weight(params, i); };
  cache.dh = activation(rank, n * f, name + ".dh");
  MatrixRM dmid(n, d);
  ffn_backward_input(w(next), w(next + 2), saved(cache.h, n, f), DY,
                     as_matrix(cache.dh.span(), n, f), dmid);
  cache.h.reset();  // GELU'(h) was its only use; the weight half reads a and dh
  dmid += DY;
  if (!c.attention) {
    DX = dmid;
    return;
  }
  const std::size_t heads = width(c.n_heads), seq = width(c.seq_len);
  cache.dq = activation(rank, n * d, name + ".dq");
  cache.dk = activation(rank, n * d, name + ".dk");
  cache.dv = activation(rank, n * d, name + ".dv");
  attention_backward_input(c.seq_len, c.n_heads, w(0), w(1), w(2), w(3), saved(cache.q, n, d),
                           saved(cache.k, n, d), saved(cache.v, n, d),
                           saved(cache.p, n * heads, seq), dmid, as_matrix(cache.dq.span(), n, d),
                           as_matrix(cache.dk.span(), n, d), as_matrix(cache.dv.span(), n, d), DX);
  DX += dmid;
  // q, k, v and p fed only the core's backward; Wo's gradient needs dmid (with o).
  for (Buffer<float>* b : {&cache.q, &cache.k, &cache.v, &cache.p}) b->reset();
  cache.dmid = copy_activation(rank, std::span<const float>(dmid.data(), n * d), name + ".dmid");
}

}  // namespace

// ------------------------------------------------------------------------------------ config,
// batch
void ModelConfig::validate() const {
  require_positive(d_in, "d_in");
  require_positive(d_model, "d_model");
  require_positive(d_ff, "d_ff");
  require_positive(n_layers, "n_layers");
  require_positive(n_heads, "n_heads");
  require_positive(seq_len, "seq_len");
  require_positive(d_out, "d_out");
  if (attention && d_model % n_heads != 0) {
    throw std::invalid_argument("ModelConfig: d_model = " + std::to_string(d_model) +
                                " is not divisible by n_heads = " + std::to_string(n_heads) +
                                "; pick a head count that divides it");
  }
}

Batch Batch::slice(std::int64_t first, std::int64_t count) const {
  if (first < 0 || count < 0 || first + count > sequences) {
    throw std::out_of_range("Batch::slice: sequences [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") are not inside a batch of " +
                            std::to_string(sequences));
  }
  Batch out;
  out.sequences = count;
  out.seq_len = seq_len;
  out.d_in = d_in;
  out.d_out = d_out;
  const auto t0 = static_cast<std::size_t>(first * seq_len),
             tn = static_cast<std::size_t>(count * seq_len);
  const auto din = static_cast<std::size_t>(d_in), dout = static_cast<std::size_t>(d_out);
  out.inputs.assign(inputs.begin() + static_cast<std::ptrdiff_t>(t0 * din),
                    inputs.begin() + static_cast<std::ptrdiff_t>((t0 + tn) * din));
  if (!targets.empty()) {
    out.targets.assign(targets.begin() + static_cast<std::ptrdiff_t>(t0 * dout),
                       targets.begin() + static_cast<std::ptrdiff_t>((t0 + tn) * dout));
  }
  if (!labels.empty()) {
    out.labels.assign(labels.begin() + static_cast<std::ptrdiff_t>(t0),
                      labels.begin() + static_cast<std::ptrdiff_t>(t0 + tn));
  }
  return out;
}

std::size_t UnitCache::bytes() const {
  std::size_t total = 0;
  for (const Buffer<float>* b :
       {&x, &q, &k, &v, &p, &o, &mid, &h, &a, &dy, &dh, &dmid, &dq, &dk, &dv})
    total += b->bytes();
  return total;
}

void UnitCache::clear() {
  for (Buffer<float>* b : {&x, &q, &k, &v, &p, &o, &mid, &h, &a, &dy, &dh, &dmid, &dq, &dk, &dv})
    b->reset();
  filled = false;
  weight_pending = false;
}

void zero(std::span<float> data) { std::fill(data.begin(), data.end(), 0.0f); }

// ------------------------------------------------------------------------------------ layout
Model::Model(const ModelConfig& config) : config_(config) {
  config_.validate();
  const std::int64_t d = config_.d_model, f = config_.d_ff;
  auto add_unit =
      [&](std::string name, std::int64_t in, std::int64_t out,
          std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> shapes) {
        UnitInfo info{name, num_params_, 0, in, out};
        first_tensor_.push_back(static_cast<int>(tensors_.size()));
        for (auto& [tname, rc] : shapes) {
          TensorInfo t{name + "." + tname, static_cast<int>(units_.size()), num_params_, rc.first,
                       rc.second};
          num_params_ += t.size();
          info.count += t.size();
          tensors_.push_back(std::move(t));
        }
        units_.push_back(std::move(info));
      };
  add_unit("embed", config_.d_in, d, {{"w", {config_.d_in, d}}, {"b", {1, d}}});
  for (std::int64_t l = 0; l < config_.n_layers; ++l) {
    std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> shapes;
    if (config_.attention) {
      shapes = {{"wq", {d, d}}, {"wk", {d, d}}, {"wv", {d, d}}, {"wo", {d, d}}};
    }
    shapes.insert(shapes.end(), {{"w1", {d, f}}, {"b1", {1, f}}, {"w2", {f, d}}, {"b2", {1, d}}});
    add_unit("block" + std::to_string(l), d, d, shapes);
  }
  add_unit("head", d, config_.d_out, {{"w", {d, config_.d_out}}, {"b", {1, config_.d_out}}});
}

const UnitInfo& Model::unit(int u) const {
  if (u < 0 || u >= num_units()) {
    throw std::out_of_range("Model::unit: unit " + std::to_string(u) + " is outside [0, " +
                            std::to_string(num_units()) + ")");
  }
  return units_[static_cast<std::size_t>(u)];
}

void Model::init_params(std::span<float> params, std::uint64_t seed) const {
  require_size(params.size(), num_params_, "Model::init_params: params");
  Rng rng(seed);
  const double residual_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(config_.n_layers));
  for (const TensorInfo& t : tensors_) {
    auto out = params.subspan(t.offset, t.size());
    if (t.rows == 1) {  // biases start at zero
      zero(out);
      continue;
    }
    double stddev = 1.0 / std::sqrt(static_cast<double>(t.rows));
    // Outputs added to the residual stream start small so the stack stays well scaled at init.
    if (t.name.ends_with(".wo") || t.name.ends_with(".w2")) stddev *= residual_scale;
    rng.fill_normal(out, stddev);
  }
}

Replica Model::make_replica(MemoryLedger& ledger, std::uint64_t seed) const {
  Replica r{Buffer<float>(ledger, Category::weights, num_params_, "params"),
            Buffer<float>(ledger, Category::grads, num_params_, "grads")};
  init_params(r.params.span(), seed);
  return r;
}

Batch Model::make_batch(std::int64_t sequences, std::uint64_t seed) const {
  if (sequences < 0)
    throw std::invalid_argument("Model::make_batch: sequences = " + std::to_string(sequences) +
                                " < 0");
  Batch b;
  b.sequences = sequences;
  b.seq_len = config_.seq_len;
  b.d_in = config_.d_in;
  b.d_out = config_.d_out;
  const std::int64_t n = b.tokens();
  b.inputs.resize(static_cast<std::size_t>(n * config_.d_in));
  Rng rng(seed);
  rng.fill_normal(b.inputs, 1.0);
  // The teacher is fixed (not drawn from `seed`), so every batch asks the same question.
  MatrixRM teacher(config_.d_in, config_.d_out);
  Rng(0x7eac4e5ULL)
      .fill_normal(std::span<float>(teacher.data(), static_cast<std::size_t>(teacher.size())),
                   1.0 / std::sqrt(static_cast<double>(config_.d_in)));
  const auto x = as_matrix(std::span<const float>(b.inputs), static_cast<std::size_t>(n),
                           static_cast<std::size_t>(config_.d_in));
  // Each token's target depends on itself and the running mean of its sequence so far.
  MatrixRM mixed(n, config_.d_in);
  for (std::int64_t s = 0; s < sequences; ++s) {
    Eigen::RowVectorXf sum = Eigen::RowVectorXf::Zero(config_.d_in);
    for (std::int64_t t = 0; t < config_.seq_len; ++t) {
      const std::int64_t row = s * config_.seq_len + t;
      sum += x.row(row);
      mixed.row(row) = x.row(row) + sum / static_cast<float>(t + 1);
    }
  }
  const MatrixRM z = mixed * teacher;  // (tokens, d_out)
  if (config_.loss == LossKind::mse) {
    b.targets.resize(static_cast<std::size_t>(z.size()));
    as_matrix(std::span<float>(b.targets), static_cast<std::size_t>(n),
              static_cast<std::size_t>(config_.d_out)) = z.array().tanh().matrix();
  } else {
    b.labels.resize(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < n; ++r) {
      Eigen::Index best = 0;
      z.row(r).maxCoeff(&best);
      b.labels[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(best);
    }
  }
  return b;
}

// ------------------------------------------------------------------------------------ FLOPs
double Model::unit_forward_flops(int u, std::int64_t tokens) const {
  const UnitInfo& info = unit(u);
  if (u == 0 || u == num_units() - 1) return linear_flops(tokens, info.in_width, info.out_width);
  double flops = ffn_flops(tokens, config_.d_model, config_.d_ff);
  if (config_.attention)
    flops += attention_flops(tokens, config_.seq_len, config_.d_model, config_.d_model);
  return flops;
}

double Model::unit_backward_weight_flops(int u, std::int64_t tokens) const {
  const UnitInfo& info = unit(u);
  if (u == 0 || u == num_units() - 1) return linear_flops(tokens, info.in_width, info.out_width);
  double flops = ffn_flops(tokens, config_.d_model, config_.d_ff);
  if (config_.attention) flops += 4.0 * linear_flops(tokens, config_.d_model, config_.d_model);
  return flops;
}

double Model::unit_backward_input_flops(int u, std::int64_t tokens) const {
  // Every linear layer's dX costs what its dW costs; the core, which has no weights, is all here.
  double flops = unit_backward_weight_flops(u, tokens);
  const bool is_block = u != 0 && u != num_units() - 1;
  if (is_block && config_.attention)
    flops += 2.0 * attention_core_flops(tokens, config_.seq_len, config_.d_model);
  return flops;
}

double Model::forward_flops(std::int64_t tokens) const {
  double total = 0.0;
  for (int u = 0; u < num_units(); ++u) total += unit_forward_flops(u, tokens);
  return total;
}

// ------------------------------------------------------------------------------------ forward
Buffer<float> Model::unit_forward(Rank& rank, int u, std::span<const float> unit_params,
                                  Buffer<float> x, std::int64_t tokens, UnitCache* cache,
                                  Save save) const {
  const UnitInfo& info = unit(u);
  require_forward_args(info, unit_params.size(), cache, x.size(), tokens, config_.seq_len);
  const auto n = static_cast<std::size_t>(tokens);
  const UnitTensors ut{&tensors_[width(first_tensor_[width(u)])], info.offset};

  Buffer<float> y = activation(rank, n * width(info.out_width), info.name + ".out");
  auto Y = as_matrix(y.span(), n, width(info.out_width));
  UnitCache local;  // filled below; handed to the caller's cache, or freed on return
  local.tokens = tokens;
  if (u == 0 || u == num_units() - 1) {
    const auto X = as_matrix(std::span<const float>(x.span()), n, width(info.in_width));
    linear_forward(X, ut.weight(unit_params, 0), ut.bias(unit_params, 1), Y);
  } else {
    block_forward(rank, config_, ut, unit_params, x.span(), n, info.name, save, local, Y);
  }
  rank.compute(unit_forward_flops(u, tokens), "fwd " + info.name);
  if (cache != nullptr) {
    local.x = std::move(x);
    local.filled = true;
    *cache = std::move(local);
  }
  return y;
}

// ------------------------------------------------------------------------------------ backward
Buffer<float> Model::unit_backward(Rank& rank, int u, std::span<const float> unit_params,
                                   std::span<float> unit_grads, UnitCache& cache,
                                   std::span<const float> dy) const {
  const UnitInfo& info = unit(u);
  require_size(unit_params.size(), info.count, "Model::unit_backward: parameters of " + info.name);
  require_size(unit_grads.size(), info.count, "Model::unit_backward: gradients of " + info.name);
  const bool is_block = u != 0 && u != num_units() - 1;
  require_saved_forward("Model::unit_backward", info.name, cache, is_block && config_.attention);
  const auto n = static_cast<std::size_t>(cache.tokens);
  require_size(dy.size(), n * width(info.out_width), "Model::unit_backward: dy of " + info.name);
  const UnitTensors ut{&tensors_[width(first_tensor_[width(u)])], info.offset};

  Buffer<float> dx = activation(rank, n * width(info.in_width), info.name + ".dx");
  auto DX = as_matrix(dx.span(), n, width(info.in_width));
  const auto DY = as_matrix(dy, n, width(info.out_width));
  if (!is_block) {
    linear_backward(saved(cache.x, n, width(info.in_width)), ut.weight(unit_params, 0), DY, DX,
                    ut.dweight(unit_grads, 0), ut.dbias(unit_grads, 1));
  } else {
    block_backward(config_, ut, unit_params, unit_grads, cache, n, DY, DX);
  }
  rank.compute(2.0 * unit_forward_flops(u, cache.tokens), "bwd " + info.name);
  cache.clear();
  return dx;
}

// The two halves below repeat unit_backward's steps in its order (the layers' _input and _weight
// halves repeat their fused expressions), so input then weight gives unit_backward's bits.
Buffer<float> Model::unit_backward_input(Rank& rank, int u, std::span<const float> unit_params,
                                         UnitCache& cache, std::span<const float> dy) const {
  const UnitInfo& info = unit(u);
  require_size(unit_params.size(), info.count,
               "Model::unit_backward_input: parameters of " + info.name);
  const bool is_block = u != 0 && u != num_units() - 1;
  require_saved_forward("Model::unit_backward_input", info.name, cache,
                        is_block && config_.attention);
  const auto n = static_cast<std::size_t>(cache.tokens);
  require_size(dy.size(), n * width(info.out_width),
               "Model::unit_backward_input: dy of " + info.name);
  const UnitTensors ut{&tensors_[width(first_tensor_[width(u)])], info.offset};

  Buffer<float> dx = activation(rank, n * width(info.in_width), info.name + ".dx");
  auto DX = as_matrix(dx.span(), n, width(info.in_width));
  const auto DY = as_matrix(dy, n, width(info.out_width));
  // The caller may free dy on return; the weight half needs it (dW of the unit's last linear).
  cache.dy = copy_activation(rank, dy, info.name + ".dy");
  if (!is_block)
    linear_backward_input(ut.weight(unit_params, 0), DY, DX);
  else
    block_backward_input(rank, config_, ut, unit_params, cache, n, info.name, DY, DX);
  cache.weight_pending = true;
  rank.compute(unit_backward_input_flops(u, cache.tokens), "bwd-in " + info.name);
  return dx;
}

void Model::unit_backward_weight(Rank& rank, int u, std::span<float> unit_grads,
                                 UnitCache& cache) const {
  const UnitInfo& info = unit(u);
  require_size(unit_grads.size(), info.count,
               "Model::unit_backward_weight: gradients of " + info.name);
  if (!cache.weight_pending) {
    throw std::logic_error(
        "Model::unit_backward_weight: " + info.name +
        (cache.filled ? " has not run unit_backward_input on this cache; run it first (the weight "
                        "half needs the output gradients it keeps)"
                      : "'s cache is empty; run unit_forward and then unit_backward_input on it "
                        "first"));
  }
  const auto n = static_cast<std::size_t>(cache.tokens);
  const UnitTensors ut{&tensors_[width(first_tensor_[width(u)])], info.offset};
  const auto dweight = [&](int i) { return ut.dweight(unit_grads, i); };
  const auto dbias = [&](int i) { return ut.dbias(unit_grads, i); };

  const bool is_block = u != 0 && u != num_units() - 1;
  if (!is_block) {
    linear_backward_weight(saved(cache.x, n, width(info.in_width)),
                           saved(cache.dy, n, width(info.out_width)), dweight(0), dbias(1));
  } else {
    const std::size_t d = width(config_.d_model), f = width(config_.d_ff);
    const int next = config_.attention ? 4 : 0;
    ffn_backward_weight(saved(config_.attention ? cache.mid : cache.x, n, d), saved(cache.a, n, f),
                        saved(cache.dy, n, d), saved(cache.dh, n, f), dweight(next),
                        dbias(next + 1), dweight(next + 2), dbias(next + 3));
    if (config_.attention) {
      attention_backward_weight(saved(cache.x, n, d), saved(cache.o, n, d), saved(cache.dmid, n, d),
                                saved(cache.dq, n, d), saved(cache.dk, n, d), saved(cache.dv, n, d),
                                dweight(0), dweight(1), dweight(2), dweight(3));
    }
  }
  rank.compute(unit_backward_weight_flops(u, cache.tokens), "bwd-w " + info.name);
  cache.clear();
}

// ------------------------------------------------------------------------------------ loss
double Model::loss_value(std::span<const float> out, const Batch& batch) const {
  const auto n = static_cast<std::size_t>(batch.tokens()),
             c = static_cast<std::size_t>(config_.d_out);
  require_size(out.size(), n * c, "Model::loss_value: output");
  const auto Y = as_matrix(out, n, c);
  if (config_.loss == LossKind::mse)
    return mse_forward(Y, as_matrix(std::span<const float>(batch.targets), n, c));
  return cross_entropy_forward(Y, batch.labels);
}

double Model::loss_backward(std::span<const float> out, const Batch& batch, std::span<float> dout,
                            float scale) const {
  const auto n = static_cast<std::size_t>(batch.tokens()),
             c = static_cast<std::size_t>(config_.d_out);
  require_size(dout.size(), n * c, "Model::loss_backward: dout");
  const double loss = loss_value(out, batch);
  const auto Y = as_matrix(out, n, c);
  if (config_.loss == LossKind::mse) {
    mse_backward(Y, as_matrix(std::span<const float>(batch.targets), n, c), as_matrix(dout, n, c),
                 scale);
  } else {
    cross_entropy_backward(Y, batch.labels, as_matrix(dout, n, c), scale);
  }
  return loss;
}

// ------------------------------------------------------------------------------------ whole model
Buffer<float> Model::input(Rank& rank, const Batch& batch) const {
  require_size(batch.inputs.size(), static_cast<std::size_t>(batch.tokens() * config_.d_in),
               "Batch.inputs");
  Buffer<float> x = activation(rank, batch.inputs.size(), "input");
  std::copy(batch.inputs.begin(), batch.inputs.end(), x.begin());
  return x;
}

double Model::forward_backward(Rank& rank, std::span<const float> params, std::span<float> grads,
                               const Batch& batch, const GradsReadyHook& on_grads_ready) const {
  require_size(params.size(), num_params_, "Model::forward_backward: params");
  require_size(grads.size(), num_params_, "Model::forward_backward: grads");
  const std::int64_t tokens = batch.tokens();
  std::vector<UnitCache> caches(static_cast<std::size_t>(num_units()));
  Buffer<float> x = input(rank, batch);
  for (int u = 0; u < num_units(); ++u) {
    x = unit_forward(rank, u, unit_view(params, u), std::move(x), tokens,
                     &caches[static_cast<std::size_t>(u)]);
  }
  Buffer<float> d = activation(rank, x.size(), "dloss");
  const double loss = loss_backward(x.span(), batch, d.span());
  x.reset();
  for (int u = num_units() - 1; u >= 0; --u) {
    d = unit_backward(rank, u, unit_view(params, u), unit_view(grads, u),
                      caches[static_cast<std::size_t>(u)], d.span());
    if (on_grads_ready) on_grads_ready(u);
  }
  return loss;
}

double Model::evaluate(Rank& rank, std::span<const float> params, const Batch& batch) const {
  require_size(params.size(), num_params_, "Model::evaluate: params");
  Buffer<float> x = input(rank, batch);
  for (int u = 0; u < num_units(); ++u) {
    x = unit_forward(rank, u, unit_view(params, u), std::move(x), batch.tokens(), nullptr);
  }
  return loss_value(x.span(), batch);
}

// ------------------------------------------------------------------------------------ Adam
Adam::Adam(MemoryLedger& ledger, std::size_t count, const AdamConfig& config)
    : config_(config),
      m_(ledger, Category::optimizer, count, "adam.m"),
      v_(ledger, Category::optimizer, count, "adam.v") {}

void Adam::step(std::span<float> params, std::span<const float> grads) {
  require_size(params.size(), m_.size(), "Adam::step: params");
  ++steps_;
  adam_step(params, grads, m_.span(), v_.span(), steps_, config_);
}

}  // namespace mgpu::model
