// 11.2 visible tests of data parallelism in bf16 mixed precision: the ledger against the
// 2 + 2 + 4 + 8 bytes per parameter of the recipe, replicas identical, a bf16 all-reduce that
// moves half of fp32's bytes, an averaged gradient, and training that stays close to fp32's.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_where.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "11_2_data_parallel/data_parallel.hpp"
#include "11_2_data_parallel/formulas.hpp"
#include "helpers.hpp"
#include "mgpu/course.hpp"

using namespace mgpu;
using namespace mgpu::data_parallel;
using namespace dp_test;  // the model, seed and optimizer every 11.2 test program shares

namespace {

constexpr int kSteps = 3;
constexpr std::array kStateCategories{Category::weights, Category::grads, Category::master,
                                      Category::optimizer};

// What a run of mixed (or fp32) data-parallel steps left on every rank.
struct Run {
  std::vector<std::vector<float>>
      weights;  // per rank: the weights the next forward reads (bf16 widened)
  std::vector<std::vector<float>> master;  // per rank: the fp32 master (mixed only)
  std::vector<double> losses;              // rank 0's loss per step
  std::vector<float> grads;                // rank 0's averaged gradient after the last step
  // Per rank, per category (kStateCategories order): bytes held right after the replica was
  // built, the peak during the steps, and what is held once the last step has returned.
  std::vector<std::array<std::size_t, 4>> built, step_peak, after;
  std::vector<std::size_t> comm_after, comm_peak, total_after;  // per rank
  std::vector<double> all_reduce_bytes;                         // per rank, over all the steps
};

Run train(int ranks, bool mixed, int steps = kSteps, std::int64_t sequences = 8,
          bool same_batch = false) {
  const model::Model net(small_config());
  const auto n = static_cast<std::size_t>(ranks);
  Run run;
  run.weights.resize(n);
  run.master.resize(n);
  run.built.resize(n);
  run.step_peak.resize(n);
  run.after.resize(n);
  run.comm_after.resize(n);
  run.comm_peak.resize(n);
  run.total_after.resize(n);
  run.all_reduce_bytes.resize(n);
  Cluster cluster(ranks);
  cluster.run([&](Rank& r) {
    const auto me = static_cast<std::size_t>(r.id());
    MemoryLedger& ledger = r.memory();
    auto held = [&] {
      std::array<std::size_t, 4> bytes{};
      for (std::size_t i = 0; i < kStateCategories.size(); ++i)
        bytes[i] = ledger.current(kStateCategories[i]);
      return bytes;
    };
    MixedReplica replica16;
    model::Replica replica32;
    std::optional<model::Adam> adam;
    if (mixed) {
      replica16 = make_mixed_replica(ledger, net, kWeightSeed, kAdam);
    } else {
      replica32 = net.make_replica(ledger, kWeightSeed);
      adam.emplace(ledger, net.num_params(), kAdam);
    }
    run.built[me] = held();
    ledger.reset_peaks();
    for (int s = 0; s < steps; ++s) {
      const model::Batch batch =
          net.make_batch(sequences, 1000 + static_cast<std::uint64_t>(same_batch ? 0 : s));
      const double loss = mixed ? data_parallel_step_mixed(r, r.world(), net, replica16, batch)
                                : data_parallel_step(r, r.world(), net, replica32, *adam, batch);
      if (me == 0) run.losses.push_back(loss);
    }
    for (std::size_t i = 0; i < kStateCategories.size(); ++i)
      run.step_peak[me][i] = ledger.peak(kStateCategories[i]);
    run.after[me] = held();
    run.comm_after[me] = ledger.current(Category::comm);
    run.comm_peak[me] = ledger.peak(Category::comm);
    run.total_after[me] = ledger.current_total();
    run.all_reduce_bytes[me] = static_cast<double>(r.traffic().op(OpKind::all_reduce).bytes_sent);
    if (mixed) {
      for (bf16 w : replica16.weights16.span()) run.weights[me].push_back(static_cast<float>(w));
      run.master[me].assign(replica16.master.begin(), replica16.master.end());
      if (me == 0)
        for (bf16 g : replica16.grads16.span()) run.grads.push_back(static_cast<float>(g));
    } else {
      run.weights[me].assign(replica32.params.begin(), replica32.params.end());
      if (me == 0) run.grads.assign(replica32.grads.begin(), replica32.grads.end());
    }
  });
  return run;
}

}  // namespace

