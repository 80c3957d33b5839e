// Visible tests of the 3D step's parts, one TODO at a time, each able to pass before the step
// itself runs (the first rungs of the README's ladder; `./mgpu test '11_7.*rung 0'` runs them):
// the tensor-parallel block forward and backward against the runtime's one-rank unit at
// tp = 1, 2, 4; a stage boundary sent and received between two stages, with its bytes; ZeRO-1's
// update against plain Adam on the summed gradient at dp = 1, 2, 4; the 1F1B order. Expected
// values come from the runtime's model and Adam, never from the code tested.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "11_7_3d_and_experts/step3d.hpp"
#include "helpers.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu_test/compare.hpp"

using namespace mgpu;
using namespace mgpu::layout;

namespace {

constexpr std::uint64_t kSeed = 5;
constexpr int kUnit = 2;                 // block1: a block in the middle of the model
constexpr std::int64_t kTokens = 2 * 4;  // two sequences of seq_len 4

using layout_test::config;

// Smooth, sign-changing test data, different for each `salt`.
std::vector<float> wave(std::size_t n, double salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(0.5 * std::sin(0.37 * static_cast<double>(i) + salt));
  return v;
}

Buffer<float> activations_of(Rank& r, const std::vector<float>& values) {
  Buffer<float> b(r.memory(), Category::activations, values.size(), "test.x");
  std::copy(values.begin(), values.end(), b.begin());
  return b;
}

// The whole model's parameters, and the one-rank forward output, input gradient and parameter
// gradient (whole-model flat, zero outside the unit) of unit kUnit for input x and output
// gradient dy.
struct OneRankBlock {
  std::vector<float> params, y, dx, grads;
};

OneRankBlock one_rank_block(const model::Model& m, const std::vector<float>& x,
                            const std::vector<float>& dy) {
  OneRankBlock out;
  out.params.resize(m.num_params());
  m.init_params(out.params, kSeed);
  out.grads.assign(m.num_params(), 0.0f);
  const model::UnitInfo& u = m.unit(kUnit);
  Cluster(1).run([&](Rank& r) {
    model::UnitCache cache;
    const auto w = std::span<const float>(out.params).subspan(u.offset, u.count);
    Buffer<float> y = m.unit_forward(r, kUnit, w, activations_of(r, x), kTokens, &cache);
    out.y.assign(y.begin(), y.end());
    Buffer<float> dx = m.unit_backward(
        r, kUnit, w, std::span<float>(out.grads).subspan(u.offset, u.count), cache, dy);
    out.dx.assign(dx.begin(), dx.end());
  });
  return out;
}

// What one tp rank computed for unit kUnit.
struct TpRun {
  Share share;
  std::vector<float> y, dx, grads, want_grads;  // grads: the share-long flat buffer
  bool cache_emptied = false;
};

std::vector<TpRun> tp_block_runs(const model::Model& m, int t, const OneRankBlock& want,
                                 const std::vector<float>& x, const std::vector<float>* dy) {
  std::vector<TpRun> runs(static_cast<std::size_t>(t));
  Cluster(t).run([&](Rank& r) {
    TpRun& run = runs[static_cast<std::size_t>(r.id())];
    const RankCoords coords{r.id(), 0, 0};
    run.share = plan_share(m, Layout{t, 1, 1}, coords);
    std::vector<float> params(run.share.padded);
    cut_share(m, run.share, coords, want.params, params);
    run.grads.assign(run.share.padded, 0.0f);
    run.want_grads.assign(run.share.padded, 0.0f);
    cut_share(m, run.share, coords, want.grads, run.want_grads);
    const auto w = run.share.unit_view(std::span<const float>(params), kUnit);
    BlockCache3d cache;
    Buffer<float> y =
        tp_block_forward(r, r.world(), m, kUnit, w, activations_of(r, x), kTokens, cache);
    run.y.assign(y.begin(), y.end());
    if (dy == nullptr) return;
    const auto g = run.share.unit_view(std::span<float>(run.grads), kUnit);
    Buffer<float> dx = tp_block_backward(r, r.world(), m, kUnit, w, g, cache, *dy);
    run.dx.assign(dx.begin(), dx.end());
    run.cache_emptied = cache.x.size() == 0 && cache.h.size() == 0 && cache.p.size() == 0;
  });
  return runs;
}

// The ranks of `total` and "tp rank i of t" for labels.
std::string tp_rank(std::size_t i, int t) {
  return "tp rank " + std::to_string(i) + " of " + std::to_string(t);
}

constexpr double kRel = 1e-5;  // fp32: the same sums in a different order

// "forward of micro-batch 2": an entry of a 1F1B order.
std::string entry_name(const std::pair<bool, int>& e) {
  return std::string(e.first ? "forward" : "backward") + " of micro-batch " +
         std::to_string(e.second);
}

// Whether the stages' orders (orders[s] for stage s of a pipeline) fit together: plays them as
// the step runs them, with buffered sends, where stage s may run the forward of micro-batch i
// only once stage s - 1 has run it (its activation arrives), and the backward of i only once
// stage s + 1 has run it (its gradient arrives). Returns "" when every stage gets through its
// order, or, when every stage still running waits on another, one line per stage saying what it
// waits for: the deadlock train_step_3d would hit with these orders.
std::string order_deadlock(const std::vector<std::vector<std::pair<bool, int>>>& orders) {
  const std::size_t p = orders.size();
  std::vector<std::size_t> next(p, 0);  // next entry of each stage
  // done[s] holds the entries stage s has run, as (forward?, micro-batch).
  std::vector<std::vector<std::pair<bool, int>>> done(p);
  const auto has_run = [&](std::size_t s, const std::pair<bool, int>& e) {
    return std::find(done[s].begin(), done[s].end(), e) != done[s].end();
  };
  // The stage whose entry `e` of stage s waits for, or p when it waits for none.
  const auto waits_on = [&](std::size_t s, const std::pair<bool, int>& e) {
    if (e.first && s > 0) return s - 1;
    if (!e.first && s + 1 < p) return s + 1;
    return p;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t s = 0; s < p; ++s) {
      while (next[s] < orders[s].size()) {
        const auto& e = orders[s][next[s]];
        const std::size_t from = waits_on(s, e);
        if (from != p && !has_run(from, e)) break;
        done[s].push_back(e);
        ++next[s];
        moved = true;
      }
    }
  }
  std::string stuck;
  for (std::size_t s = 0; s < p; ++s) {
    if (next[s] == orders[s].size()) continue;
    const auto& e = orders[s][next[s]];
    stuck += "\n  stage " + std::to_string(s) + " waits at entry " + std::to_string(next[s]) +
             " (" + entry_name(e) + ") for stage " + std::to_string(waits_on(s, e)) +
             "'s, which that stage has not run";
  }
  return stuck;
}

