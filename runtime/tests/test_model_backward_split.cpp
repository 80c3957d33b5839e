// A unit's backward split into its input half (B: dx, what the previous unit waits for) and its
// weight half (W: the weight and bias gradients, which can wait), as zero-bubble pipeline
// schedules run it. Checked against the whole unit_backward bit for bit, for every kind of unit;
// the FLOPs each half charges against counts written out here from the layer shapes; the bytes
// held between the halves against the contract's formulas; and the misuses that must throw.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/model/rng.hpp"
#include "mgpu/tensor.hpp"
#include "mgpu_test/compare.hpp"

using namespace mgpu;
using namespace mgpu::model;
using mgpu_test::check_close;

namespace {

// Two shapes: a tiny one (Eigen multiplies coefficient by coefficient) and one wide enough for its
// blocked matrix products, each with and without attention.
std::vector<ModelConfig> configs() {
  std::vector<ModelConfig> out;
  for (bool wide : {false, true}) {
    for (bool attention : {true, false}) {
      ModelConfig c;
      c.d_in = wide ? 12 : 3;
      c.d_model = wide ? 32 : 8;
      c.d_ff = wide ? 96 : 12;
      c.n_layers = 2;
      c.n_heads = wide ? 4 : 2;
      c.seq_len = wide ? 8 : 3;
      c.d_out = wide ? 10 : 4;
      c.attention = attention;
      c.causal = !wide;
      out.push_back(c);
    }
  }
  return out;
}

std::string describe(const ModelConfig& c, std::int64_t sequences) {
  return "d_model " + std::to_string(c.d_model) + (c.attention ? ", attention" : ", FFN only") +
         ", " + std::to_string(sequences) + " sequences";
}

// A whole forward pass keeping every unit's cache, and the loss gradient at the head's output.
struct Forward {
  std::vector<UnitCache> caches;
  Buffer<float> dloss;
};

Forward forward_all(Rank& r, const Model& net, std::span<const float> params, const Batch& batch,
                    Save save = Save::everything) {
  Forward f;
  f.caches.resize(static_cast<std::size_t>(net.num_units()));
  Buffer<float> x = net.input(r, batch);
  for (int u = 0; u < net.num_units(); ++u) {
    x = net.unit_forward(r, u, net.unit_view(params, u), std::move(x), batch.tokens(),
                         &f.caches[static_cast<std::size_t>(u)], save);
  }
  f.dloss = Buffer<float>(r.memory(), Category::activations, x.size(), "dloss");
  net.loss_backward(x.span(), batch, f.dloss.span());
  return f;
}

// Gradients that start away from zero, so the halves are seen to accumulate.
std::vector<float> start_grads(const Model& net) {
  std::vector<float> g(net.num_params());
  Rng(77).fill_normal(g, 0.1);
  return g;
}

// What every input gradient (dx of unit u at index u) and the final gradients came out as.
struct Result {
  std::vector<std::vector<float>> dx;
  std::vector<float> grads;
};

// The whole backward, unit_backward from the head down.
Result whole_backward(Rank& r, const Model& net, std::span<const float> params, Forward& f) {
  Result out{std::vector<std::vector<float>>(static_cast<std::size_t>(net.num_units())),
             start_grads(net)};
  Buffer<float> d = std::move(f.dloss);
  for (int u = net.num_units() - 1; u >= 0; --u) {
    d = net.unit_backward(r, u, net.unit_view(params, u),
                          net.unit_view(std::span<float>(out.grads), u),
                          f.caches[static_cast<std::size_t>(u)], d.span());
    out.dx[static_cast<std::size_t>(u)].assign(d.begin(), d.end());
  }
  return out;
}

// The split backward: every input half from the head down, with the weight halves run at the
// positions `weight_after` gives (weight_after[u] = the unit whose input half it follows; -1 =
// after all of them), in the order of `weight_order`.
Result split_backward(Rank& r, const Model& net, std::span<const float> params, Forward& f,
                      const std::vector<int>& weight_order, const std::vector<int>& weight_after) {
  Result out{std::vector<std::vector<float>>(static_cast<std::size_t>(net.num_units())),
             start_grads(net)};
  const auto run_weights_after = [&](int b) {
    for (int w : weight_order) {
      if (weight_after[static_cast<std::size_t>(w)] == b)
        net.unit_backward_weight(r, w, net.unit_view(std::span<float>(out.grads), w),
                                 f.caches[static_cast<std::size_t>(w)]);
    }
  };
  Buffer<float> d = std::move(f.dloss);
  for (int u = net.num_units() - 1; u >= 0; --u) {
    d = net.unit_backward_input(r, u, net.unit_view(params, u),
                                f.caches[static_cast<std::size_t>(u)], d.span());
    out.dx[static_cast<std::size_t>(u)].assign(d.begin(), d.end());
    run_weights_after(u);
  }
  run_weights_after(-1);
  return out;
}

void check_same(const std::string& at, const Result& split, const Result& whole) {
  for (std::size_t u = 0; u < whole.dx.size(); ++u)
    check_close(at + ": dx of unit " + std::to_string(u), split.dx[u], whole.dx[u]);
  check_close(at + ": gradients", split.grads, whole.grads);
}

// The FLOPs of each half written out from the layer shapes (2 n in out per matmul), not from the
// model's own counts. B: every linear's dX, and the core's four (seq x seq) products per head.
// W: every linear's dW.
struct Flops {
  double input = 0, weight = 0;
};

Flops expected_flops(const Model& net, int u, std::int64_t n) {
  const ModelConfig& c = net.config();
  const auto mm = [&](std::int64_t in, std::int64_t out) {
    return 2.0 * static_cast<double>(n * in * out);
  };
  if (u == 0) return {mm(c.d_in, c.d_model), mm(c.d_in, c.d_model)};
  if (u == net.num_units() - 1) return {mm(c.d_model, c.d_out), mm(c.d_model, c.d_out)};
  double linears = mm(c.d_model, c.d_ff) + mm(c.d_ff, c.d_model);  // W1, W2
  double core = 0;
  if (c.attention) {
    linears += 4 * mm(c.d_model, c.d_model);  // Wq, Wk, Wv, Wo
    // dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: each (seq, seq) x (seq, dh) per sequence
    // and head, so 2 seq^2 dh * (n / seq) * heads = 2 n seq d_model.
    core = 4 * 2.0 * static_cast<double>(n * c.seq_len * c.d_model);
  }
  return {linears + core, linears};
}

// Bytes a unit's cache holds between its input and weight halves (the contract's table).
std::size_t expected_pending_bytes(const Model& net, int u, std::int64_t n) {
  const ModelConfig& c = net.config();
  const UnitInfo& info = net.unit(u);
  std::int64_t floats = 0;
  if (u == 0 || u == net.num_units() - 1) {
    floats = n * (info.in_width + info.out_width);  // x, dy
  } else if (c.attention) {
    floats = n * (8 * c.d_model + 2 * c.d_ff);  // x o mid dy dmid dq dk dv; a dh
  } else {
    floats = n * (2 * c.d_model + 2 * c.d_ff);  // x dy; a dh
  }
  return static_cast<std::size_t>(floats) * sizeof(float);
}

// The rank's latest compute span (an empty one when there is none).
Span last_compute(Rank& r) {
  const auto& spans = r.clock().timeline();
  const auto it = std::find_if(spans.rbegin(), spans.rend(),
                               [](const Span& s) { return s.kind == SpanKind::compute; });
  return it == spans.rend() ? Span{Stream::compute, SpanKind::compute, "", 0, 0} : *it;
}

// doctest's matcher takes a C string; it keeps its own copy.
doctest::Contains contains(const std::string& text) { return doctest::Contains(text.c_str()); }

}  // namespace

