// 11.6 visible tests of selective recomputation: the same gradients as plain training, the
// bytes a block stores with and without its attention core (measured on the ledger, set against
// Korthikanti et al.'s per-layer terms), the step's activation peak, and the extra FLOPs on the
// clock.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_where.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "11_6_checkpointing/checkpointing.hpp"

using namespace mgpu;
using namespace mgpu::checkpointing;

namespace {

model::ModelConfig config(std::int64_t layers, bool attention, bool causal = true) {
  return model::ModelConfig{.d_in = 5,
                            .d_model = 8,
                            .d_ff = 32,
                            .n_layers = layers,
                            .n_heads = 2,
                            .seq_len = 8,
                            .d_out = 3,
                            .attention = attention,
                            .causal = causal};
}

// What one step left behind on a fresh rank.
struct Run {
  std::vector<float> grads;
  double loss = 0;
  std::size_t peak_activations = 0;  // ledger peak of Category::activations during the step
  double flops = 0;                  // compute charged to the clock during the step, in FLOPs
  double core_flops = 0;             // the part charged as "recompute attention core ..."
};

// One step, plain or with selective recomputation.
Run step(const model::Model& net, const model::Batch& batch, bool selective) {
  Run run;
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 11);
    r.memory().reset_peaks();
    const double t0 = r.clock().compute_time();
    run.loss = selective
                   ? selective_forward_backward(r, net, rep.params.span(), rep.grads.span(), batch)
                   : net.forward_backward(r, rep.params.span(), rep.grads.span(), batch);
    const double rate = r.config().flops_per_second;
    run.flops = (r.clock().compute_time() - t0) * rate;
    for (const Span& s : r.clock().timeline())
      if (s.label.starts_with("recompute attention core ")) run.core_flops += s.duration() * rate;
    run.peak_activations = r.memory().peak(Category::activations);
    CHECK(r.memory().current(Category::activations) == 0);  // nothing left behind
    run.grads.assign(rep.grads.begin(), rep.grads.end());
  });
  return run;
}

// Bytes one block's cache holds after its forward, as the ledger sees them; with `show`, prints
// each saved tensor's bytes.
std::size_t block_cache_bytes(const model::Model& net, const model::Batch& batch, model::Save save,
                              bool show = false) {
  std::size_t bytes = 0;
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 1);
    const std::span<const float> params = rep.params.span();
    model::UnitCache embed, block;
    Buffer<float> x = net.input(r, batch);
    x = net.unit_forward(r, 0, net.unit_view(params, 0), std::move(x), batch.tokens(), &embed);
    const std::size_t before = r.memory().current(Category::activations) - x.bytes();
    x = net.unit_forward(r, 1, net.unit_view(params, 1), std::move(x), batch.tokens(), &block,
                         save);
    bytes = r.memory().current(Category::activations) - x.bytes() - before;
    CHECK(bytes == block.bytes());
    if (show)
      std::printf(
          "block cache (B): x %zu, q %zu, k %zu, v %zu, p %zu, o %zu, mid %zu, h %zu, a %zu; total "
          "%zu\n",
          block.x.bytes(), block.q.bytes(), block.k.bytes(), block.v.bytes(), block.p.bytes(),
          block.o.bytes(), block.mid.bytes(), block.h.bytes(), block.a.bytes(), bytes);
  });
  return bytes;
}

}  // namespace

TEST_CASE("selective recomputation gives the gradients of plain forward_backward bit for bit") {
  for (std::int64_t layers : {1, 3}) {
    for (bool attention : {true, false}) {
      for (bool causal : {true, false}) {
        const model::Model net(config(layers, attention, causal));
        const model::Batch batch = net.make_batch(2, 7);
        const Run plain = step(net, batch, false), sel = step(net, batch, true);
        INFO("L = " << layers << (attention ? ", attention" : ", FFN only")
                    << (causal ? ", causal" : ", not causal")
                    << ": selective against plain forward_backward, bit for bit");
        // The first wrong configuration ends the test: the others would repeat its story.
        const mgpu_test::Mismatch m = mgpu_test::compare_bits(
            "grads", sel.grads, plain.grads, {.where = mgpu_test::model_tensors(net)});
        REQUIRE_MESSAGE(m.count == 0, m.report);
        CHECK(sel.loss == plain.loss);
      }
    }
  }
}