// "F0 F1 B0 F2 B1 B2": an order, compactly.
std::string order_text(const std::vector<std::pair<bool, int>>& order) {
  std::string t;
  for (const auto& [fwd, i] : order)
    t += (t.empty() ? "" : " ") + std::string(fwd ? "F" : "B") + std::to_string(i);
  return t;
}

}  // namespace

TEST_CASE("11.7 3D rung 0a: tp_block_forward equals the one-rank block at tp = 1, 2, 4") {
  const model::Model m(config());
  const auto n = static_cast<std::size_t>(kTokens * m.config().d_model);
  const std::vector<float> x = wave(n, 0.1);
  const OneRankBlock want = one_rank_block(m, x, wave(n, 1.3));
  const double atol = kRel * mgpu_test::max_abs(want.y);
  for (const int t : {1, 2, 4}) {
    const std::vector<TpRun> runs = tp_block_runs(m, t, want, x, nullptr);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      mgpu_test::check_close("unit 2 (block1) forward output y, " + tp_rank(i, t), runs[i].y,
                             want.y, {atol, 0});
    }
  }
}

TEST_CASE("11.7 3D rung 0b: tp_block_backward gives each rank's slice of the one-rank gradients") {
  const model::Model m(config());
  const auto n = static_cast<std::size_t>(kTokens * m.config().d_model);
  const std::vector<float> x = wave(n, 0.1), dy = wave(n, 1.3);
  const OneRankBlock want = one_rank_block(m, x, dy);
  const double atol = kRel * mgpu_test::max_abs(want.dx);
  for (const int t : {1, 2, 4}) {
    const std::vector<TpRun> runs = tp_block_runs(m, t, want, x, &dy);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const TpRun& run = runs[i];
      mgpu_test::check_close("unit 2 (block1) input gradient dx, " + tp_rank(i, t), run.dx, want.dx,
                             {atol, 0});
      // Every tensor of the block: wq, wk, wv, wo, w1, b1, w2, b2, each against the matching
      // slice of the one-rank gradient.
      const auto unit = run.share.unit_begin[static_cast<std::size_t>(kUnit)];
      const auto count = run.share.unit_begin[static_cast<std::size_t>(kUnit) + 1] - unit;
      share_compare::check_share(m, run.share, run.grads, run.want_grads, unit, count, kRel,
                                 "tp_block_backward", "grad", tp_rank(i, t));
      CHECK_MESSAGE(run.cache_emptied, "tp_block_backward leaves the cache full on "
                                           << tp_rank(i, t) << "; it should empty it");
    }
  }
}