TEST_CASE(
    "bf16 mixed replica: the ledger holds 2 + 2 + 4 + 8 bytes per parameter on 1, 4 and 8 ranks") {
  const auto p = model::Model(small_config()).num_params();
  const PrecisionRecipe recipe = kBf16MixedAdam;
  const std::array<double, 4> per_param{recipe.bytes_weights, recipe.bytes_grads,
                                        recipe.bytes_master, recipe.bytes_optimizer};
  static const char* const names[] = {"weights", "grads", "master", "optimizer"};
  for (int n : {1, 4, 8}) {
    const Run run = train(n, true);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      std::size_t state = 0;
      for (std::size_t i = 0; i < per_param.size(); ++i) {
        CAPTURE(n);
        CAPTURE(r);
        CAPTURE(names[i]);
        const auto want = static_cast<std::size_t>(per_param[i] * static_cast<double>(p));
        if (r == 0)
          std::printf(
              "bf16 dp N=%d: %-9s built %zu, step peak %zu, after %zu bytes (formula %zu, P = "
              "%zu)\n",
              n, names[i], run.built[r][i], run.step_peak[r][i], run.after[r][i], want, p);
        CHECK(run.built[r][i] == want);  // exactly the recipe once built
        CHECK(run.step_peak[r][i] ==
              want);  // no fp32 copy counted as weights or gradients, even briefly
        CHECK(run.after[r][i] == want);
        state += want;
      }
      // Between steps the fp32 scratch is gone: the ledger is the 16 bytes per parameter and
      // nothing else.
      CHECK(run.comm_after[r] == 0);
      CHECK(run.total_after[r] == state);
      CHECK(state == 16 * p);
    }
  }
}

TEST_CASE(
    "bf16 mixed: the step's fp32 scratch is at most a widened weight copy and an fp32 gradient") {
  const auto p = model::Model(small_config()).num_params();
  const Run run = train(4, true);
  std::printf("bf16 dp N=4: comm peak during a step %zu bytes = %.2f x 4P\n", run.comm_peak[0],
              static_cast<double>(run.comm_peak[0]) / static_cast<double>(4 * p));
  CHECK(run.comm_peak[0] > 0);  // the model computes in fp32, so something was widened
  CHECK(run.comm_peak[0] <= 8 * p);
}

TEST_CASE("bf16 mixed replicas stay bitwise identical after several steps") {
  const Run run = train(4, true);
  check_replicas_identical("bf16 weights (widened)", run.weights);
  check_replicas_identical("fp32 master", run.master);
}

TEST_CASE("the bf16 gradient all-reduce moves exactly half the bytes of fp32") {
  const double p = static_cast<double>(model::Model(small_config()).num_params());
  for (int n : {2, 4, 8}) {
    const Run fp32 = train(n, false, 1);
    const Run mixed = train(n, true, 1);
    double bytes32 = 0, bytes16 = 0;
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      CHECK(2 * mixed.all_reduce_bytes[i] ==
            fp32.all_reduce_bytes[i]);  // same elements, 2 bytes instead of 4
      bytes32 += fp32.all_reduce_bytes[i] / n;
      bytes16 += mixed.all_reduce_bytes[i] / n;
    }
    std::printf(
        "dp step, %d ranks: all-reduce bytes sent per rank (mean) fp32 %.1f, bf16 %.1f; formula "
        "with 2 bytes per gradient %.1f\n",
        n, bytes32, bytes16, gradient_all_reduce_bytes_per_rank(n, p, 2.0));
    CHECK(bytes16 > 0);
    CHECK(bytes16 == doctest::Approx(gradient_all_reduce_bytes_per_rank(n, p, 2.0)).epsilon(1e-12));
  }
}

