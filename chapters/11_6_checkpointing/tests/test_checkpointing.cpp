// 11.6 visible tests of the running checkpointing code: the same gradients as plain training for
// every k, the ledger's activation peak against checkpointed_peak_bytes, the recomputed FLOPs on
// the clock against recompute_extra_flops_fraction, and the peak's minimum near sqrt(L). Each
// TODO is a rung: recompute_segment alone, then the checkpointed forward (its test accepts a
// backward that still throws "not implemented" once the forward is done), then the whole step.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_where.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "11_6_checkpointing/checkpointing.hpp"
#include "11_6_checkpointing/formulas.hpp"

using namespace mgpu;
using namespace mgpu::checkpointing;

namespace {

model::ModelConfig config(std::int64_t layers, bool attention) {
  return model::ModelConfig{.d_in = 5,
                            .d_model = 8,
                            .d_ff = 16,
                            .n_layers = layers,
                            .n_heads = 2,
                            .seq_len = 4,
                            .d_out = 3,
                            .attention = attention};
}

// What one step left behind on a fresh rank.
struct Run {
  std::vector<float> grads;
  double loss = 0;
  std::size_t peak_activations = 0;  // ledger peak of Category::activations during the step
  double compute_seconds = 0;        // compute charged to the clock during the step
  double flops_per_second = 0;
};

// One step, plain (k = 0) or with a checkpoint every k blocks.
Run step(const model::Model& net, const model::Batch& batch, std::int64_t k) {
  Run run;
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 11);
    r.memory().reset_peaks();
    const double t0 = r.clock().compute_time();
    run.loss = k == 0 ? net.forward_backward(r, rep.params.span(), rep.grads.span(), batch)
                      : checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(),
                                                      batch, k);
    run.compute_seconds = r.clock().compute_time() - t0;
    run.peak_activations = r.memory().peak(Category::activations);
    CHECK(r.memory().current(Category::activations) == 0);  // nothing left behind
    run.grads.assign(rep.grads.begin(), rep.grads.end());
    run.flops_per_second = r.config().flops_per_second;
  });
  return run;
}

// What the forward half of checkpointed_forward_backward showed on a fresh rank: the compute
// spans up to the first backward, and the activation peak of what ran (the whole step's when the
// backward is written; the forward's when it still throws NotImplemented).
struct ForwardRun {
  std::vector<std::string> forward_spans;  // labels of the compute spans before any "bwd ..."
  std::size_t peak_activations = 0;
  bool backward_written = true;  // false: the call threw NotImplemented after the forward
};

ForwardRun forward_part(const model::Model& net, const model::Batch& batch, std::int64_t k) {
  ForwardRun run;
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 11);
    r.memory().reset_peaks();
    const std::size_t spans_before = r.clock().timeline().size();
    std::optional<NotImplemented> unwritten;
    try {
      checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch, k);
    } catch (const NotImplemented& e) {
      unwritten = e;
    }
    const std::vector<Span>& spans = r.clock().timeline();
    for (std::size_t i = spans_before; i < spans.size(); ++i) {
      if (spans[i].kind != SpanKind::compute) continue;
      if (spans[i].label.starts_with("bwd")) break;
      run.forward_spans.push_back(spans[i].label);
    }
    // Not implemented before the forward ran through: the forward's TODO is the one to do.
    if (unwritten && run.forward_spans.size() < static_cast<std::size_t>(net.num_units()))
      throw *unwritten;
    run.backward_written = !unwritten;
    run.peak_activations = r.memory().peak(Category::activations);
  });
  return run;
}

/// The byte sizes the peak formulas take, for `tokens` tokens: C a block's checkpoint (its
/// input), B what a block's cache holds, E the embedding's saved input.
struct PeakSizes {
  double C, B, E;
};
PeakSizes peak_sizes(const model::Model& net, std::int64_t tokens) {
  return {static_cast<double>(block_checkpoint_bytes(net, tokens)),
          static_cast<double>(block_saved_bytes(net, tokens)),
          static_cast<double>(tokens * net.config().d_in * 4)};
}

}  // namespace

