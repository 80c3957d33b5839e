// 11.5 visible tests of the running pipeline: the schedules as data (valid, the right shape, the
// in-flight counts of in_flight_micro_batches), check_schedule's verdict on broken schedules,
// gradients equal to the unpipelined model's, the bubble measured on the virtual clock against
// gpipe_bubble_fraction and interleaved_bubble_fraction, and the peak in-flight activations
// measured from the ledger.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_where.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "11_5_pipeline/formulas.hpp"
#include "11_5_pipeline/schedules.hpp"
#include "runtime_probes.hpp"

using namespace mgpu;
using namespace mgpu::pipeline;
using mgpu_test::check_close;
using mgpu_test::max_abs;
using mgpu_test::max_abs_diff;
using pipeline_probes::free_links;

namespace {

// "F3", "B3", "I3" (backward-input), "W3" (backward-weight), with ":1" for chunk 1: an action,
// short enough to print a whole program.
std::string short_name(const Action& a) {
  const char* letters[] = {"F", "B", "I", "W"};
  return letters[static_cast<int>(a.pass)] + std::to_string(a.micro_batch) +
         (a.chunk != 0 ? ":" + std::to_string(a.chunk) : "");
}

// A stage's program against the expected one: one message naming the first position that
// differs, both actions, and both programs whole (F forward, B backward, I and W its halves).
void check_program(const std::string& label, const std::vector<Action>& got,
                   const std::vector<Action>& want) {
  mgpu_test::check_sequence(label, got, want, short_name);
}

// Blocks dominate the compute (FFN only, d_ff = 16 d_model) while the embedding and head are
// one feature wide, so every stage costs the same up to about 0.1%: the bubble formula applies.
model::ModelConfig equal_stage_config(std::int64_t layers = 4) {
  return model::ModelConfig{.d_in = 1,
                            .d_model = 16,
                            .d_ff = 256,
                            .n_layers = layers,
                            .seq_len = 2,
                            .d_out = 1,
                            .attention = false};
}

// A model with attention, for the gradient comparison.
model::ModelConfig attention_config(std::int64_t layers = 4) {
  return model::ModelConfig{.d_in = 5,
                            .d_model = 12,
                            .d_ff = 24,
                            .n_layers = layers,
                            .n_heads = 2,
                            .seq_len = 3,
                            .d_out = 3};
}

constexpr std::uint64_t kWeightSeed = 5;

// What one pipelined step left on every stage.
struct Step {
  std::vector<float> grads;     // the stages' unit gradients put together (model layout)
  double loss = 0;              // returned by the last stage
  std::vector<double> compute;  // per stage, seconds of compute
  std::vector<std::size_t> activation_peak;  // per stage, ledger peak of Category::activations
  double makespan = 0;
};

// The units stage s holds for its chunk c: model chunk c*p + s of p*v (see PipelineSchedule).
StageUnits chunk_of_stage(const model::Model& net, int p, int v, int s, int c) {
  return stage_units(net, p * v, c * p + s);
}

// Copies units [units.first, units.last) of a whole-model flat buffer `from` into `to`: a stage
// writes only its own units, so a pipeline's gradient is pieced together stage by stage.
void copy_units(const model::Model& net, StageUnits units, const std::vector<float>& from,
                std::vector<float>& to) {
  for (int u = units.first; u < units.last; ++u) {
    const model::UnitInfo& info = net.unit(u);
    const auto at = static_cast<std::ptrdiff_t>(info.offset);
    std::copy_n(from.begin() + at, info.count, to.begin() + at);
  }
}

Step pipelined_step(const model::Model& net, const ClusterConfig& cc,
                    const PipelineSchedule& schedule, const model::Batch& batch) {
  const int p = cc.world_size, v = schedule.chunks;
  const std::vector<model::Batch> micro = split_micro_batches(batch, schedule.micro_batches);
  Step step;
  step.grads.assign(net.num_params(), 0.0f);
  Cluster cluster(cc);
  std::vector<std::vector<float>> stage_grads(static_cast<std::size_t>(p));
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    const int s = r.world().rank();
    // One chunk per stage: the form that names the stage's units, as a caller written before
    // chunks does; several: the form that works them out.
    const double loss = v == 1 ? run_pipeline(r, r.world(), net, stage_units(net, p, s), schedule,
                                              replica.params.span(), replica.grads.span(), micro)
                               : run_pipeline(r, r.world(), net, schedule, replica.params.span(),
                                              replica.grads.span(), micro);
    if (s == p - 1) step.loss = loss;
    stage_grads[static_cast<std::size_t>(r.id())].assign(replica.grads.begin(),
                                                         replica.grads.end());
  });
  for (int s = 0; s < p; ++s) {
    for (int c = 0; c < v; ++c) {
      copy_units(net, chunk_of_stage(net, p, v, s, c), stage_grads[static_cast<std::size_t>(s)],
                 step.grads);
    }
    step.compute.push_back(cluster.report(s).clock.compute_time());
    step.activation_peak.push_back(cluster.report(s).memory.peak(Category::activations));
  }
  step.makespan = cluster.makespan();
  return step;
}

Step pipelined_step(const model::Model& net, const ClusterConfig& cc, bool one_f_one_b, int m,
                    const model::Batch& batch) {
  const int p = cc.world_size;
  return pipelined_step(net, cc, one_f_one_b ? one_f_one_b_schedule(p, m) : gpipe_schedule(p, m),
                        batch);
}

// The unpipelined model on the whole batch, on one rank: the loss and gradients every pipeline
// must give, and the gradients' tolerance, 1e-5 of max(1, max |g|) (fp32 sums in other orders).
struct Reference {
  double loss = 0;
  std::vector<float> grads;
  mgpu_test::Tolerance tol;
  mgpu_test::Context where;  // names a gradient's tensor, element and unit in a report
};

Reference reference_step(const model::Model& net, const model::Batch& batch) {
  Reference ref;
  Cluster cluster(1);
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    ref.loss = net.forward_backward(r, replica.params.span(), replica.grads.span(), batch);
    ref.grads.assign(replica.grads.begin(), replica.grads.end());
  });
  ref.tol = {1e-5 * std::max(1.0, max_abs(ref.grads)), 0};
  ref.where = {.where = mgpu_test::model_tensors(net)};
  return ref;
}

// A pipelined step's gradients (named `label` in a failure) and loss against the reference's.
// Wrong gradients end the test: the loops over p and m would only repeat the first failure.
void check_step(const std::string& label, const Step& step, const Reference& ref) {
  mgpu_test::require_close(label, step.grads, ref.grads, ref.tol, ref.where);
  CHECK(step.loss == doctest::Approx(ref.loss).epsilon(1e-5));
}

// Bytes one micro-batch leaves saved by each unit between its forward and its backward,
// measured with the runtime's own unit_forward (no chapter code).
std::vector<std::size_t> saved_bytes_per_unit(const model::Model& net, const model::Batch& micro) {
  return pipeline_probes::saved_bytes_per_unit(net, micro, kWeightSeed);
}

// The same, summed over the units of a range (a stage, or one chunk of a stage).
std::size_t saved_bytes(const std::vector<std::size_t>& per_unit, StageUnits units) {
  std::size_t bytes = 0;
  for (int u = units.first; u < units.last; ++u) bytes += per_unit[static_cast<std::size_t>(u)];
  return bytes;
}

std::size_t saved_bytes_per_micro_batch(const model::Model& net, int p, int s,
                                        const model::Batch& micro) {
  return saved_bytes(saved_bytes_per_unit(net, micro), stage_units(net, p, s));
}