TEST_CASE(
    "the input half then the weight half give unit_backward's dx and gradients, bit for bit") {
  for (const ModelConfig& c : configs()) {
    const Model net(c);
    for (std::int64_t sequences : {1, 2, 5}) {
      const Batch batch = net.make_batch(sequences, 40 + static_cast<std::uint64_t>(sequences));
      Result whole, split;
      Cluster(1).run([&](Rank& r) {
        Replica rep = net.make_replica(r.memory(), 6);
        const std::span<const float> params = rep.params.span();
        Forward a = forward_all(r, net, params, batch);
        whole = whole_backward(r, net, params, a);
        Forward b = forward_all(r, net, params, batch);
        // Each weight half right after its own input half.
        std::vector<int> order, after;
        for (int u = 0; u < net.num_units(); ++u) {
          order.push_back(u);
          after.push_back(u);
        }
        split = split_backward(r, net, params, b, order, after);
      });
      check_same(describe(c, sequences), split, whole);
    }
  }
}

TEST_CASE("the weight halves can wait: run after other units' input halves, in any order") {
  for (const ModelConfig& c : configs()) {
    const Model net(c);
    const Batch batch = net.make_batch(2, 9);
    const int units = net.num_units();
    // Each weight half after every input half, in forward order, in backward order, shuffled; and
    // delayed by a unit or two (as a zero-bubble stage fills its idle time with W).
    std::vector<std::pair<std::string, std::pair<std::vector<int>, std::vector<int>>>> plans;
    std::vector<int> forward_order, backward_order, all_at_end(static_cast<std::size_t>(units), -1);
    for (int u = 0; u < units; ++u) forward_order.push_back(u);
    backward_order.assign(forward_order.rbegin(), forward_order.rend());
    std::vector<int> shuffled = forward_order;
    std::rotate(shuffled.begin(), shuffled.begin() + 2, shuffled.end());
    std::swap(shuffled.front(), shuffled.back());
    std::vector<int> delayed(static_cast<std::size_t>(units));
    for (int u = 0; u < units; ++u) delayed[static_cast<std::size_t>(u)] = std::max(u - 2, 0);
    plans.push_back({"all at the end, forward order", {forward_order, all_at_end}});
    plans.push_back({"all at the end, backward order", {backward_order, all_at_end}});
    plans.push_back({"all at the end, shuffled", {shuffled, all_at_end}});
    plans.push_back({"two units late", {backward_order, delayed}});
    for (const auto& [name, plan] : plans) {
      Result whole, split;
      Cluster(1).run([&](Rank& r) {
        Replica rep = net.make_replica(r.memory(), 8);
        const std::span<const float> params = rep.params.span();
        Forward a = forward_all(r, net, params, batch);
        whole = whole_backward(r, net, params, a);
        Forward b = forward_all(r, net, params, batch);
        split = split_backward(r, net, params, b, plan.first, plan.second);
        // Every cache emptied by its weight half, so no activation is left.
        for (const UnitCache& cache : b.caches) CHECK(cache.bytes() == 0);
        CHECK(r.memory().current(Category::activations) == 0);
      });
      check_same(describe(c, 2) + ", " + name, split, whole);
    }
  }
}