TEST_CASE(
    "a block stores its attention core's bytes less, term by term against Korthikanti et al.") {
  // s = 8 tokens per sequence, b = 2 sequences, h = 8, a = 2 heads, d_ff = 4h, fp32.
  const model::Model net(config(2, true));
  const model::Batch batch = net.make_batch(2, 3);
  const std::int64_t n = batch.tokens();
  const double s = 8, b = 2, h = 8, a = 2, sbh = s * b * h;
  const std::size_t none = block_cache_bytes(net, batch, model::Save::everything, true);
  const std::size_t selective =
      block_cache_bytes(net, batch, model::Save::without_attention_core, true);
  CHECK(none == block_saved_bytes(net, n));
  CHECK(none - selective == attention_core_bytes(net, n));
  // The course model stores, in 4-byte floats: x, q, k, v, o, mid (4sbh each), h and a
  // (4 s b d_ff = 16sbh each) and p (4 a s^2 b). Selective drops p and o.
  CHECK(static_cast<double>(none) == 24 * sbh + 32 * sbh + 4 * a * s * s * b);
  CHECK(static_cast<double>(selective) == 20 * sbh + 32 * sbh);
  // Korthikanti et al. (11.1's activation_bytes_per_layer, 16-bit, with layer norms and dropout):
  // s b h (34 + 5 a s / h) with everything stored, 34 s b h with selective recomputation.
  const double paper_none = sbh * (34 + 5 * a * s / h), paper_selective = 34 * sbh;
  std::printf(
      "per block, s=8 b=2 h=8 a=2 d_ff=32: stored %zu B, selective %zu B (saves %zu B = %.1f%%); "
      "Korthikanti %.0f B and %.0f B (saves %.1f%%)\n",
      none, selective, none - selective,
      100.0 * static_cast<double>(none - selective) / static_cast<double>(none), paper_none,
      paper_selective, 100.0 * (paper_none - paper_selective) / paper_none);
  // Without attention a block has no core: nothing to drop.
  const model::Model ffn(config(2, false));
  CHECK(block_cache_bytes(ffn, batch, model::Save::without_attention_core) ==
        block_saved_bytes(ffn, n));
  CHECK(attention_core_bytes(ffn, n) == 0);
}

TEST_CASE("the step's activation peak holds every block without its core plus one rebuilt core") {
  for (std::int64_t layers : {1, 2, 5}) {
    for (bool attention : {true, false}) {
      const model::Model net(config(layers, attention));
      const model::Batch batch = net.make_batch(3, 5);
      const std::int64_t n = batch.tokens();
      const Run plain = step(net, batch, false), sel = step(net, batch, true);
      const std::size_t A = attention_core_bytes(net, n), B = block_saved_bytes(net, n),
                        C = block_checkpoint_bytes(net, n),
                        E = static_cast<std::size_t>(n * net.config().d_in) * 4,
                        D = static_cast<std::size_t>(n * net.config().d_out) * 4;
      const auto L = static_cast<std::size_t>(layers);
      // Plain training peaks in the head's backward: every cache, the loss gradient and the head's
      // dx.
      CHECK(plain.peak_activations == E + L * B + 2 * C + D);
      const std::size_t predicted = E + L * (B - A) + 2 * C + std::max(A, D);
      std::printf(
          "L=%lld attention=%d: plain peak %zu B, selective %zu B, predicted %zu B (%zu B less)\n",
          static_cast<long long>(layers), attention ? 1 : 0, plain.peak_activations,
          sel.peak_activations, predicted, plain.peak_activations - sel.peak_activations);
      CHECK(sel.peak_activations == predicted);
    }
  }
}

