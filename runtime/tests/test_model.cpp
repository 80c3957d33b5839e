// The course model as a whole: gradients of the full stack against finite differences,
// determinism, what the ledger and the clock see, and that training actually lowers the loss.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/tensor.hpp"

using namespace mgpu;
using namespace mgpu::model;

namespace {

// A two-block model small enough to check every gradient by finite differences.
ModelConfig small_config(LossKind loss, bool attention) {
  return ModelConfig{.d_in = 3,
                     .d_model = 8,
                     .d_ff = 12,
                     .n_layers = 2,
                     .n_heads = 2,
                     .seq_len = 3,
                     .d_out = 4,
                     .attention = attention,
                     .loss = loss};
}

}  // namespace

TEST_CASE("the whole model's gradient matches finite differences of its loss") {
  for (LossKind loss : {LossKind::mse, LossKind::cross_entropy}) {
    for (bool attention : {true, false}) {
      const Model net(small_config(loss, attention));
      const Batch batch = net.make_batch(2, 11);
      Cluster(1).run([&](Rank& r) {
        Replica rep = net.make_replica(r.memory(), 3);
        net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
        std::vector<float> params(rep.params.begin(), rep.params.end());
        double worst = 0.0, scale = 0.0;
        const float h = 1e-2f;
        for (std::size_t i = 0; i < params.size(); ++i) {
          const float keep = params[i];
          params[i] = keep + h;
          const double up = net.evaluate(r, params, batch);
          params[i] = keep - h;
          const double down = net.evaluate(r, params, batch);
          params[i] = keep;
          const double fd = (up - down) / (2.0 * h);
          worst = std::max(worst, std::abs(fd - rep.grads[i]));
          scale = std::max(scale, std::abs(fd));
        }
        std::printf("model (%s, attention=%d, %zu params): max |grad - fd| %.2e, relative %.2e\n",
                    loss == LossKind::mse ? "mse" : "cross-entropy", attention, params.size(),
                    worst, worst / scale);
        CHECK(worst / scale < 2e-3);
      });
    }
  }
}

TEST_CASE("the model is deterministic: same seed, same bits") {
  const Model net(small_config(LossKind::mse, true));
  std::vector<float> a(net.num_params()), b(net.num_params()), c(net.num_params());
  net.init_params(a, 5);
  net.init_params(b, 5);
  net.init_params(c, 6);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(net.make_batch(4, 1).inputs == net.make_batch(4, 1).inputs);
  CHECK(net.make_batch(4, 1).targets == net.make_batch(4, 1).targets);
  std::vector<std::vector<float>> grads(2);
  for (int run = 0; run < 2; ++run) {
    Cluster(1).run([&](Rank& r) {
      Replica rep = net.make_replica(r.memory(), 5);
      net.forward_backward(r, rep.params.span(), rep.grads.span(), net.make_batch(4, 1));
      grads[static_cast<std::size_t>(run)].assign(rep.grads.begin(), rep.grads.end());
    });
  }
  CHECK(grads[0] == grads[1]);
}

TEST_CASE("the layout is one contiguous range per unit, in forward order") {
  const Model net(small_config(LossKind::mse, true));
  CHECK(net.num_units() == 2 + 2);
  std::size_t next = 0;
  for (const UnitInfo& u : net.units()) {
    CHECK(u.offset == next);
    next += u.count;
  }
  CHECK(next == net.num_params());
  std::size_t t_next = 0;
  for (const TensorInfo& t : net.tensors()) {
    CHECK(t.offset == t_next);
    t_next += t.size();
  }
  CHECK(t_next == net.num_params());
}

TEST_CASE(
    "the ledger sees weights, grads, Adam state and activations, the clock sees 3x forward FLOPs") {
  const Model net(small_config(LossKind::mse, true));
  const Batch batch = net.make_batch(4, 2);
  Cluster cluster(1);
  std::size_t activations_after = 1;
  cluster.run([&](Rank& r) {
    Replica rep = net.make_replica(r.memory(), 1);
    Adam adam(r.memory(), net.num_params());
    net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
    adam.step(rep.params.span(), rep.grads.span());
    activations_after = r.memory().current(Category::activations);
  });
  const RankReport& rep = cluster.report(0);
  const std::size_t p = net.num_params() * sizeof(float);
  CHECK(rep.memory.peak(Category::weights) == p);
  CHECK(rep.memory.peak(Category::grads) == p);
  CHECK(rep.memory.peak(Category::optimizer) == 2 * p);
  CHECK(rep.memory.peak(Category::activations) > 0);
  CHECK(activations_after == 0);  // everything saved for backward was freed by backward
  const double flops = rep.clock.compute_time() * cluster.config().flops_per_second;
  std::printf("model step: %.0f FLOPs charged, forward %.0f, peak activations %zu bytes\n", flops,
              net.forward_flops(batch.tokens()), rep.memory.peak(Category::activations));
  CHECK(flops == doctest::Approx(3.0 * net.forward_flops(batch.tokens())));
}