TEST_CASE("two micro-batches: the second's input halves run between the first's two halves") {
  // As a zero-bubble stage runs them: B of micro-batch 0, B of micro-batch 1, then the W's, each
  // unit's in micro-batch order, so its gradient adds up as two whole backwards in a row do.
  for (const ModelConfig& c : configs()) {
    const Model net(c);
    const Batch batch0 = net.make_batch(2, 31), batch1 = net.make_batch(1, 32);
    std::vector<float> whole = start_grads(net), split = start_grads(net);
    std::vector<std::vector<float>> whole_dx, split_dx;
    Cluster(1).run([&](Rank& r) {
      Replica rep = net.make_replica(r.memory(), 12);
      const std::span<const float> params = rep.params.span();
      const std::span<float> wg(whole), sg(split);
      for (const Batch* batch : {&batch0, &batch1}) {
        Forward f = forward_all(r, net, params, *batch);
        Buffer<float> d = std::move(f.dloss);
        for (int u = net.num_units() - 1; u >= 0; --u) {
          d = net.unit_backward(r, u, net.unit_view(params, u), net.unit_view(wg, u),
                                f.caches[static_cast<std::size_t>(u)], d.span());
        }
        whole_dx.emplace_back(d.begin(), d.end());
      }
      Forward f0 = forward_all(r, net, params, batch0), f1 = forward_all(r, net, params, batch1);
      for (Forward* f : {&f0, &f1}) {
        Buffer<float> d = std::move(f->dloss);
        for (int u = net.num_units() - 1; u >= 0; --u) {
          d = net.unit_backward_input(r, u, net.unit_view(params, u),
                                      f->caches[static_cast<std::size_t>(u)], d.span());
        }
        split_dx.emplace_back(d.begin(), d.end());
      }
      for (int u = 0; u < net.num_units(); ++u) {
        for (Forward* f : {&f0, &f1}) {
          net.unit_backward_weight(r, u, net.unit_view(sg, u),
                                   f->caches[static_cast<std::size_t>(u)]);
        }
      }
    });
    const std::string at = describe(c, 2) + " and 1";
    for (std::size_t k = 0; k < 2; ++k)
      check_close(at + ": embedding dx of micro-batch " + std::to_string(k), split_dx[k],
                  whole_dx[k]);
    check_close(at + ": gradients", split, whole);
  }
}