TEST_CASE("the clock is charged exactly one more attention core per block, 4 n s d FLOPs each") {
  for (std::int64_t layers : {1, 4}) {
    for (bool attention : {true, false}) {
      const model::Model net(config(layers, attention));
      const model::Batch batch = net.make_batch(2, 9);
      const std::int64_t n = batch.tokens();
      const Run plain = step(net, batch, false), sel = step(net, batch, true);
      const double core =
          attention ? 4.0 * static_cast<double>(n * net.config().seq_len * net.config().d_model)
                    : 0.0;
      CHECK(attention_core_recompute_flops(net, n) == core);
      const double extra = sel.flops - plain.flops;
      std::printf(
          "L=%lld attention=%d: extra %.0f FLOPs = %.4f of the step; full recomputation would add "
          "%.4f\n",
          static_cast<long long>(layers), attention ? 1 : 0, extra, extra / plain.flops,
          (net.forward_flops(n) - net.unit_forward_flops(0, n) -
           net.unit_forward_flops(net.num_units() - 1, n)) /
              plain.flops);
      CHECK(extra == doctest::Approx(static_cast<double>(layers) * core).epsilon(1e-9));
      CHECK(sel.core_flops == doctest::Approx(static_cast<double>(layers) * core).epsilon(1e-9));
    }
  }
}

TEST_CASE(
    "recompute_attention_core rebuilds the dropped p and o bit for bit, and rejects a non-block") {
  const model::Model net(config(2, true));
  const model::Batch batch = net.make_batch(2, 4);
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 2);
    const std::span<const float> params = rep.params.span();
    const std::int64_t n = batch.tokens();
    model::UnitCache embed, full, selective;
    Buffer<float> x = net.input(r, batch);
    x = net.unit_forward(r, 0, net.unit_view(params, 0), std::move(x), n, &embed);
    Buffer<float> copy(r.memory(), Category::activations, x.size(), "copy");
    std::copy(x.begin(), x.end(), copy.begin());
    Buffer<float> y1 = net.unit_forward(r, 1, net.unit_view(params, 1), std::move(x), n, &full);
    Buffer<float> y2 = net.unit_forward(r, 1, net.unit_view(params, 1), std::move(copy), n,
                                        &selective, model::Save::without_attention_core);
    CHECK(selective.p.empty());
    recompute_attention_core(r, net, 1, selective);
    CHECK(selective.bytes() == full.bytes());
    // p is (tokens * heads, seq), o (tokens, d_model), both row by row.
    mgpu_test::check_identical("block0's rebuilt p", selective.p, full.p,
                               {.cols = static_cast<std::size_t>(net.config().seq_len)});
    mgpu_test::check_identical("block0's rebuilt o", selective.o, full.o,
                               {.cols = static_cast<std::size_t>(net.config().d_model)});
    CHECK_THROWS_AS(recompute_attention_core(r, net, 0, embed), std::invalid_argument);
    CHECK_THROWS_AS(recompute_attention_core(r, net, 3, embed), std::invalid_argument);
    model::UnitCache empty;
    CHECK_THROWS_AS(recompute_attention_core(r, net, 1, empty), std::invalid_argument);
  });
}

TEST_CASE("selective_forward_backward rejects parameters of the wrong size") {
  // Apart from recompute_attention_core's test, so that test passes before the step is written.
  const model::Model net(config(2, true));
  const model::Batch batch = net.make_batch(2, 4);
  Cluster(1).run([&](Rank& r) {
    model::Replica rep = net.make_replica(r.memory(), 2);
    const std::span<const float> params = rep.params.span();
    CHECK_THROWS_AS(selective_forward_backward(r, net, params.first(3), rep.grads.span(), batch),
                    std::invalid_argument);
  });
}