TEST_CASE("an FFN-only model costs 6 FLOPs per weight per token (the 6ND rule)") {
  ModelConfig c = small_config(LossKind::mse, false);
  const Model net(c);
  std::size_t weights = 0;  // matrix entries only: biases cost no matmul FLOPs
  for (const TensorInfo& t : net.tensors()) weights += t.rows > 1 ? t.size() : 0;
  const std::int64_t tokens = 12;
  CHECK(3.0 * net.forward_flops(tokens) ==
        doctest::Approx(6.0 * static_cast<double>(weights) * tokens));
}

TEST_CASE("Adam training lowers the loss of the synthetic task") {
  for (LossKind loss : {LossKind::mse, LossKind::cross_entropy}) {
    ModelConfig c = small_config(loss, true);
    c.d_model = 16;
    c.d_ff = 32;
    const Model net(c);
    double first = 0, last = 0;
    Cluster(1).run([&](Rank& r) {
      Replica rep = net.make_replica(r.memory(), 1);
      Adam adam(r.memory(), net.num_params(), AdamConfig{.lr = 3e-3f});
      const Batch eval = net.make_batch(16, 999);
      first = net.evaluate(r, rep.params.span(), eval);
      for (int s = 0; s < 60; ++s) {
        zero(rep.grads.span());
        net.forward_backward(r, rep.params.span(), rep.grads.span(),
                             net.make_batch(16, static_cast<std::uint64_t>(s)));
        adam.step(rep.params.span(), rep.grads.span());
      }
      last = net.evaluate(r, rep.params.span(), eval);
    });
    std::printf("training (%s): held-out loss %.4f -> %.4f after 60 steps\n",
                loss == LossKind::mse ? "mse" : "cross-entropy", first, last);
    CHECK(last < 0.7 * first);
  }
}

TEST_CASE("SGD with momentum follows its update rule") {
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, 1.0f}, v = {0.0f, 0.0f};
  sgd_step(p, g, v, 0.1f, 0.9f);
  sgd_step(p, g, v, 0.1f, 0.9f);
  // buf = g, then 0.9 g + g = 1.9 g: p moves by 0.1 * 2.9 g in total.
  CHECK(p[0] == doctest::Approx(1.0 - 0.29 * 0.5));
  CHECK(p[1] == doctest::Approx(-2.0 - 0.29 * 1.0));
  CHECK_THROWS_AS(sgd_step(p, std::vector<float>{1.0f}, v, 0.1f), std::invalid_argument);
}

TEST_CASE("mixed-precision Adam keeps fp32 master weights and writes their bf16 rounding") {
  std::vector<float> master = {1.0f, -0.3f, 2.5f}, grads = {0.1f, -0.2f, 0.0f}, m(3), v(3),
                     ref = master;
  std::vector<float> m2(3), v2(3);
  std::vector<bf16> weights(3);
  adam_step_mixed(master, grads, m, v, 1, AdamConfig{}, weights);
  adam_step(ref, grads, m2, v2, 1, AdamConfig{});
  CHECK(master == ref);
  std::vector<float> widened(3);
  to_float(weights, widened);
  for (std::size_t i = 0; i < 3; ++i) CHECK(widened[i] == static_cast<float>(bf16(master[i])));
  CHECK_THROWS_AS(to_bf16(master, std::span<bf16>(weights).first(2)), std::invalid_argument);
}