TEST_CASE("each half charges its own FLOPs, and the two add up to unit_backward's charge") {
  for (const ModelConfig& c : configs()) {
    const Model net(c);
    for (std::int64_t sequences : {1, 3}) {
      const std::int64_t n = sequences * c.seq_len;
      const Batch batch = net.make_batch(sequences, 3);
      for (int u = 0; u < net.num_units(); ++u) {
        const std::string at = describe(c, sequences) + ", " + net.unit(u).name;
        CAPTURE(at);
        const Flops want = expected_flops(net, u, n);
        CHECK(net.unit_backward_input_flops(u, n) == want.input);
        CHECK(net.unit_backward_weight_flops(u, n) == want.weight);
        // The split moves FLOPs between the halves; it neither adds nor drops any.
        CHECK(net.unit_backward_input_flops(u, n) + net.unit_backward_weight_flops(u, n) ==
              2.0 * net.unit_forward_flops(u, n));
      }
      // On the clock: the spans carry the halves' names and durations, and add up to the
      // whole backward's span.
      Cluster cluster(1);
      const double rate = cluster.config().flops_per_second;
      cluster.run([&](Rank& r) {
        Replica rep = net.make_replica(r.memory(), 2);
        const std::span<const float> params = rep.params.span();
        Forward a = forward_all(r, net, params, batch);
        Forward b = forward_all(r, net, params, batch);
        Buffer<float> da = std::move(a.dloss), db = std::move(b.dloss);
        for (int u = net.num_units() - 1; u >= 0; --u) {
          const std::string& name = net.unit(u).name;
          const auto ui = static_cast<std::size_t>(u);
          da = net.unit_backward(r, u, net.unit_view(params, u), net.unit_view(rep.grads.span(), u),
                                 a.caches[ui], da.span());
          const Span whole = last_compute(r);
          db = net.unit_backward_input(r, u, net.unit_view(params, u), b.caches[ui], db.span());
          const Span input = last_compute(r);
          net.unit_backward_weight(r, u, net.unit_view(rep.grads.span(), u), b.caches[ui]);
          const Span weight = last_compute(r);
          CHECK(input.label == "bwd-in " + name);
          CHECK(weight.label == "bwd-w " + name);
          const Flops want = expected_flops(net, u, n);
          CHECK(input.duration() == doctest::Approx(want.input / rate).epsilon(1e-12));
          CHECK(weight.duration() == doctest::Approx(want.weight / rate).epsilon(1e-12));
          CHECK(input.duration() + weight.duration() ==
                doctest::Approx(whole.duration()).epsilon(1e-12));
        }
      });
    }
  }
}

TEST_CASE("activations stay on the ledger until the weight half: what each half frees") {
  for (const ModelConfig& c : configs()) {
    const Model net(c);
    const std::int64_t sequences = 2, n = sequences * c.seq_len;
    const Batch batch = net.make_batch(sequences, 5);
    Cluster(1).run([&](Rank& r) {
      Replica rep = net.make_replica(r.memory(), 3);
      const std::span<const float> params = rep.params.span();
      Forward f = forward_all(r, net, params, batch);
      Buffer<float> d = std::move(f.dloss);
      for (int u = net.num_units() - 1; u >= 0; --u) {
        CAPTURE(describe(c, sequences) + ", " + net.unit(u).name);
        UnitCache& cache = f.caches[static_cast<std::size_t>(u)];
        const std::size_t saved = cache.bytes(), before = r.memory().current(Category::activations);
        Buffer<float> dx = net.unit_backward_input(r, u, net.unit_view(params, u), cache, d.span());
        CHECK(cache.filled);
        CHECK(cache.weight_pending);
        CHECK(cache.bytes() == expected_pending_bytes(net, u, n));
        CHECK(r.memory().current(Category::activations) ==
              before - saved + cache.bytes() + dx.bytes());
        // What only the input gradient needed is gone; the weight gradients' inputs are kept.
        for (const Buffer<float>* gone : {&cache.q, &cache.k, &cache.v, &cache.p, &cache.h})
          CHECK(gone->empty());
        CHECK(!cache.x.empty());
        CHECK(!cache.dy.empty());
        const bool block = u != 0 && u != net.num_units() - 1;
        CHECK(cache.a.empty() == !block);
        CHECK(cache.dh.empty() == !block);
        for (const Buffer<float>* kept :
             {&cache.o, &cache.mid, &cache.dmid, &cache.dq, &cache.dk, &cache.dv})
          CHECK(kept->empty() == !(block && c.attention));

        net.unit_backward_weight(r, u, net.unit_view(rep.grads.span(), u), cache);
        CHECK(!cache.filled);
        CHECK(!cache.weight_pending);
        CHECK(cache.bytes() == 0);
        CHECK(r.memory().current(Category::activations) == before - saved + dx.bytes());
        d = std::move(dx);
      }
    });
  }
}