TEST_CASE("11.7 3D rung 0c: a boundary sent and received between two stages arrives whole") {
  const model::Model m(config());
  const auto d = static_cast<std::size_t>(m.config().d_model);
  const std::size_t elements = static_cast<std::size_t>(kTokens) * d;
  const std::vector<float> activation = wave(elements, 0.4), gradient = wave(elements, 2.2);
  for (const int t : {1, 2}) {
    CAPTURE(t);
    const Layout l{t, 2, 1};
    const int n = 2 * t;
    std::vector<std::vector<float>> received(static_cast<std::size_t>(n));
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      ProcessGrid grid(r.world(), l);
      // Stage 0 sends the activation forward, stage 1 the gradient back; each receives the other.
      const bool first = grid.is_first_stage();
      if (first) {
        send_boundary(grid, Direction::forward, activation, 3);
        Buffer<float> got = receive_boundary(r, grid, Direction::backward, elements, 3);
        received[static_cast<std::size_t>(r.id())].assign(got.begin(), got.end());
      } else {
        Buffer<float> got = receive_boundary(r, grid, Direction::forward, elements, 3);
        received[static_cast<std::size_t>(r.id())].assign(got.begin(), got.end());
        send_boundary(grid, Direction::backward, gradient, 3);
      }
    });
    std::uint64_t stage_pp_bytes[2] = {0, 0};
    for (int i = 0; i < n; ++i) {
      const bool first = i < t;  // tp is the fastest axis: ranks 0..t-1 are stage 0
      const std::string who = "rank " + std::to_string(i) + " (stage " + (first ? "0" : "1") +
                              ", tp " + std::to_string(i % t) + " of " + std::to_string(t) + ")";
      mgpu_test::check_close(std::string(first ? "gradient received from stage 1"
                                               : "activation received from stage 0") +
                                 " on " + who,
                             received[static_cast<std::size_t>(i)], first ? gradient : activation);
      const TrafficMeter& meter = cluster.report(i).traffic;
      stage_pp_bytes[first ? 0 : 1] += meter.group("pp").bytes_sent;
      // Rebuilding the tensor from the slices inside the stage: one all-gather.
      const double gathered = static_cast<double>(elements * 4) * (t - 1) / t;
      CHECK_MESSAGE(static_cast<double>(meter.of(OpKind::all_gather, "tp").bytes_sent) == gathered,
                    who << " sent " << meter.of(OpKind::all_gather, "tp").bytes_sent
                        << " bytes in tp all-gathers; rebuilding one tensor of " << elements * 4
                        << " bytes from " << t << " slices sends " << gathered);
    }
    // Each stage sent one tensor across the boundary, once: tp slices that add up to one copy.
    for (int s = 0; s < 2; ++s) {
      CHECK_MESSAGE(stage_pp_bytes[s] == elements * 4,
                    "stage " << s << "'s " << t << " ranks sent " << stage_pp_bytes[s]
                             << " bytes over pp for one boundary tensor of " << elements * 4
                             << " bytes (" << (stage_pp_bytes[s] / (elements * 4.0))
                             << " copies; the stage should send it once)");
    }
  }
}