// The interleaved contract's warm-up and steady state, checked by playing the programs in slots
// of one chunk-pass each with free messages (each action starts once its stage is free and its
// input exists): on every stage, the forwards before the first backward all end by the time that
// backward's gradient exists, and one more would not have (unless the stage ran all m v first);
// after the first backward, backwards and forwards take turns until the forwards run out.
// Returns "" or what is wrong.
std::string interleaved_order_problem(const PipelineSchedule& s) {
  const int p = s.stages, v = s.chunks, last = p * v - 1;
  using Key = std::tuple<int, bool, int, int>;  // stage, forward?, micro-batch, chunk
  std::map<Key, int> end;                       // when each action ends, in slots
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<int> free_at(static_cast<std::size_t>(p), 0);
  // The action whose output `a` on stage st needs, or nothing for model chunk 0's forward.
  const auto input_of = [&](int st, const Action& a) -> std::optional<Key> {
    const int j = a.chunk * p + st;
    if (a.pass == Pass::forward)
      return j == 0 ? std::nullopt
                    : std::optional<Key>({(j - 1) % p, true, a.micro_batch, (j - 1) / p});
    if (j == last) return Key{st, true, a.micro_batch, a.chunk};
    return Key{(j + 1) % p, false, a.micro_batch, (j + 1) / p};
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int st = 0; st < p; ++st) {
      const auto& program = s.per_stage[static_cast<std::size_t>(st)];
      for (auto& i = next[static_cast<std::size_t>(st)]; i < program.size(); ++i) {
        const Action& a = program[i];
        const std::optional<Key> in = input_of(st, a);
        if (in && !end.count(*in)) break;
        int& t = free_at[static_cast<std::size_t>(st)];
        t = std::max(t, in ? end[*in] : 0) + 1;
        end[{st, a.pass == Pass::forward, a.micro_batch, a.chunk}] = t;
        moved = true;
      }
    }
  }
  for (int st = 0; st < p; ++st) {
    const auto& program = s.per_stage[static_cast<std::size_t>(st)];
    const std::string at = "stage " + std::to_string(st) + ": ";
    if (next[static_cast<std::size_t>(st)] != program.size()) return at + "does not run to its end";
    std::size_t f = 0;  // forwards before the first backward
    while (f < program.size() && program[f].pass == Pass::forward) ++f;
    if (f == 0 || f == program.size()) return at + "no forward before its first backward";
    const Action& b = program[f];
    const int ready = end[*input_of(st, b)];
    const Action& lf = program[f - 1];
    const int last_forward_end = end[{st, true, lf.micro_batch, lf.chunk}];
    const auto all = static_cast<std::size_t>(s.micro_batches) * static_cast<std::size_t>(v);
    if (last_forward_end > ready)
      return at + std::to_string(f) +
             " forwards before the first backward: the last ends at slot " +
             std::to_string(last_forward_end) + ", after its gradient exists (slot " +
             std::to_string(ready) + ")";
    if (f < all && last_forward_end < ready)
      return at + std::to_string(f) +
             " forwards before the first backward, whose gradient exists " + "only at slot " +
             std::to_string(ready) + ": another forward fits";
    for (std::size_t i = f, forwards_left = all - f; i < program.size(); ++i) {
      const bool want_forward = (i - f) % 2 == 1 && forwards_left > 0;
      if ((program[i].pass == Pass::forward) != want_forward)
        return at + "position " + std::to_string(i) + " (" + describe(program[i]) +
               ") breaks the turns of backward and forward";
      if (want_forward) --forwards_left;
    }
  }
  return "";
}
}  // namespace

TEST_CASE("gpipe_schedule: every stage runs all forwards in order, then all backwards in order") {
  const PipelineSchedule s = gpipe_schedule(3, 4);
  CHECK(s.stages == 3);
  CHECK(s.micro_batches == 4);
  REQUIRE(s.per_stage.size() == 3);
  std::vector<Action> want;
  for (int k = 0; k < 4; ++k) want.push_back({Pass::forward, k});
  for (int k = 0; k < 4; ++k) want.push_back({Pass::backward, k});
  for (std::size_t st = 0; st < s.per_stage.size(); ++st)
    check_program("gpipe_schedule(3, 4), stage " + std::to_string(st), s.per_stage[st], want);
  CHECK_THROWS_AS(gpipe_schedule(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(gpipe_schedule(2, 0), std::invalid_argument);
}

TEST_CASE(
    "one_f_one_b_schedule: the programs for p = 2, m = 3, and for fewer micro-batches than "
    "stages") {
  const PipelineSchedule s = one_f_one_b_schedule(2, 3);
  REQUIRE(s.per_stage.size() == 2);
  const auto F = [](int k) { return Action{Pass::forward, k}; };
  const auto B = [](int k) { return Action{Pass::backward, k}; };
  check_program("one_f_one_b_schedule(2, 3), stage 0", s.per_stage[0],
                {F(0), F(1), B(0), F(2), B(1), B(2)});
  check_program("one_f_one_b_schedule(2, 3), stage 1", s.per_stage[1],
                {F(0), B(0), F(1), B(1), F(2), B(2)});
  // Fewer micro-batches than stages: stage 0 may hold all of them.
  const PipelineSchedule short_one = one_f_one_b_schedule(4, 2);
  check_program("one_f_one_b_schedule(4, 2), stage 0", short_one.per_stage[0],
                {F(0), F(1), B(0), B(1)});
  CHECK_THROWS_AS(one_f_one_b_schedule(0, 1), std::invalid_argument);
  CHECK_THROWS_AS(one_f_one_b_schedule(1, 0), std::invalid_argument);
}

TEST_CASE("both schedules are valid and hold the micro-batches in_flight_micro_batches says") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 12; ++m) {
      const PipelineSchedule g = gpipe_schedule(p, m);
      const PipelineSchedule f = one_f_one_b_schedule(p, m);
      CHECK_NOTHROW(check_schedule(g));
      CHECK_NOTHROW(check_schedule(f));
      for (int s = 0; s < p; ++s) {
        CHECK(schedule_in_flight(g, s) == in_flight_micro_batches(Schedule::gpipe, p, m, s));
        CHECK(schedule_in_flight(f, s) == in_flight_micro_batches(Schedule::one_f_one_b, p, m, s));
      }
    }
  }
}

TEST_CASE("check_schedule rejects a backward before its forward and a missing pass") {
  PipelineSchedule s = gpipe_schedule(2, 2);
  s.per_stage[1] = {
      {Pass::backward, 0}, {Pass::forward, 0}, {Pass::forward, 1}, {Pass::backward, 1}};
  CHECK_THROWS_AS(check_schedule(s), std::invalid_argument);
  s = gpipe_schedule(2, 2);
  s.per_stage[0].pop_back();
  CHECK_THROWS_AS(check_schedule(s), std::invalid_argument);
}

TEST_CASE(
    "run_forward_action: the last stage gets each micro-batch's scaled loss and its gradient from "
    "what the stage before sent, in any order") {
  // Two stages, two micro-batches; stage 1 takes them in the other order than stage 0 sends them.
  const model::Model net(attention_config(2));
  const std::vector<model::Batch> micro = split_micro_batches(net.make_batch(4, 11), 2);
  // Expected, from the runtime's own units on one rank: loss / m and its gradient at the head.
  std::vector<double> want_loss(2);
  std::vector<std::vector<float>> want_dloss(2);
  Cluster(1).run([&](Rank& r) {
    const model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    for (std::size_t k = 0; k < 2; ++k) {
      Buffer<float> x = net.input(r, micro[k]);
      for (int u = 0; u < net.num_units(); ++u) {
        model::UnitCache cache;
        x = net.unit_forward(r, u, net.unit_view(replica.params.span(), u), std::move(x),
                             micro[k].tokens(), &cache);
      }
      want_dloss[k].resize(x.size());
      want_loss[k] = net.loss_backward(x.span(), micro[k], want_dloss[k], 0.5f) * 0.5;
    }
  });
  std::vector<double> loss(2);
  std::vector<std::vector<float>> dloss(2);
  std::vector<std::vector<int>> saved(2);  // per stage, per micro-batch: filled caches kept
  Cluster(2).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    StageState state(2, 1);
    const int s = r.world().rank();
    for (int k : s == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0})
      run_forward_action(r, r.world(), net, state, {Pass::forward, k, 0}, replica.params.span(),
                         micro[static_cast<std::size_t>(k)]);
    const auto i = static_cast<std::size_t>(s);
    loss[i] = state.loss;
    for (std::size_t k = 0; k < 2; ++k) {
      if (s == 1) dloss[k].assign(state.loss_grads[k].begin(), state.loss_grads[k].end());
      int filled = 0;
      for (const model::UnitCache& c : state.caches[k]) filled += c.filled ? 1 : 0;
      saved[i].push_back(filled);
    }
    if (s == 0) CHECK(state.loss_grads[0].empty());  // no loss before the last model chunk
  });
  CHECK(loss[0] == 0.0);
  CHECK(loss[1] == doctest::Approx(want_loss[0] + want_loss[1]).epsilon(1e-6));
  for (std::size_t k = 0; k < 2; ++k) {
    check_close("loss gradient of micro-batch " + std::to_string(k), dloss[k], want_dloss[k],
                {1e-6, 1e-5});
    for (int s = 0; s < 2; ++s) {
      const StageUnits units = stage_units(net, 2, s);
      INFO("stage " << s << ", micro-batch " << k << ": filled caches kept after the forward");
      CHECK(saved[static_cast<std::size_t>(s)][k] == units.last - units.first);
    }
  }
}