TEST_CASE("the halves refuse to run out of order, naming the unit") {
  const Model net(configs().front());
  const Batch batch = net.make_batch(1, 2);
  Cluster(1).run([&](Rank& r) {
    Replica rep = net.make_replica(r.memory(), 1);
    const std::span<const float> params = rep.params.span();
    const std::span<float> grads = rep.grads.span();
    Forward f = forward_all(r, net, params, batch);
    Buffer<float> d = std::move(f.dloss);
    for (int u = net.num_units() - 1; u >= 0; --u) {
      const std::string& name = net.unit(u).name;
      UnitCache& cache = f.caches[static_cast<std::size_t>(u)];
      // W before B.
      CHECK_THROWS_WITH_AS(net.unit_backward_weight(r, u, net.unit_view(grads, u), cache),
                           contains(name + " has not run unit_backward_input"), std::logic_error);
      Buffer<float> dx = net.unit_backward_input(r, u, net.unit_view(params, u), cache, d.span());
      // B twice, or the whole backward, or a new forward into the cache, while W is pending.
      CHECK_THROWS_WITH_AS(net.unit_backward_input(r, u, net.unit_view(params, u), cache, d.span()),
                           contains("input gradient of " + name), std::logic_error);
      CHECK_THROWS_WITH_AS(net.unit_backward(r, u, net.unit_view(params, u),
                                             net.unit_view(grads, u), cache, d.span()),
                           contains("input gradient of " + name), std::logic_error);
      Buffer<float> again(r.memory(), Category::activations,
                          static_cast<std::size_t>(batch.tokens() * net.unit(u).in_width), "x");
      CHECK_THROWS_WITH_AS(net.unit_forward(r, u, net.unit_view(params, u), std::move(again),
                                            batch.tokens(), &cache),
                           contains(name), std::logic_error);
      net.unit_backward_weight(r, u, net.unit_view(grads, u), cache);
      // W twice, and B on the emptied cache.
      CHECK_THROWS_WITH_AS(net.unit_backward_weight(r, u, net.unit_view(grads, u), cache),
                           contains(name + "'s cache is empty"), std::logic_error);
      CHECK_THROWS_WITH_AS(net.unit_backward_input(r, u, net.unit_view(params, u), cache, d.span()),
                           contains("cache of " + name + " is empty"), std::logic_error);
      d = std::move(dx);
    }
  });
}

TEST_CASE("a block saved without its attention core: the input half asks for it, then matches") {
  ModelConfig c = configs().front();
  const Model net(c);
  const Batch batch = net.make_batch(2, 12);
  const auto N = static_cast<std::size_t>(batch.tokens()), d = static_cast<std::size_t>(c.d_model),
             heads = static_cast<std::size_t>(c.n_heads), seq = static_cast<std::size_t>(c.seq_len);
  Result whole, split;
  Cluster(1).run([&](Rank& r) {
    Replica rep = net.make_replica(r.memory(), 5);
    const std::span<const float> params = rep.params.span();
    Forward a = forward_all(r, net, params, batch);
    whole = whole_backward(r, net, params, a);

    Forward f = forward_all(r, net, params, batch, Save::without_attention_core);
    split = Result{std::vector<std::vector<float>>(static_cast<std::size_t>(net.num_units())),
                   start_grads(net)};
    Buffer<float> dy = std::move(f.dloss);
    for (int u = net.num_units() - 1; u >= 0; --u) {
      UnitCache& cache = f.caches[static_cast<std::size_t>(u)];
      if (u >= 1 && u <= c.n_layers) {
        CHECK_THROWS_WITH_AS(
            net.unit_backward_input(r, u, net.unit_view(params, u), cache, dy.span()),
            contains(net.unit(u).name + " was saved without its attention core"), std::logic_error);
        CHECK(!cache.weight_pending);  // a refused call changes nothing
        cache.p = Buffer<float>(r.memory(), Category::activations, N * heads * seq, "p");
        cache.o = Buffer<float>(r.memory(), Category::activations, N * d, "o");
        attention_core_forward(as_matrix(std::span<const float>(cache.q.span()), N, d),
                               as_matrix(std::span<const float>(cache.k.span()), N, d),
                               as_matrix(std::span<const float>(cache.v.span()), N, d), c.seq_len,
                               c.n_heads, c.causal, as_matrix(cache.p.span(), N * heads, seq),
                               as_matrix(cache.o.span(), N, d));
      }
      dy = net.unit_backward_input(r, u, net.unit_view(params, u), cache, dy.span());
      split.dx[static_cast<std::size_t>(u)].assign(dy.begin(), dy.end());
      net.unit_backward_weight(r, u, net.unit_view(std::span<float>(split.grads), u), cache);
    }
  });
  check_same("rebuilt core", split, whole);
}