TEST_CASE("the given block sizes are what the ledger records for one block's cache and input") {
  for (bool attention : {true, false}) {
    const model::Model net(config(2, attention));
    const model::Batch batch = net.make_batch(3, 5);
    Cluster(1).run([&](Rank& r) {
      model::Replica rep = net.make_replica(r.memory(), 1);
      model::UnitCache embed, block;
      Buffer<float> x = net.input(r, batch);
      x = net.unit_forward(r, 0, net.unit_view(std::span<const float>(rep.params.span()), 0),
                           std::move(x), batch.tokens(), &embed);
      CHECK(x.bytes() == block_checkpoint_bytes(net, batch.tokens()));
      const std::size_t before = r.memory().current(Category::activations);
      x = net.unit_forward(r, 1, net.unit_view(std::span<const float>(rep.params.span()), 1),
                           std::move(x), batch.tokens(), &block);
      CHECK(block.bytes() == block_saved_bytes(net, batch.tokens()));
      // The ledger grew by the cache's internals and the new output (the input moved into the
      // cache).
      CHECK(r.memory().current(Category::activations) - before ==
            block.bytes() - block_checkpoint_bytes(net, batch.tokens()) + x.bytes());
    });
  }
}

TEST_CASE("recompute_segment alone: the caches of a plain cached forward, the checkpoint reused") {
  // Blocks 1 and 2 of 4 (units 2 and 3), from a checkpoint of block 1's input.
  for (bool attention : {true, false}) {
    const model::Model net(config(4, attention));
    const model::Batch batch = net.make_batch(2, 7);
    const std::int64_t tokens = batch.tokens();
    Cluster(1).run([&](Rank& r) {
      model::Replica rep = net.make_replica(r.memory(), 3);
      const std::span<const float> params(rep.params.span());
      Buffer<float> x = net.input(r, batch);
      x = net.unit_forward(r, 0, net.unit_view(params, 0), std::move(x), tokens, nullptr);
      x = net.unit_forward(r, 1, net.unit_view(params, 1), std::move(x), tokens, nullptr);
      Buffer<float> cp(r.memory(), Category::activations, x.size(), "checkpoint");
      std::copy(x.begin(), x.end(), cp.begin());
      // The reference: the same two blocks run forward with caches, from x itself.
      std::vector<model::UnitCache> want(2), got(2);
      for (int i = 0; i < 2; ++i)
        x = net.unit_forward(r, 2 + i, net.unit_view(params, 2 + i), std::move(x), tokens,
                             &want[static_cast<std::size_t>(i)]);
      x.reset();
      const std::size_t before = r.memory().current(Category::activations);
      recompute_segment(r, net, params, Segment{1, 2}, std::move(cp), tokens, got);
      std::size_t cached = 0;
      for (std::size_t i = 0; i < 2; ++i) {
        const model::UnitCache &w = want[i], &g = got[i];
        CHECK(g.filled);
        CHECK(g.tokens == w.tokens);
        // Each saved tensor bit for bit, named as UnitCache names it.
        static const char* const names[] = {"x", "q", "k", "v", "p", "o", "mid", "h", "a"};
        const Buffer<float> model::UnitCache::*const fields[] = {
            &model::UnitCache::x,   &model::UnitCache::q, &model::UnitCache::k,
            &model::UnitCache::v,   &model::UnitCache::p, &model::UnitCache::o,
            &model::UnitCache::mid, &model::UnitCache::h, &model::UnitCache::a};
        for (std::size_t f = 0; f < std::size(fields); ++f)
          mgpu_test::check_identical("block " + std::to_string(1 + i) + "'s cache." + names[f],
                                     g.*fields[f], w.*fields[f]);
        cached += g.bytes();
      }
      // The checkpoint (counted in `before`) became block 1's saved input; the output is gone.
      std::printf(
          "recompute_segment attention=%d: activations grew by %zu bytes, caches hold %zu, "
          "checkpoint %zu\n",
          attention, r.memory().current(Category::activations) - before, cached,
          block_checkpoint_bytes(net, tokens));
      CHECK(r.memory().current(Category::activations) - before ==
            cached - block_checkpoint_bytes(net, tokens));
    });
  }
}