TEST_CASE(
    "driving the units one by one (with a recomputed unit) gives forward_backward's gradients") {
  const Model net(small_config(LossKind::cross_entropy, true));
  const Batch batch = net.make_batch(3, 4);
  std::vector<float> whole, by_unit;
  Cluster(1).run([&](Rank& r) {
    Replica rep = net.make_replica(r.memory(), 9);
    net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
    whole.assign(rep.grads.begin(), rep.grads.end());

    zero(rep.grads.span());
    const std::span<const float> params = rep.params.span();
    std::vector<UnitCache> caches(static_cast<std::size_t>(net.num_units()));
    std::vector<float>
        block1_input;  // a checkpoint: block 1 runs without a cache and is recomputed
    Buffer<float> x = net.input(r, batch);
    for (int u = 0; u < net.num_units(); ++u) {
      const bool checkpointed = u == 2;
      if (checkpointed) block1_input.assign(x.begin(), x.end());
      x = net.unit_forward(r, u, net.unit_view(params, u), std::move(x), batch.tokens(),
                           checkpointed ? nullptr : &caches[static_cast<std::size_t>(u)]);
    }
    Buffer<float> d(r.memory(), Category::activations, x.size(), "dloss");
    net.loss_backward(x.span(), batch, d.span());
    for (int u = net.num_units() - 1; u >= 0; --u) {
      if (u == 2) {  // recompute the forward of the checkpointed unit, this time keeping its cache
        Buffer<float> again(r.memory(), Category::activations, block1_input.size(), "recompute");
        std::copy(block1_input.begin(), block1_input.end(), again.begin());
        net.unit_forward(r, u, net.unit_view(params, u), std::move(again), batch.tokens(),
                         &caches[2]);
      }
      d = net.unit_backward(r, u, net.unit_view(params, u), net.unit_view(rep.grads.span(), u),
                            caches[static_cast<std::size_t>(u)], d.span());
    }
    by_unit.assign(rep.grads.begin(), rep.grads.end());
  });
  CHECK(whole == by_unit);
}

TEST_CASE(
    "a block saved without its attention core keeps q, k, v and needs p, o rebuilt before its "
    "backward") {
  const Model net(small_config(LossKind::mse, true));
  const Batch batch = net.make_batch(2, 5);
  const std::int64_t n = batch.tokens();
  const auto d = static_cast<std::size_t>(net.config().d_model),
             seq = static_cast<std::size_t>(net.config().seq_len),
             heads = static_cast<std::size_t>(net.config().n_heads);
  std::vector<float> whole, selective;
  Cluster(1).run([&](Rank& r) {
    Replica rep = net.make_replica(r.memory(), 4);
    net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
    whole.assign(rep.grads.begin(), rep.grads.end());
    zero(rep.grads.span());

    const std::span<const float> params = rep.params.span();
    std::vector<UnitCache> caches(static_cast<std::size_t>(net.num_units()));
    Buffer<float> x = net.input(r, batch);
    for (int u = 0; u < net.num_units(); ++u)
      x = net.unit_forward(r, u, net.unit_view(params, u), std::move(x), n,
                           &caches[static_cast<std::size_t>(u)], Save::without_attention_core);
    const UnitCache& block = caches[1];
    CHECK(block.p.empty());
    CHECK(block.o.empty());
    CHECK(block.bytes() == static_cast<std::size_t>(n) *
                               (5 * d + 2 * static_cast<std::size_t>(net.config().d_ff)) * 4);
    Buffer<float> dy(r.memory(), Category::activations, x.size(), "dloss");
    net.loss_backward(x.span(), batch, dy.span());
    x.reset();
    for (int u = net.num_units() - 1; u >= 0; --u) {
      UnitCache& c = caches[static_cast<std::size_t>(u)];
      if (u >= 1 && u <= net.config().n_layers) {
        CHECK_THROWS_AS(net.unit_backward(r, u, net.unit_view(params, u),
                                          net.unit_view(rep.grads.span(), u), c, dy.span()),
                        std::logic_error);
        c.p = Buffer<float>(r.memory(), Category::activations,
                            static_cast<std::size_t>(n) * heads * seq, "p");
        c.o =
            Buffer<float>(r.memory(), Category::activations, static_cast<std::size_t>(n) * d, "o");
        const auto N = static_cast<std::size_t>(n);
        attention_core_forward(as_matrix(std::span<const float>(c.q.span()), N, d),
                               as_matrix(std::span<const float>(c.k.span()), N, d),
                               as_matrix(std::span<const float>(c.v.span()), N, d),
                               net.config().seq_len, net.config().n_heads, net.config().causal,
                               as_matrix(c.p.span(), N * heads, seq), as_matrix(c.o.span(), N, d));
      }
      dy = net.unit_backward(r, u, net.unit_view(params, u), net.unit_view(rep.grads.span(), u), c,
                             dy.span());
    }
    selective.assign(rep.grads.begin(), rep.grads.end());
    dy.reset();  // the embedding's dx, the last gradient
    CHECK(r.memory().current(Category::activations) == 0);
  });
  CHECK(whole == selective);
}