TEST_CASE(
    "run_backward_action: on one stage, a forward then a backward is model.forward_backward, and "
    "frees what the forward saved") {
  const model::Model net(attention_config(2));
  const model::Batch batch = net.make_batch(4, 12);
  const Reference ref = reference_step(net, batch);
  std::vector<float> got;
  double loss = 0;
  std::size_t saved_after = 1;
  Cluster(1).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    const std::size_t before = r.memory().current(Category::activations);
    StageState state(1, 1);
    run_forward_action(r, r.world(), net, state, {Pass::forward, 0, 0}, replica.params.span(),
                       batch);
    run_backward_action(r, r.world(), net, state, {Pass::backward, 0, 0}, replica.params.span(),
                        replica.grads.span(), batch);
    loss = state.loss;
    saved_after = r.memory().current(Category::activations) - before;
    got.assign(replica.grads.begin(), replica.grads.end());
  });
  check_close("one-stage gradients", got, ref.grads, ref.tol, ref.where);
  CHECK(loss == doctest::Approx(ref.loss).epsilon(1e-6));
  CHECK(saved_after == 0);  // caches and the loss gradient freed by the backward
}

TEST_CASE(
    "run_backward_action: two stages, two micro-batches, backwards in the other order than sent "
    "add up to the whole batch's gradients") {
  const model::Model net(attention_config(2));
  const model::Batch batch = net.make_batch(4, 13);
  const std::vector<model::Batch> micro = split_micro_batches(batch, 2);
  const Reference ref = reference_step(net, batch);
  std::vector<std::vector<float>> stage_grads(2);
  Cluster(2).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    StageState state(2, 1);
    const int s = r.world().rank();
    for (int k : {0, 1})
      run_forward_action(r, r.world(), net, state, {Pass::forward, k, 0}, replica.params.span(),
                         micro[static_cast<std::size_t>(k)]);
    // Stage 1 sends micro-batch 1's gradient first; stage 0 runs micro-batch 0's backward first.
    for (int k : s == 1 ? std::vector<int>{1, 0} : std::vector<int>{0, 1})
      run_backward_action(r, r.world(), net, state, {Pass::backward, k, 0}, replica.params.span(),
                          replica.grads.span(), micro[static_cast<std::size_t>(k)]);
    stage_grads[static_cast<std::size_t>(s)].assign(replica.grads.begin(), replica.grads.end());
  });
  std::vector<float> got(ref.grads.size(), 0.0f);
  for (int s = 0; s < 2; ++s) {
    copy_units(net, stage_units(net, 2, s), stage_grads[static_cast<std::size_t>(s)], got);
  }
  check_close("two-stage gradients", got, ref.grads, ref.tol, ref.where);
}

TEST_CASE("pipelined gradients equal the unpipelined model's on the whole batch (fp32 tolerance)") {
  const model::Model net(attention_config());
  const model::Batch batch = net.make_batch(8, 77);
  const Reference ref = reference_step(net, batch);
  for (int p : {1, 2, 4}) {
    for (int m : {1, 4, 8}) {
      for (bool f1b : {false, true}) {
        const Step step = pipelined_step(net, free_links(p), f1b, m, batch);
        std::printf("%s p=%d m=%d: max |g - g_ref| = %.3g (max |g_ref| %.3g), loss %.7f vs %.7f\n",
                    f1b ? "1F1B " : "GPipe", p, m, max_abs_diff(step.grads, ref.grads),
                    max_abs(ref.grads), step.loss, ref.loss);
        check_step(f1b ? "1F1B gradients" : "GPipe gradients", step, ref);
      }
    }
  }
}

TEST_CASE("measured bubble on the virtual clock is (p-1)/(m+p-1) for GPipe and for 1F1B") {
  const model::Model net(equal_stage_config());
  const model::Batch batch = net.make_batch(8, 3);
  for (int p : {1, 2, 4}) {
    for (int m : {1, 2, 4, 8}) {
      const double formula = gpipe_bubble_fraction(p, m);
      for (bool f1b : {false, true}) {
        const Step step = pipelined_step(net, free_links(p), f1b, m, batch);
        for (int s = 0; s < p; ++s) {
          const double bubble = 1.0 - step.compute[static_cast<std::size_t>(s)] / step.makespan;
          if (s == 0)
            std::printf("%s p=%d m=%d: stage 0 idle fraction %.4f, formula %.4f\n",
                        f1b ? "1F1B " : "GPipe", p, m, bubble, formula);
          CHECK(std::abs(bubble - formula) <= 0.005);
        }
      }
    }
  }
}

TEST_CASE(
    "peak in-flight activations per stage: m for GPipe, min(m, p - stage) for 1F1B (ledger)") {
  const model::Model net(equal_stage_config());
  const model::Batch batch = net.make_batch(8, 3);
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      const std::vector<model::Batch> micro = split_micro_batches(batch, m);
      for (bool f1b : {false, true}) {
        const Step step = pipelined_step(net, free_links(p), f1b, m, batch);
        for (int s = 0; s < p; ++s) {
          const auto per_mb = static_cast<double>(saved_bytes_per_micro_batch(net, p, s, micro[0]));
          const double held =
              static_cast<double>(step.activation_peak[static_cast<std::size_t>(s)]) / per_mb;
          const auto expected = static_cast<double>(
              in_flight_micro_batches(f1b ? Schedule::one_f_one_b : Schedule::gpipe, p, m, s));
          std::printf(
              "%s p=%d m=%d stage %d: peak activations / one micro-batch = %.3f, formula %.0f\n",
              f1b ? "1F1B " : "GPipe", p, m, s, held, expected);
          // The peak also holds a boundary buffer or two in transit, well under half a micro-batch
          // here.
          CHECK(held >= expected);
          CHECK(held < expected + 0.5);
        }
      }
    }
  }
}

TEST_CASE("run_pipeline rejects a schedule built for another pipeline") {
  const model::Model net(equal_stage_config());
  const model::Batch batch = net.make_batch(4, 1);
  const std::vector<model::Batch> micro = split_micro_batches(batch, 2);
  const PipelineSchedule wrong_p = gpipe_schedule(3, 2);
  const PipelineSchedule wrong_m = gpipe_schedule(2, 4);
  CHECK_THROWS_AS(Cluster(2).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    run_pipeline(r, r.world(), net, stage_units(net, 2, r.id()), wrong_p, replica.params.span(),
                 replica.grads.span(), micro);
  }),
                  std::invalid_argument);
  CHECK_THROWS_AS(Cluster(2).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    run_pipeline(r, r.world(), net, stage_units(net, 2, r.id()), wrong_m, replica.params.span(),
                 replica.grads.span(), micro);
  }),
                  std::invalid_argument);
}

// ------------------------------------------------------------------ interleaved 1F1B (v chunks)