TEST_CASE("after a bf16 step every rank holds the average of the gradients, not the sum") {
  // The reference: one rank's fp32 gradient of the whole batch at the bf16-rounded initial
  // weights, the weights the mixed forward computes with.
  const model::Model net(small_config());
  const model::Batch batch = net.make_batch(8, 1000);
  std::vector<float> reference;
  Cluster(1).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    std::vector<bf16> rounded(net.num_params());
    model::to_bf16(replica.params.span(), rounded);
    model::to_float(rounded, replica.params.span());
    net.forward_backward(r, replica.params.span(), replica.grads.span(), batch);
    reference.assign(replica.grads.begin(), replica.grads.end());
  });
  const Run run = train(4, true, 1);
  // Each rank's gradient is rounded once and the average once more: a few 2^-8 relative steps
  // of gradients up to their largest. A sum would be off by 3 times the gradient itself.
  const double scale = mgpu_test::max_abs(reference);
  std::printf(
      "bf16 dp gradient vs whole-batch fp32 gradient: max |diff| %.2e (gradients up to %.2e)\n",
      mgpu_test::max_abs_diff(run.grads, reference), scale);
  INFO("rank 0's averaged bf16 gradient against one rank's fp32 gradient of the whole batch");
  mgpu_test::check_close("gradient", run.grads, reference, {0.01 * scale, 0},
                         {.rank = 0, .ranks = 4, .where = mgpu_test::model_tensors(net)});
}

TEST_CASE("bf16 mixed data parallelism trains like fp32 data parallelism") {
  // Weights: the bf16 weights are the master rounded (at most 2^-8 |w|: bf16 keeps 8 significant
  // bits); the master drifts from the fp32 run only through the rounded gradients, and Adam divides
  // each update by sqrt(v), so a gradient near zero whose rounding flips its sign moves a weight by
  // at most 2 lr per step. Loss: at the first step the forward reads weights within 2^-8 of fp32's
  // and the losses agree to about 4e-4 (relative); later steps add the drift above, up to about
  // 0.5% here, where a learning rate of 1e-2 cuts the loss five-fold in three steps. 2% keeps a 4x
  // margin.
  const Run fp32 = train(4, false);
  const Run mixed = train(4, true);
  double typical = 0, largest = 0;  // mean and max difference
  for (std::size_t i = 0; i < fp32.weights[0].size(); ++i) {
    const double a = mixed.weights[0][i], b = fp32.weights[0][i];
    largest = std::max(largest, std::abs(a - b));
    typical += std::abs(a - b) / static_cast<double>(fp32.weights[0].size());
  }
  double loss_rel = 0;
  for (int s = 0; s < kSteps; ++s) {
    const auto i = static_cast<std::size_t>(s);
    loss_rel = std::max(loss_rel, std::abs(mixed.losses[i] - fp32.losses[i]) / fp32.losses[i]);
    std::printf("step %d loss: fp32 %.6f, bf16 mixed %.6f\n", s, fp32.losses[i], mixed.losses[i]);
  }
  std::printf(
      "bf16 vs fp32 dp, N=4, %d steps: max |w16 - w32| %.3g, mean %.3g (lr * steps %.3g), "
      "max relative loss difference %.2e\n",
      kSteps, largest, typical, kAdam.lr * kSteps, loss_rel);
  // |w16 - w32| <= 2^-8 |w32| + 2 lr steps, element by element.
  INFO("rank 0's bf16 weights against the fp32 run's, within 2^-8 |w| + 2 lr steps");
  mgpu_test::check_close(
      "weights", mixed.weights[0], fp32.weights[0], {2.0 * kAdam.lr * kSteps, std::ldexp(1.0, -8)},
      {.rank = 0, .where = mgpu_test::model_tensors(model::Model(small_config()))});
  CHECK(typical <= 0.25 * kAdam.lr * kSteps);  // most updates agree: the drift is not systematic
  CHECK(loss_rel <= 0.02);

  // And it learns: on one batch repeated, the loss falls as in fp32.
  const Run fit = train(4, true, 30, 8, true);
  std::printf("bf16 dp N=4, one batch 30 times: loss %.5f -> %.5f\n", fit.losses.front(),
              fit.losses.back());
  CHECK(fit.losses.back() < 0.9 * fit.losses.front());
}