TEST_CASE("11.7 3D rung 0d: zero1_update equals Adam on the summed gradient at dp = 1, 2, 4") {
  const model::Model m(config());
  const std::size_t total = m.num_params();
  constexpr int kUpdates = 2;  // the second shows whether Adam's moments were kept
  // Replica r's gradient for update k.
  const auto gradient = [&](int r, int k) { return wave(total, 0.7 * r + 3.1 * k); };
  for (const int dp : {1, 2, 4}) {
    CAPTURE(dp);
    // Plain Adam on the whole model and the gradient summed over the replicas.
    std::vector<std::vector<float>> want_params, want_grads;
    Cluster(1).run([&](Rank& r) {
      std::vector<float> params(total);
      m.init_params(params, kSeed);
      model::Adam adam(r.memory(), total);
      for (int k = 0; k < kUpdates; ++k) {
        std::vector<float> sum(total, 0.0f);
        for (int d = 0; d < dp; ++d) {
          const std::vector<float> g = gradient(d, k);
          for (std::size_t i = 0; i < total; ++i) sum[i] += g[i];
        }
        adam.step(params, sum);
        want_grads.push_back(sum);
        want_params.push_back(params);
      }
    });
    struct Seen {
      Share share;
      RankCoords coords;
      std::vector<std::vector<float>> params, grads, want_params, want_grads;
    };
    std::vector<Seen> seen(static_cast<std::size_t>(dp));
    Cluster(dp).run([&](Rank& r) {
      ProcessGrid grid(r.world(), Layout{1, 1, dp});
      State3d state = make_state_3d(r, grid, m, kSeed);
      Seen& s = seen[static_cast<std::size_t>(r.id())];
      s.share = state.share;
      s.coords = grid.coords();
      for (int k = 0; k < kUpdates; ++k) {
        std::vector<float> mine(state.share.padded);
        cut_share(m, state.share, grid.coords(), gradient(static_cast<int>(grid.coords().dp), k),
                  mine);
        std::copy(mine.begin(), mine.end(), state.grads.begin());
        zero1_update(r, grid, state);
        s.params.emplace_back(state.params.begin(), state.params.end());
        s.grads.emplace_back(state.grads.begin(), state.grads.end());
        const auto cut = [&](const std::vector<float>& whole) {
          std::vector<float> local(state.share.padded);
          cut_share(m, state.share, grid.coords(), whole, local);
          return local;
        };
        s.want_params.push_back(cut(want_params[static_cast<std::size_t>(k)]));
        s.want_grads.push_back(cut(want_grads[static_cast<std::size_t>(k)]));
      }
    });
    for (std::size_t i = 0; i < seen.size(); ++i) {
      const Seen& s = seen[i];
      const std::string who = "dp rank " + std::to_string(i) + " of " + std::to_string(dp);
      for (int k = 0; k < kUpdates; ++k) {
        const auto at = static_cast<std::size_t>(k);
        const std::string update = "update " + std::to_string(k + 1);
        // Its own shard of the gradient holds the sum over the replicas; every parameter
        // equals plain Adam's, the other shards' too (the all-gather brought them).
        const std::size_t first = static_cast<std::size_t>(s.coords.dp) * s.share.shard;
        const std::size_t own =
            std::min(s.share.shard, s.share.count - std::min(first, s.share.count));
        share_compare::check_share(m, s.share, s.grads[at], s.want_grads[at], first, own, 1e-6,
                                   update, "grad (own shard, summed over replicas)", who);
        share_compare::check_share(m, s.share, s.params[at], s.want_params[at], 0, s.share.count,
                                   1e-6, update, "param", who);
      }
    }
  }
}

TEST_CASE(
    "11.7 3D rung 0e: one_f_one_b_order is a valid order that holds min(m, p - s), and the "
    "stages' orders run together without a deadlock") {
  for (int p = 1; p <= 4; ++p) {
    for (int s = 0; s < p; ++s) {
      for (int m = 1; m <= 6; ++m) {
        const std::string at = "stage " + std::to_string(s) + " of " + std::to_string(p) +
                               ", m = " + std::to_string(m);
        const auto order = one_f_one_b_order(s, p, m);
        REQUIRE_MESSAGE(order.size() == static_cast<std::size_t>(2 * m),
                        at << ": " << order.size() << " entries, expected 2m = " << 2 * m);
        int next_forward = 0, next_backward = 0, in_flight = 0, peak = 0;
        for (std::size_t k = 0; k < order.size(); ++k) {
          const auto& [fwd, i] = order[k];
          const int& expected = fwd ? next_forward : next_backward;
          REQUIRE_MESSAGE(i == expected, at << ", entry " << k << ": "
                                            << (fwd ? "forward" : "backward") << " of micro-batch "
                                            << i << ", expected micro-batch " << expected
                                            << " (each kind runs in order)");
          REQUIRE_MESSAGE((fwd || i < next_forward), at << ", entry " << k
                                                        << ": backward of micro-batch " << i
                                                        << " before its forward");
          (fwd ? next_forward : next_backward) += 1;
          in_flight += fwd ? 1 : -1;
          peak = std::max(peak, in_flight);
        }
        CHECK_MESSAGE(peak == std::min(m, p - s),
                      at << ": " << peak
                         << " micro-batches in flight at the peak, expected min(m, p - s) = "
                         << std::min(m, p - s));
      }
    }
  }
  // Each order can be valid alone and still deadlock with its neighbour's (a stage that runs a
  // backward before the forward its next stage waits for): play all the stages together, as
  // train_step_3d will, so that such a pair fails here rather than in rung 3's hung step.
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 6; ++m) {
      std::vector<std::vector<std::pair<bool, int>>> orders;
      std::string all;
      for (int s = 0; s < p; ++s) {
        orders.push_back(one_f_one_b_order(s, p, m));
        all += "\n  stage " + std::to_string(s) + ": " + order_text(orders.back());
      }
      const std::string deadlock = order_deadlock(orders);
      REQUIRE_MESSAGE(deadlock.empty(),
                      p << " stages, m = " << m
                        << ": the orders deadlock when the stages run them together (each is "
                           "valid alone; a backward that waits for the next stage must come "
                           "after every forward that stage needs first):"
                        << deadlock << "\n  their orders:" << all);
    }
  }
}