namespace {

Action F(int k, int c = 0) { return {Pass::forward, k, c}; }
Action B(int k, int c = 0) { return {Pass::backward, k, c}; }

// check_schedule's message for `s`, or "" when it accepts it.
std::string verdict(const PipelineSchedule& s) {
  try {
    check_schedule(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The header's interleaved example (p = 2, m = 2, v = 2), written out so that the checker's
// tests do not depend on your schedule code.
PipelineSchedule header_example() {
  PipelineSchedule s{2, 2, {}, 2};
  s.per_stage = {{F(0, 0), F(1, 0), F(0, 1), F(1, 1), B(0, 1), B(1, 1), B(0, 0), B(1, 0)},
                 {F(0, 0), F(1, 0), F(0, 1), B(0, 1), F(1, 1), B(1, 1), B(0, 0), B(1, 0)}};
  return s;
}

// Plain 1F1B for p = 2, m = 2, written out for the same reason.
PipelineSchedule one_f_one_b_p2_m2() {
  return {2, 2, {{F(0), F(1), B(0), B(1)}, {F(0), B(0), F(1), B(1)}}};
}

// The (p, m, v) points the interleaved measurements run: m a multiple of p, m = p included.
struct Pmv {
  int p, m, v;
};
constexpr Pmv kInterleaved[] = {{2, 2, 2}, {2, 4, 2}, {2, 4, 3}, {4, 4, 2},
                                {4, 8, 2}, {4, 8, 3}, {4, 4, 4}, {1, 4, 2}};

}  // namespace

TEST_CASE("interleaved_one_f_one_b_schedule: the header's example, v = 1 and the argument checks") {
  const PipelineSchedule s = interleaved_one_f_one_b_schedule(2, 2, 2);
  CHECK(s.stages == 2);
  CHECK(s.micro_batches == 2);
  CHECK(s.chunks == 2);
  REQUIRE(s.per_stage.size() == 2);
  for (std::size_t st = 0; st < 2; ++st)
    check_program("interleaved_one_f_one_b_schedule(2, 2, 2), stage " + std::to_string(st),
                  s.per_stage[st], header_example().per_stage[st]);
  // The groups of p: with p = 2, m = 4, v = 2 stage 1 (warm-up 2) takes micro-batches 0 and 1
  // through chunk 0, then through chunk 1, before micro-batches 2 and 3 start.
  const PipelineSchedule g = interleaved_one_f_one_b_schedule(2, 4, 2);
  check_program("interleaved_one_f_one_b_schedule(2, 4, 2), stage 1", g.per_stage[1],
                {F(0, 0), F(1, 0), F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0), B(0, 0), F(3, 0),
                 B(1, 0), F(2, 1), B(2, 1), F(3, 1), B(3, 1), B(2, 0), B(3, 0)});
  CHECK(interleaved_one_f_one_b_schedule(3, 3, 1).chunks == 1);
  CHECK_THROWS_AS(interleaved_one_f_one_b_schedule(0, 2, 2), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_one_f_one_b_schedule(2, 0, 2), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_one_f_one_b_schedule(2, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_one_f_one_b_schedule(4, 6, 2),
                  std::invalid_argument);  // m not a multiple of p
}

TEST_CASE(
    "interleaved schedules are valid, deadlock-free, and warm up as long as the first gradient "
    "takes") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = p; m <= 3 * p; m += p) {
      for (int v = 1; v <= 4; ++v) {
        const PipelineSchedule s = interleaved_one_f_one_b_schedule(p, m, v);
        INFO("p=" << p << " m=" << m << " v=" << v << ": " << verdict(s));
        CHECK(verdict(s).empty());
        CHECK(interleaved_order_problem(s) == "");
      }
    }
  }
}

TEST_CASE(
    "check_schedule names the first offending action: chunk out of range, missing pass, backward "
    "first") {
  PipelineSchedule s = header_example();
  s.per_stage[1][4].chunk = 2;
  std::string why = verdict(s);
  CHECK(contains(why, "stage 1, position 4 (forward of micro-batch 1 chunk 2)"));
  CHECK(contains(why, "chunk 2 is outside [0, 2)"));

  s = header_example();
  s.per_stage[0].erase(s.per_stage[0].begin() + 5);  // B(1, 1)
  why = verdict(s);
  CHECK(contains(why, "stage 0 never runs the backward of micro-batch 1 chunk 1"));

  s = header_example();
  std::swap(s.per_stage[1][2], s.per_stage[1][3]);  // B(0, 1) before F(0, 1)
  why = verdict(s);
  CHECK(contains(
      why, "stage 1, position 2 (backward of micro-batch 0 chunk 1): runs before its forward"));

  s = one_f_one_b_p2_m2();
  s.per_stage[0].push_back(F(1));
  CHECK(contains(verdict(s),
                 "stage 0, position 4 (forward of micro-batch 1 chunk 0): runs a second time"));
  s = one_f_one_b_p2_m2();
  s.per_stage[1][0].micro_batch = 2;
  CHECK(contains(verdict(s), "micro-batch 2 is outside [0, 2)"));
  s = one_f_one_b_p2_m2();
  s.chunks = 0;
  CHECK_THROWS_AS(check_schedule(s), std::invalid_argument);
}

TEST_CASE("check_schedule finds a deadlock and says where every stage waits") {
  // 1F1B with stage 0 starting its backward before the gradient can exist: stage 0 waits for
  // stage 1's backward of micro-batch 0, stage 1 for stage 0's forward of micro-batch 1.
  PipelineSchedule s = one_f_one_b_p2_m2();
  s.per_stage[0] = {F(0), B(0), F(1), B(1)};
  s.per_stage[1] = {F(1), B(1), F(0), B(0)};
  std::string why = verdict(s);
  CHECK(contains(
      why,
      "deadlock: stage 0 waits at position 1 (backward of micro-batch 0 chunk 0) for stage 1's "
      "backward of micro-batch 0 chunk 0; stage 1 waits at position 0 (forward of micro-batch 1 "
      "chunk 0) for stage 0's forward of micro-batch 1 chunk 0"));

  // An interleaved stage 0 that cuts its warm-up short by the (v - 1) p chunk-rounds: its first
  // backward (chunk 1) needs a gradient that its own later forward of chunk 1 would start.
  s = header_example();
  s.per_stage[0] = {F(0, 0), F(1, 0), B(0, 1), F(0, 1), B(1, 1), F(1, 1), B(0, 0), B(1, 0)};
  CHECK(contains(verdict(s), "runs before its forward"));
  // The same with the chunks taken in the wrong order by the last stage: chunk 1 before chunk 0.
  s = header_example();
  s.per_stage[1] = {F(0, 1), F(1, 1), F(0, 0), B(0, 1), F(1, 0), B(1, 1), B(0, 0), B(1, 0)};
  why = verdict(s);
  CHECK(contains(why, "deadlock: "));
  CHECK(contains(
      why,
      "stage 1 waits at position 0 (forward of micro-batch 0 chunk 1) for stage 0's forward of "
      "micro-batch 0 chunk 1"));

  // The written-out schedules themselves pass.
  CHECK(verdict(header_example()).empty());
  CHECK(verdict(one_f_one_b_p2_m2()).empty());
}

TEST_CASE("interleaved pipelined gradients equal the unpipelined model's on the whole batch") {
  for (const Pmv& g : kInterleaved) {
    const model::Model net(attention_config(g.p * g.v));
    const model::Batch batch = net.make_batch(8, 77);
    const Reference ref = reference_step(net, batch);
    const Step step = pipelined_step(net, free_links(g.p),
                                     interleaved_one_f_one_b_schedule(g.p, g.m, g.v), batch);
    std::printf(
        "interleaved p=%d m=%d v=%d: max |g - g_ref| = %.3g (max |g_ref| %.3g), loss %.7f vs "
        "%.7f\n",
        g.p, g.m, g.v, max_abs_diff(step.grads, ref.grads), max_abs(ref.grads), step.loss,
        ref.loss);
    check_step("interleaved gradients", step, ref);
  }
}

TEST_CASE("measured interleaved bubble on the virtual clock is (p-1)/(v m+p-1)") {
  // One block per chunk, so every chunk costs the same up to the tiny embedding and head.
  std::printf("interleaved 1F1B, free links: stage idle fraction on the virtual clock\n");
  std::printf("   p    m    v   GPipe    formula  stage 0   max |stage - formula|\n");
  for (const Pmv& g : kInterleaved) {
    const model::Model net(equal_stage_config(g.p * g.v));
    const model::Batch batch = net.make_batch(8, 3);
    const double formula = interleaved_bubble_fraction(g.p, g.m, g.v);
    const Step step = pipelined_step(net, free_links(g.p),
                                     interleaved_one_f_one_b_schedule(g.p, g.m, g.v), batch);
    double worst = 0;  // largest |idle - formula| over the stages
    for (int s = 0; s < g.p; ++s) {
      const double bubble = 1.0 - step.compute[static_cast<std::size_t>(s)] / step.makespan;
      worst = std::max(worst, std::abs(bubble - formula));
      CHECK(std::abs(bubble - formula) <= 0.005);
    }
    std::printf("%4d %4d %4d   %.4f   %.4f    %.4f     %.4f\n", g.p, g.m, g.v,
                gpipe_bubble_fraction(g.p, g.m), formula, 1.0 - step.compute[0] / step.makespan,
                worst);
  }
}