TEST_CASE(
    "checkpointed forward alone: every unit's forward once, in order, before any backward, and the "
    "checkpoints and one block's working set at its peak") {
  // The forward keeps each segment's input (C) and no block's cache, so at its peak, while the
  // last block runs, it holds the embedding's input E, the ceil(L/k) checkpoints, the block's
  // input and output (2 C) and the internals a cache would keep (B - C):
  //   E + (ceil(L/k) + 1) C + B,
  // which at k = 1 is exactly the whole step's peak, E + (floor(L/k) + 1) C + k B (the step
  // never holds more than the forward there), and for larger k lies between the two.
  for (std::int64_t layers : {1, 4, 7}) {
    for (bool attention : {true, false}) {
      const model::Model net(config(layers, attention));
      const model::Batch batch = net.make_batch(2, 3);
      const auto [C, B, E] = peak_sizes(net, batch.tokens());
      std::vector<std::string> want_spans;
      for (int u = 0; u < net.num_units(); ++u) want_spans.push_back("fwd " + net.unit(u).name);
      for (std::int64_t k = 1; k <= layers; ++k) {
        CAPTURE(layers);
        CAPTURE(k);
        CAPTURE(attention);
        const ForwardRun fwd = forward_part(net, batch, k);
        const double segments = static_cast<double>((layers + k - 1) / k),
                     whole = static_cast<double>(layers / k);
        const double forward_peak = E + (segments + 1) * C + B;
        const double step_peak = E + (whole + 1) * C + static_cast<double>(k) * B;
        std::printf(
            "L=%lld k=%lld attention=%d: peak %zu B (%s), forward's %.0f B, step's %.0f B\n",
            static_cast<long long>(layers), static_cast<long long>(k), attention ? 1 : 0,
            fwd.peak_activations, fwd.backward_written ? "whole step" : "forward only",
            forward_peak, step_peak);
        const std::string spans = mgpu_test::sequence_mismatch(
            "compute spans before the first backward", fwd.forward_spans, want_spans,
            [](const std::string& label) { return label; });
        REQUIRE_MESSAGE(spans.empty(), spans);
        const auto peak = static_cast<double>(fwd.peak_activations);
        INFO("activation peak " << peak << " B; E = " << E << ", C = " << C << ", B = " << B
                                << " bytes: the forward's E + (ceil(L/k) + 1) C + B = "
                                << forward_peak
                                << ", the step's E + (floor(L/k) + 1) C + k B = " << step_peak
                                << " (above: a block's cache or a second copy kept; below: a "
                                   "checkpoint not kept)");
        if (k == 1) {
          REQUIRE(peak == forward_peak);
        } else {
          REQUIRE(peak >= forward_peak);
          REQUIRE(peak <= step_peak);
        }
      }
    }
  }
}

TEST_CASE("gradients and loss are bitwise those of plain forward_backward for every k") {
  // Bitwise, not within a tolerance: the recomputed forward sees the same input bits and runs the
  // same kernels, and the backward runs in the same unit order, so every float is the same.
  for (std::int64_t layers : {1, 3, 6}) {
    for (bool attention : {true, false}) {
      const model::Model net(config(layers, attention));
      const model::Batch batch = net.make_batch(3, 7);
      const Run plain = step(net, batch, 0);
      for (std::int64_t k = 1; k <= layers; ++k) {
        const Run ck = step(net, batch, k);
        std::printf("L=%lld k=%lld attention=%d: max |grad diff| = %g\n",
                    static_cast<long long>(layers), static_cast<long long>(k), attention ? 1 : 0,
                    mgpu_test::max_abs_diff(ck.grads, plain.grads));
        INFO("L = " << layers << ", k = " << k << (attention ? ", attention" : ", FFN only")
                    << ": checkpointed against plain forward_backward, bit for bit");
        // The first wrong configuration ends the test: the others would repeat its story.
        const mgpu_test::Mismatch m = mgpu_test::compare_bits(
            "grads", ck.grads, plain.grads, {.where = mgpu_test::model_tensors(net)});
        REQUIRE_MESSAGE(m.count == 0, m.report);
        CHECK(ck.loss == plain.loss);
      }
    }
  }
}