TEST_CASE(
    "peak in-flight activations per stage are the interleaved schedule's chunk-micro-batches "
    "(ledger)") {
  for (const Pmv& g : kInterleaved) {
    const model::Model net(equal_stage_config(g.p * g.v));
    const model::Batch batch = net.make_batch(8, 3);
    const std::vector<model::Batch> micro = split_micro_batches(batch, g.m);
    const std::vector<std::size_t> per_unit = saved_bytes_per_unit(net, micro[0]);
    const PipelineSchedule schedule = interleaved_one_f_one_b_schedule(g.p, g.m, g.v);
    const Step step = pipelined_step(net, free_links(g.p), schedule, batch);
    for (int s = 0; s < g.p; ++s) {
      std::vector<double>
          chunk_bytes;  // one micro-batch's saved bytes on each of the stage's chunks
      for (int c = 0; c < g.v; ++c)
        chunk_bytes.push_back(
            static_cast<double>(saved_bytes(per_unit, chunk_of_stage(net, g.p, g.v, s, c))));
      // The schedule's own peak in bytes: its program walked with each chunk's saved bytes.
      double now = 0, schedule_peak = 0;
      for (const Action& a : schedule.per_stage[static_cast<std::size_t>(s)]) {
        now += (a.pass == Pass::forward ? 1 : -1) * chunk_bytes[static_cast<std::size_t>(a.chunk)];
        schedule_peak = std::max(schedule_peak, now);
      }
      const double mean_chunk = std::accumulate(chunk_bytes.begin(), chunk_bytes.end(), 0.0) / g.v;
      const auto peak = static_cast<double>(step.activation_peak[static_cast<std::size_t>(s)]);
      const double held = peak / mean_chunk;
      const std::int64_t expected = schedule_in_flight(schedule, s);
      std::printf(
          "interleaved p=%d m=%d v=%d stage %d: peak activations / one chunk-micro-batch = %.3f, "
          "schedule %lld\n",
          g.p, g.m, g.v, s, held, static_cast<long long>(expected));
      // The chunks differ by the embedding or the head, so the count is the nearest integer; in
      // bytes the peak is the schedule's plus a boundary buffer or two in transit.
      CHECK(std::llround(held) == expected);
      CHECK(peak >= schedule_peak);
      CHECK(peak < schedule_peak + 0.5 * *std::min_element(chunk_bytes.begin(), chunk_bytes.end()));
    }
  }
}

TEST_CASE(
    "run_pipeline rejects chunks that do not divide the model, and units for a chunked schedule") {
  const model::Model net(equal_stage_config(4));  // 4 blocks: p = 2, v = 3 gives 6 chunks
  const std::vector<model::Batch> micro = split_micro_batches(net.make_batch(4, 1), 2);
  const PipelineSchedule six_chunks = interleaved_one_f_one_b_schedule(2, 2, 3);
  CHECK_THROWS_AS(Cluster(2).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    run_pipeline(r, r.world(), net, six_chunks, replica.params.span(), replica.grads.span(), micro);
  }),
                  std::invalid_argument);
  const PipelineSchedule two_chunks = header_example();
  CHECK_THROWS_AS(Cluster(2).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    run_pipeline(r, r.world(), net, stage_units(net, 2, r.id()), two_chunks, replica.params.span(),
                 replica.grads.span(), micro);
  }),
                  std::invalid_argument);
}

TEST_CASE(
    "with link latency the interleaved bubble grows: v times the messages, each on the critical "
    "path") {
  // p = 4, m = 8 and 16 blocks, so a stage does the same work whatever v; only the cut changes.
  // One block's forward on one micro-batch (2 tokens) takes 32.8 us at 1 GFLOP/s here, so a
  // stage's forward is 131 us, a chunk's 131/v us.
  const model::Model net(equal_stage_config(16));
  const model::Batch batch = net.make_batch(8, 3);
  std::printf("interleaved 1F1B, p=4 m=8, 16 blocks: stage 0 idle fraction with link latency\n");
  std::printf("   v   formula  latency 0  5 us    20 us\n");
  for (int v : {1, 2, 4}) {
    const double formula = interleaved_bubble_fraction(4, 8, v);
    std::vector<double> idle;
    for (double latency : {0.0, 5e-6, 20e-6}) {
      ClusterConfig cc = free_links(4);
      cc.intra_node_latency_seconds = latency;
      cc.inter_node_latency_seconds = latency;
      const Step step = pipelined_step(net, cc, interleaved_one_f_one_b_schedule(4, 8, v), batch);
      idle.push_back(1.0 - step.compute[0] / step.makespan);
    }
    std::printf("%4d   %.4f   %.4f     %.4f  %.4f\n", v, formula, idle[0], idle[1], idle[2]);
    CHECK(std::abs(idle[0] - formula) <= 0.005);
    CHECK(idle[1] > idle[0]);
    CHECK(idle[2] > idle[1]);
  }
}

// ------------------------------------------------------------------ the backward in two halves

namespace {

// `schedule` with every backward split into its input half and its weight half: the weight half
// right after the input half, or (weights_last) all weight halves at the end of the program in
// the order of the input halves.
PipelineSchedule split_backwards(PipelineSchedule schedule, bool weights_last) {
  for (auto& program : schedule.per_stage) {
    std::vector<Action> split, weights;
    for (const Action& a : program) {
      if (a.pass != Pass::backward) {
        split.push_back(a);
        continue;
      }
      split.push_back({Pass::backward_input, a.micro_batch, a.chunk});
      (weights_last ? weights : split).push_back({Pass::backward_weight, a.micro_batch, a.chunk});
    }
    split.insert(split.end(), weights.begin(), weights.end());
    program = split;
  }
  return schedule;
}

// check_schedule's message, or "" when it accepts.
std::string rejection(const PipelineSchedule& s) {
  try {
    check_schedule(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// Stage 0 runs GPipe's programs for p = 2, m = 2 with hand-written halves.
PipelineSchedule halves_p2_m2(std::vector<Action> stage0) {
  PipelineSchedule s = split_backwards(gpipe_schedule(2, 2), false);
  s.per_stage[0] = std::move(stage0);
  return s;
}

}  // namespace

TEST_CASE(
    "check_schedule accepts the backward in two halves and rejects a weight half out of place") {
  const Action f0{Pass::forward, 0}, f1{Pass::forward, 1};
  const Action b0{Pass::backward_input, 0}, b1{Pass::backward_input, 1};
  const Action w0{Pass::backward_weight, 0}, w1{Pass::backward_weight, 1};
  CHECK(rejection(halves_p2_m2({f0, f1, b0, w0, b1, w1})).empty());
  CHECK(rejection(halves_p2_m2({f0, f1, b0, b1, w1, w0})).empty());  // weights in any order
  // A weight half before its input half, named by stage and position.
  const std::string early = rejection(halves_p2_m2({f0, f1, w0, b0, b1, w1}));
  INFO(early);
  CHECK(early.find("stage 0, position 2 (backward-weight of micro-batch 0 chunk 0): runs before "
                   "its backward-input") != std::string::npos);
  // A weight half missing.
  const std::string missing = rejection(halves_p2_m2({f0, f1, b0, w0, b1}));
  INFO(missing);
  CHECK(missing.find("stage 0 never runs the backward-weight of micro-batch 1 chunk 0") !=
        std::string::npos);
  // Run twice, mixed with the whole backward, an input half before its forward.
  CHECK(rejection(halves_p2_m2({f0, f1, b0, w0, w0, b1, w1})).find("runs a second time") !=
        std::string::npos);
  CHECK(rejection(halves_p2_m2({f0, f1, b0, w0, b1, w1, {Pass::backward, 1}}))
            .find("mixes the whole backward with its halves") != std::string::npos);
  CHECK(rejection(halves_p2_m2({f0, b1, f1, b0, w0, w1})).find("runs before its forward") !=
        std::string::npos);
  // The play: the stage before waits for the input half, a weight half waits for nobody.
  PipelineSchedule s = split_backwards(gpipe_schedule(2, 2), false);
  CHECK(rejection(s).empty());
  s.per_stage[1] = {f0, b0, w0, f1, b1, w1};  // 1F1B on the last stage: still fine
  CHECK(rejection(s).empty());
  s.per_stage[0] = {f0, b0, w0, f1, b1, w1};  // stage 0 waits for B0 before it sends F1
  CHECK(rejection(s).empty());
  s.per_stage[1] = {f1, f0, b0, w0, b1, w1};  // stage 1 waits for F1, stage 0 for B0
  const std::string dead = rejection(s);
  INFO(dead);
  CHECK(dead.find("stage 0 waits at position 1 (backward-input of micro-batch 0 chunk 0) for stage "
                  "1's backward-input of micro-batch 0 chunk 0") != std::string::npos);
}

TEST_CASE("schedule_in_flight holds a micro-batch until its weight half") {
  for (int p : {2, 3, 4}) {
    for (int m : {1, 4, 8}) {
      const PipelineSchedule g = gpipe_schedule(p, m);
      for (int s = 0; s < p; ++s) {
        CHECK(schedule_in_flight(split_backwards(g, false), s) == m);
        CHECK(schedule_in_flight(split_backwards(g, true), s) == m);
      }
    }
  }
  // One stage: micro-batch 1's weight half waits until micro-batch 2 has run its forward.
  PipelineSchedule s = gpipe_schedule(1, 3);
  s.per_stage[0] = {
      {Pass::forward, 0},        {Pass::backward_input, 0},  {Pass::backward_weight, 0},
      {Pass::forward, 1},        {Pass::backward_input, 1},  {Pass::forward, 2},
      {Pass::backward_input, 2}, {Pass::backward_weight, 1}, {Pass::backward_weight, 2}};
  CHECK(schedule_in_flight(s, 0) == 2);
}

TEST_CASE(
    "run_backward_action in two halves: the input half sends the gradient and keeps the "
    "activations, the weight half adds model.forward_backward's gradients and frees them") {
  const model::Model net(attention_config(2));
  const model::Batch batch = net.make_batch(4, 12);
  const Reference ref = reference_step(net, batch);
  std::vector<float> got;
  std::size_t after_forward = 0, after_input = 0, after_weight = 1;
  double grads_after_input = 1;
  Cluster(1).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    const std::size_t before = r.memory().current(Category::activations);
    StageState state(1, 1);
    run_forward_action(r, r.world(), net, state, {Pass::forward, 0, 0}, replica.params.span(),
                       batch);
    after_forward = r.memory().current(Category::activations) - before;
    run_backward_action(r, r.world(), net, state, {Pass::backward_input, 0, 0},
                        replica.params.span(), replica.grads.span(), batch);
    after_input = r.memory().current(Category::activations) - before;
    grads_after_input = max_abs(std::vector<float>(replica.grads.begin(), replica.grads.end()));
    run_backward_action(r, r.world(), net, state, {Pass::backward_weight, 0, 0},
                        replica.params.span(), replica.grads.span(), batch);
    after_weight = r.memory().current(Category::activations) - before;
    got.assign(replica.grads.begin(), replica.grads.end());
  });
  CHECK(after_forward > 0);
  CHECK(after_input > 0);  // the weight half's inputs are still saved
  CHECK(grads_after_input == 0.0);
  CHECK(after_weight == 0);
  check_close("one stage, two halves", got, ref.grads, ref.tol, ref.where);
}

TEST_CASE("pipelined gradients with the backward in two halves equal the unpipelined model's") {
  const model::Model net(attention_config());
  const model::Batch batch = net.make_batch(8, 77);
  const Reference ref = reference_step(net, batch);
  for (int p : {2, 4}) {
    for (bool weights_last : {false, true}) {
      const Step step = pipelined_step(net, free_links(p),
                                       split_backwards(gpipe_schedule(p, 4), weights_last), batch);
      INFO("GPipe in halves, p=" << p << ", weights last: " << weights_last);
      check_step("gradients", step, ref);
    }
  }
}

// ------------------------------------------------------------------ ZB-H1

namespace {

// The program without its weight halves, input halves read as whole backwards.
std::vector<Action> without_weights(const std::vector<Action>& program) {
  std::vector<Action> out;
  for (const Action& a : program) {
    if (a.pass == Pass::backward_weight) continue;
    out.push_back(a.pass == Pass::backward_input ? Action{Pass::backward, a.micro_batch, a.chunk}
                                                 : a);
  }
  return out;
}

// FFN-only blocks (T_F = T_B = T_W) or attention blocks (T_W < T_F < T_B), one feature in and
// out so that every stage costs the same up to about 0.1%.
model::ModelConfig zb_config(bool attention) {
  model::ModelConfig c = equal_stage_config();
  if (attention) {
    c.attention = true;
    c.n_heads = 2;
    c.d_ff = 64;
    c.seq_len = 16;
  }
  return c;
}

// Checks a stage's program of a zero-bubble schedule: every backward in halves, and each pass
// takes the micro-batches in order.
void check_halves_in_order(const std::vector<Action>& program) {
  std::vector<int> next(4, 0);  // next micro-batch expected per pass
  for (const Action& a : program) {
    CHECK(a.pass != Pass::backward);
    CHECK(a.micro_batch == next[static_cast<std::size_t>(a.pass)]++);
  }
}

// One stage's seconds per micro-batch for the forward, the input half and the weight half of the
// backward, when p stages share the blocks of `net` and the batch is cut into m micro-batches: the
// blocks' FLOPs from the runtime's cost model, at the rate of free_links.
struct PassSeconds {
  double forward, input_half, weight_half;
};
PassSeconds stage_pass_seconds(const model::Model& net, const model::Batch& batch, int p, int m) {
  const double rate = free_links(1).flops_per_second;
  const std::int64_t tokens = split_micro_batches(batch, m)[0].tokens();
  const double blocks = static_cast<double>(net.config().n_layers / p);
  return {blocks * net.unit_forward_flops(1, tokens) / rate,
          blocks * net.unit_backward_input_flops(1, tokens) / rate,
          blocks * net.unit_backward_weight_flops(1, tokens) / rate};
}

// Bytes one micro-batch keeps saved on stage s of p between its input half and its weight half,
// measured with the runtime's own units (no chapter code): what the weight half still needs.
std::size_t pending_bytes_per_micro_batch(const model::Model& net, int p, int s,
                                          const model::Batch& micro) {
  const StageUnits units = stage_units(net, p, s);
  std::size_t bytes = 0;
  Cluster(1).run([&](Rank& r) {
    const model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    std::vector<model::UnitCache> caches(static_cast<std::size_t>(net.num_units()));
    Buffer<float> x = net.input(r, micro);
    for (int u = 0; u < net.num_units(); ++u)
      x = net.unit_forward(r, u, net.unit_view(replica.params.span(), u), std::move(x),
                           micro.tokens(), &caches[static_cast<std::size_t>(u)]);
    std::vector<float> dy(x.size(), 1.0f);
    for (int u = net.num_units() - 1; u >= 0; --u) {
      Buffer<float> dx = net.unit_backward_input(r, u, net.unit_view(replica.params.span(), u),
                                                 caches[static_cast<std::size_t>(u)], dy);
      if (u >= units.first && u < units.last) bytes += caches[static_cast<std::size_t>(u)].bytes();
      dy.assign(dx.begin(), dx.end());
    }
  });
  return bytes;
}

}  // namespace

TEST_CASE(
    "zb_h1_schedule: valid, every backward in halves taken in order, 1F1B's order without the "
    "weight halves, and 1F1B's peak of min(m, p) on every stage") {
  for (int p : {1, 2, 3, 4, 6}) {
    for (int m : {1, 2, 4, 8, 9}) {
      INFO("p=" << p << " m=" << m);
      const PipelineSchedule zb = zb_h1_schedule(p, m);
      const PipelineSchedule f1b = one_f_one_b_schedule(p, m);
      CHECK(rejection(zb) == "");
      CHECK(zb.chunks == 1);
      std::int64_t zb_peak = 0, f1b_peak = 0;
      for (int s = 0; s < p; ++s) {
        const auto& program = zb.per_stage[static_cast<std::size_t>(s)];
        check_halves_in_order(program);
        check_program("stage " + std::to_string(s) + " without its weight halves",
                      without_weights(program), f1b.per_stage[static_cast<std::size_t>(s)]);
        CHECK(schedule_in_flight(zb, s) <= std::min(m, p));
        zb_peak = std::max(zb_peak, schedule_in_flight(zb, s));
        f1b_peak = std::max(f1b_peak, schedule_in_flight(f1b, s));
      }
      CHECK(zb_peak == f1b_peak);
    }
  }
  // The weight halves wait while the bound lets them: the last of 2 stages, m = 3.
  const std::vector<Action> last = zb_h1_schedule(2, 3).per_stage[1];
  const std::vector<Action> expected = {
      {Pass::forward, 0},        {Pass::backward_input, 0},  {Pass::forward, 1},
      {Pass::backward_input, 1}, {Pass::backward_weight, 0}, {Pass::forward, 2},
      {Pass::backward_input, 2}, {Pass::backward_weight, 1}, {Pass::backward_weight, 2}};
  check_program("zb_h1_schedule(2, 3), stage 1", last, expected);
  CHECK_THROWS_AS(zb_h1_schedule(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(zb_h1_schedule(4, 0), std::invalid_argument);
}

// The gradients of a step run with schedule(p, m), for p = 1, 2, 4 and m = 1, 4, 8, against the
// unpipelined model's on the whole batch; `name` labels a failure.
static void check_pipelined_gradients(const char* name, PipelineSchedule (*schedule)(int, int)) {
  const model::Model net(attention_config());
  const model::Batch batch = net.make_batch(8, 77);
  const Reference ref = reference_step(net, batch);
  for (int p : {1, 2, 4}) {
    for (int m : {1, 4, 8}) {
      const Step step = pipelined_step(net, free_links(p), schedule(p, m), batch);
      INFO(name << " p=" << p << " m=" << m);
      check_step(std::string(name) + " gradients", step, ref);
    }
  }
}

TEST_CASE("ZB-H1 pipelined gradients equal the unpipelined model's on the whole batch") {
  check_pipelined_gradients("ZB-H1", zb_h1_schedule);
}

TEST_CASE(
    "measured ZB-H1 wait on the virtual clock is zb_h1_bubble_seconds for the model's F, B and W "
    "costs, 2 (p-1) T_W below 1F1B's, with at most min(m, p) micro-batches on the ledger") {
  for (bool attention : {false, true}) {
    const model::Model net(zb_config(attention));
    const model::Batch batch = net.make_batch(8, 3);
    for (int p : {2, 4}) {
      for (int m : {4, 8}) {
        const auto [t_f, t_b, t_w] = stage_pass_seconds(net, batch, p, m);
        const double wait = zb_h1_bubble_seconds(p, t_f, t_b, t_w);
        const Step zb = pipelined_step(net, free_links(p), zb_h1_schedule(p, m), batch);
        const Step f1b = pipelined_step(net, free_links(p), one_f_one_b_schedule(p, m), batch);
        const std::vector<model::Batch> micro = split_micro_batches(batch, m);
        std::printf(
            "ZB-H1 %s p=%d m=%d: makespan %.4g s (formula %.4g s), 1F1B %.4g s; T_F %.3g T_B "
            "%.3g T_W %.3g\n",
            attention ? "attention" : "FFN-only ", p, m, zb.makespan,
            static_cast<double>(m) * (t_f + t_b + t_w) + wait, f1b.makespan, t_f, t_b, t_w);
        for (int s = 0; s < p; ++s) {
          const auto i = static_cast<std::size_t>(s);
          INFO("attention " << attention << ", p=" << p << " m=" << m << " stage " << s);
          CHECK(std::abs((zb.makespan - zb.compute[i]) - wait) <= 0.005 * zb.makespan);
          const double f1b_wait = f1b.makespan - f1b.compute[i];
          CHECK(std::abs(f1b_wait - (zb.makespan - zb.compute[i]) -
                         2.0 * static_cast<double>(p - 1) * t_w) <= 0.005 * zb.makespan);
          // A micro-batch between its halves keeps what the weight half needs, which in these
          // blocks is more than the forward saved (x, dy, a and dh against x, h and a).
          const auto saved = static_cast<double>(saved_bytes_per_micro_batch(net, p, s, micro[0]));
          const auto pending =
              static_cast<double>(pending_bytes_per_micro_batch(net, p, s, micro[0]));
          const double held = static_cast<double>(zb.activation_peak[i]);
          // Plus the boundary buffers and one unit's temporaries in flight, under one more.
          CHECK(held < static_cast<double>(std::min(m, p)) * std::max(saved, pending) + saved);
          CHECK(held >= static_cast<double>(std::min(m, p)) * saved);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ ZB-H2

namespace {

// A schedule played in slots: every forward, input half and weight half takes one slot, messages
// are free, and each stage runs its next action in the first slot where its input has ended
// (independent of the chapter's code: it reads the programs only).
struct SlotPlay {
  std::vector<int> first, last;  // per stage: the slot of its first action, one past its last
  std::vector<int> busy;         // per stage: slots it ran something in
  std::string problem;           // "" or the first slot where the stage broke the ZB-H2 contract
  int slots = 0;                 // the step: one past the last slot anyone ran in
};

SlotPlay play_in_slots(const PipelineSchedule& s, int cap) {
  const int p = s.stages, m = s.micro_batches;
  const auto idx = [](int i) { return static_cast<std::size_t>(i); };
  SlotPlay out{std::vector<int>(idx(p), -1), std::vector<int>(idx(p), 0),
               std::vector<int>(idx(p), 0), "", 0};
  // end[pass][stage][k]: the slot after the one in which that pass ran, -1 before.
  std::vector<std::vector<std::vector<int>>> end(
      3, std::vector<std::vector<int>>(idx(p), std::vector<int>(idx(m), -1)));
  const auto ended = [&](int pass, int stage, int k, int t) {
    const int e = end[idx(pass)][idx(stage)][idx(k)];
    return e >= 0 && e <= t;
  };
  std::vector<std::size_t> next(idx(p), 0);
  std::vector<int> f(idx(p), 0), b(idx(p), 0), w(idx(p), 0);  // passes run so far
  const int kF = 0, kB = 1, kW = 2;
  for (int t = 0; t < 4 * (3 * m + 2 * p); ++t) {
    bool left = false;
    for (int st = 0; st < p; ++st) {
      const auto& program = s.per_stage[idx(st)];
      if (next[idx(st)] == program.size()) continue;
      left = true;
      const Action& a = program[next[idx(st)]];
      const int k = a.micro_batch;
      bool ready = true;
      if (a.pass == Pass::forward) ready = st == 0 || ended(kF, st - 1, k, t);
      if (a.pass == Pass::backward_input)
        ready = st == p - 1 ? ended(kF, st, k, t) : ended(kB, st + 1, k, t);
      // What this stage could run in this slot, before choosing.
      const auto i = idx(st);
      const bool input_arrived =
          b[i] < f[i] && (st == p - 1 ? ended(kF, st, b[i], t) : ended(kB, st + 1, b[i], t));
      const bool forward_fits =
          f[i] < m && f[i] - w[i] < cap && (st == 0 || ended(kF, st - 1, f[i], t));
      const bool weight_pending = w[i] < b[i];
      const std::string at = "stage " + std::to_string(st) + " slot " + std::to_string(t) + ": ";
      if (out.problem.empty()) {
        if (!ready && (input_arrived || forward_fits || weight_pending))
          out.problem = at + "waits with work it could run";
        else if (ready && a.pass != Pass::backward_input && input_arrived)
          out.problem = at + describe(a) + " while an input half's gradient has arrived";
        else if (ready && a.pass == Pass::backward_weight && forward_fits)
          out.problem = at + describe(a) + " while a forward fits within the bound";
      }
      if (!ready) continue;
      const int pass = a.pass == Pass::forward ? kF : a.pass == Pass::backward_input ? kB : kW;
      end[idx(pass)][i][idx(k)] = t + 1;
      ++(pass == kF ? f[i] : pass == kB ? b[i] : w[i]);
      if (out.first[i] < 0) out.first[i] = t;
      out.last[i] = t + 1;
      ++out.busy[i];
      out.slots = std::max(out.slots, t + 1);
      ++next[i];
    }
    if (!left) break;
  }
  return out;
}

// The longest wait inside one stage's part of the step on the virtual clock: from its first
// compute span's start to its last one's end, less its compute.
double longest_inner_wait(const Cluster& cluster, int p) {
  double longest = 0;
  for (int s = 0; s < p; ++s) {
    double first = -1, last = 0;
    for (const Span& span : cluster.report(s).clock.timeline()) {
      if (span.stream != Stream::compute || span.kind != SpanKind::compute) continue;
      if (first < 0) first = span.start;
      last = std::max(last, span.end);
    }
    longest = std::max(longest, last - first - cluster.report(s).clock.compute_time());
  }
  return longest;
}

// The wait inside stage 0's part of the step (for 1F1B and ZB-H1 it starts first and ends last,
// so this is its whole wait), and the longest inner wait, for one step of `schedule`.
struct InnerWaits {
  double first_stage = 0, longest = 0, makespan = 0;
  std::vector<double> compute;
  std::vector<std::size_t> activation_peak;
};

InnerWaits inner_waits(const model::Model& net, const PipelineSchedule& schedule,
                       const model::Batch& batch) {
  const int p = schedule.stages;
  const std::vector<model::Batch> micro = split_micro_batches(batch, schedule.micro_batches);
  Cluster cluster(free_links(p));
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    run_pipeline(r, r.world(), net, schedule, replica.params.span(), replica.grads.span(), micro);
  });
  InnerWaits out;
  out.longest = longest_inner_wait(cluster, p);
  out.first_stage = longest_inner_wait(cluster, 1);
  out.makespan = cluster.makespan();
  for (int s = 0; s < p; ++s) {
    out.compute.push_back(cluster.report(s).clock.compute_time());
    out.activation_peak.push_back(cluster.report(s).memory.peak(Category::activations));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "zb_h2_schedule: valid, every pass in micro-batch order, at most min(m, 2p - 1) held, and "
    "played in slots no stage waits between its first and last action once m >= 2p - 1") {
  for (int p : {1, 2, 3, 4, 6}) {
    for (int m : {1, 2, 3, 4, 7, 8, 12}) {
      INFO("p=" << p << " m=" << m);
      const PipelineSchedule zb = zb_h2_schedule(p, m);
      REQUIRE(rejection(zb) == "");
      CHECK(zb.chunks == 1);
      const int cap = std::min(m, 2 * p - 1);
      for (int s = 0; s < p; ++s) {
        check_halves_in_order(zb.per_stage[static_cast<std::size_t>(s)]);
        CHECK(schedule_in_flight(zb, s) == cap);
      }
      const SlotPlay play = play_in_slots(zb, cap);
      CHECK(play.problem == "");
      int longest = 0;
      for (int s = 0; s < p; ++s) {
        const auto i = static_cast<std::size_t>(s);
        longest = std::max(longest, play.last[i] - play.first[i] - play.busy[i]);
      }
      CHECK(longest == std::max(0, 2 * p - 1 - m));
      CHECK(play.slots == 3 * m + std::max(p - 1, 2 * p - 1 - m));
    }
  }
  // Two stages, three micro-batches: the first stage covers the round trip with 2p - 1 = 3
  // forwards; the last defers its weight halves to the end.
  const PipelineSchedule two = zb_h2_schedule(2, 3);
  const Action f0{Pass::forward, 0}, f1{Pass::forward, 1}, f2{Pass::forward, 2};
  const Action b0{Pass::backward_input, 0}, b1{Pass::backward_input, 1},
      b2{Pass::backward_input, 2};
  const Action w0{Pass::backward_weight, 0}, w1{Pass::backward_weight, 1},
      w2{Pass::backward_weight, 2};
  check_program("zb_h2_schedule(2, 3), stage 0", two.per_stage[0],
                {f0, f1, f2, b0, w0, b1, w1, b2, w2});
  check_program("zb_h2_schedule(2, 3), stage 1", two.per_stage[1],
                {f0, b0, f1, b1, f2, b2, w0, w1, w2});
  CHECK_THROWS_AS(zb_h2_schedule(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(zb_h2_schedule(4, 0), std::invalid_argument);
}

TEST_CASE("ZB-H2 pipelined gradients equal the unpipelined model's on the whole batch") {
  check_pipelined_gradients("ZB-H2", zb_h2_schedule);
}

TEST_CASE(
    "measured ZB-H2 inner wait on the virtual clock is zb_h2_bubble_seconds, below ZB-H1's and "
    "1F1B's, with at most min(m, 2p - 1) micro-batches on the ledger") {
  const model::Model net(zb_config(false));  // T_F = T_B = T_W
  const model::Batch batch = net.make_batch(8, 3);
  for (int p : {2, 4}) {
    for (int m : {2, 4, 8}) {
      const std::vector<model::Batch> micro = split_micro_batches(batch, m);
      const PassSeconds seconds = stage_pass_seconds(net, batch, p, m);
      const double t = seconds.forward;
      REQUIRE(seconds.input_half == doctest::Approx(t));
      REQUIRE(seconds.weight_half == doctest::Approx(t));
      const InnerWaits h2 = inner_waits(net, zb_h2_schedule(p, m), batch);
      const InnerWaits h1 = inner_waits(net, zb_h1_schedule(p, m), batch);
      const InnerWaits f1b = inner_waits(net, one_f_one_b_schedule(p, m), batch);
      std::printf(
          "ZB-H2 p=%d m=%d: longest inner wait %.4g s (formula %.4g s), ZB-H1 %.4g s, 1F1B %.4g "
          "s; step %.4g s (ZB-H1 %.4g s); T %.3g s\n",
          p, m, h2.longest, zb_h2_bubble_seconds(p, m, t), h1.first_stage, f1b.first_stage,
          h2.makespan, h1.makespan, t);
      INFO("p=" << p << " m=" << m);
      const double tol = 0.005 * h2.makespan;
      CHECK(std::abs(h2.longest - zb_h2_bubble_seconds(p, m, t)) <= tol);
      if (m >= p) {
        // Against the schedules' own formulas, on the stage that waits most in each.
        CHECK(std::abs(h1.first_stage - zb_h1_bubble_seconds(p, t, t, t)) <= tol);
        CHECK(std::abs(f1b.first_stage - 3.0 * static_cast<double>(p - 1) * t) <= tol);
      }
      if (m >= 2 * p - 1) {
        CHECK(h2.longest + 0.5 * t < h1.first_stage);
        CHECK(h1.first_stage + 0.5 * t < f1b.first_stage);
      }
      const int cap = std::min(m, 2 * p - 1);
      for (int s = 0; s < p; ++s) {
        const auto i = static_cast<std::size_t>(s);
        INFO("stage " << s);
        // One step on its own: every stage waits for the fill, max(p - 1, 2p - 1 - m) passes.
        CHECK(std::abs(h2.makespan - h2.compute[i] -
                       static_cast<double>(std::max(p - 1, 2 * p - 1 - m)) * t) <= tol);
        const auto saved = static_cast<double>(saved_bytes_per_micro_batch(net, p, s, micro[0]));
        const auto pending =
            static_cast<double>(pending_bytes_per_micro_batch(net, p, s, micro[0]));
        const double held = static_cast<double>(h2.activation_peak[i]);
        CHECK(held < static_cast<double>(cap) * std::max(saved, pending) + saved);
        if (s == 0) CHECK(held >= static_cast<double>(cap) * saved);
      }
    }
  }
}