TEST_CASE(
    "the activation peak is checkpointed_peak_bytes plus the embedding input, one C when k divides "
    "L") {
  for (std::int64_t layers : {1, 4, 7, 9}) {
    for (bool attention : {true, false}) {
      const model::Model net(config(layers, attention));
      const model::Batch batch = net.make_batch(2, 3);
      const auto [C, B, E] = peak_sizes(net, batch.tokens());
      for (std::int64_t k = 1; k <= layers; ++k) {
        const Run ck = step(net, batch, k);
        const double formula = checkpointed_peak_bytes(layers, k, C, B);
        const double whole = static_cast<double>(layers / k),
                     parts = static_cast<double>((layers + k - 1) / k);
        const double predicted = formula + E + C - (parts - whole) * C;
        std::printf("L=%lld k=%lld attention=%d: peak %zu B, formula %.0f B, predicted %.0f B\n",
                    static_cast<long long>(layers), static_cast<long long>(k), attention ? 1 : 0,
                    ck.peak_activations, formula, predicted);
        CHECK(static_cast<double>(ck.peak_activations) == predicted);
      }
    }
  }
}

TEST_CASE("recomputation charges exactly one more forward of every block to the clock") {
  for (std::int64_t layers : {2, 5}) {
    const model::Model net(config(layers, true));
    const model::Batch batch = net.make_batch(4, 9);
    const std::int64_t n = batch.tokens();
    const Run plain = step(net, batch, 0);
    double block_flops = 0;
    for (int u = 1; u <= layers; ++u) block_flops += net.unit_forward_flops(u, n);
    for (std::int64_t k = 1; k <= layers; ++k) {
      const Run ck = step(net, batch, k);
      const double extra = (ck.compute_seconds - plain.compute_seconds) * ck.flops_per_second;
      const double plain_flops = plain.compute_seconds * plain.flops_per_second;
      CHECK(extra == doctest::Approx(block_flops).epsilon(1e-9));
      // The formula's fraction assumes every layer is a block; the embedding and head, which are
      // never recomputed, dilute it by their share of the forward.
      const double fraction =
          recompute_extra_flops_fraction(layers, layers) * block_flops / net.forward_flops(n);
      std::printf("L=%lld k=%lld: extra %.0f FLOPs = %.4f of the step (formula, diluted: %.4f)\n",
                  static_cast<long long>(layers), static_cast<long long>(k), extra,
                  extra / plain_flops, fraction);
      CHECK(extra / plain_flops == doctest::Approx(fraction).epsilon(1e-9));
    }
  }
}

TEST_CASE("a k near sqrt(L) gives a lower peak than k = 1 and k = L, and below plain training") {
  // Blocks that save little beyond their input (a thin FFN, no attention): B = 1.25 C, so the best
  // k is near sqrt(L * C / B) = 5.4. A transformer block saves ~10 C and pushes the best k to 1-2.
  model::ModelConfig c = config(36, false);
  c.d_in = 4;
  c.d_model = 16;
  c.d_ff = 2;
  c.d_out = 4;
  const model::Model net(c);
  const model::Batch batch = net.make_batch(2, 1);
  const std::int64_t k = best_interval(net, batch.tokens());
  CHECK(k == best_checkpoint_interval_bytes(
                 36, static_cast<double>(block_checkpoint_bytes(net, batch.tokens())),
                 static_cast<double>(block_saved_bytes(net, batch.tokens()))));
  const Run plain = step(net, batch, 0), best = step(net, batch, k), every = step(net, batch, 1),
            one = step(net, batch, 36);
  std::printf("L=36: best k=%lld peak %zu B; k=1 %zu B; k=L %zu B; plain %zu B\n",
              static_cast<long long>(k), best.peak_activations, every.peak_activations,
              one.peak_activations, plain.peak_activations);
  CHECK(k > 1);
  CHECK(k < 36);
  CHECK(best.peak_activations < every.peak_activations);
  CHECK(best.peak_activations < one.peak_activations);
  CHECK(best.peak_activations < plain.peak_activations);
}

TEST_CASE("checkpointing rejects an interval outside 1..L and a wrong cache count") {
  const model::Model net(config(3, true));
  const model::Batch batch = net.make_batch(1, 2);
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 1);
    CHECK_THROWS_AS(
        checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch, 0),
        std::invalid_argument);
    CHECK_THROWS_AS(
        checkpointed_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch, 4),
        std::invalid_argument);
    std::vector<model::UnitCache> caches(1);
    Buffer<float> cp(r.memory(), Category::activations,
                     block_checkpoint_bytes(net, batch.tokens()) / 4, "cp");
    CHECK_THROWS_AS(recompute_segment(r, net, rep.params.span(), Segment{0, 2}, std::move(cp),
                                      batch.tokens(), caches),
                    std::invalid_argument);
  });
}
