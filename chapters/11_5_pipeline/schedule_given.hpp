// 11.5 given: the data a pipeline schedule is made of (Action, PipelineSchedule), the checks that
// read a schedule without running it (check_schedule, schedule_in_flight), the split of the model
// and the batch (stage_units, split_micro_batches), and run_pipeline's form with the units spelled
// out. Not part of the exercise: schedules.hpp, the contract of your TODOs, includes it.
#pragma once

#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mgpu::pipeline {

/// Direction of one step of a stage's program. A (micro-batch, chunk) runs either `backward` or
/// its two halves, backward_input then backward_weight (zero-bubble schedules), never both.
enum class Pass {
  forward,          ///< a micro-batch's forward through one chunk of the stage
  backward,         ///< its whole backward through the same chunk
  backward_input,   ///< B: the input-gradient half of that backward, which the stage before waits
                    ///< for
  backward_weight,  ///< W: the weight-gradient half, which no other stage waits for
};

/// One entry of a stage's program: which pass of which micro-batch on which of the stage's
/// chunks comes next. GPipe and 1F1B give each stage one chunk, so their chunk is always 0.
struct Action {
  Pass pass = Pass::forward;  ///< forward, backward, or one half of the backward
  int micro_batch = 0;        ///< 0-based micro-batch index
  int chunk = 0;              ///< which of the stage's v chunks, 0..v-1 (see PipelineSchedule)
  /// Same pass of the same micro-batch on the same chunk.
  friend bool operator==(const Action&, const Action&) = default;
};

/// Given: "backward of micro-batch 3 chunk 0" ("forward", "backward-input", "backward-weight"),
/// the words check_schedule's messages use.
inline std::string describe(const Action& a) {
  const char* names[] = {"forward", "backward", "backward-input", "backward-weight"};
  return std::string(names[static_cast<int>(a.pass)]) + " of micro-batch " +
         std::to_string(a.micro_batch) + " chunk " + std::to_string(a.chunk);
}

/// A pipeline schedule: for every stage, the ordered actions that stage runs in one step.
///
/// The model's blocks are cut into p * v equal *model chunks* 0..p*v-1 (v = `chunks`), and stage
/// s holds v of them, round robin: its chunk c is model chunk c * p + s, so a micro-batch goes
/// round all p stages v times (Narayanan et al. 2021's virtual pipeline; v = 1 is the plain
/// pipeline, where stage s holds model chunk s). The sends and receives are implied: the forward
/// of micro-batch k on model chunk j > 0 first receives k's activation from the stage holding
/// chunk j - 1 (stage p - 1 when a round wraps back to stage 0), and one on j < p*v - 1 ends by
/// sending it to the stage holding chunk j + 1; a backward mirrors it.
/// Micro-batches are interchangeable (equal size and cost), so numbering them in another order
/// that every stage shares gives the same schedule: the graded cases compare schedules after
/// renumbering the micro-batches in the order stage 0 runs their forwards.
struct PipelineSchedule {
  int stages = 1;                              ///< p
  int micro_batches = 1;                       ///< m
  std::vector<std::vector<Action>> per_stage;  ///< per_stage[s] is stage s's program
  int chunks = 1;                              ///< v: model chunks per stage (1 unless interleaved)
};

/// Given: throws std::invalid_argument naming the first problem unless `schedule` is valid and
/// runs to its end. Checked in this order:
/// 1. p, m and v are at least 1 and there are p programs;
/// 2. each stage's program, action by action: the chunk in [0, v) and the micro-batch in [0, m),
///    no pass run twice, no backward (whole or input half) before the forward of the same
///    micro-batch and chunk, no backward-weight before its backward-input, no whole backward
///    beside the halves; then every (micro-batch, chunk) has its forward and either its backward
///    or both halves. The message names the first offending action:
///    "stage 1, position 4 (backward of micro-batch 2 chunk 0): runs before its forward";
/// 3. no deadlock: the programs are played against each other as the executor runs them (an
///    action starts only once its input exists: the activation from the forward of the model
///    chunk before, or the gradient from the backward, or backward-input, of the chunk after; a
///    backward-weight needs nothing from a neighbour; sends never wait).
///    When no stage can move, the message names where every unfinished stage waits and for what:
///    "deadlock: stage 0 waits at position 2 (backward of micro-batch 0 chunk 0) for stage 1's
///    backward of micro-batch 0 chunk 0; stage 1 waits at ...".
inline void check_schedule(const PipelineSchedule& schedule) {
  const auto fail = [](const std::string& what, const std::string& fix) {
    throw std::invalid_argument("check_schedule: " + what + "; " + fix);
  };
  const std::string once =
      "every stage must run each micro-batch's forward, then its backward (or backward-input, "
      "then backward-weight), exactly once per chunk";
  const int p = schedule.stages, m = schedule.micro_batches, v = schedule.chunks;
  if (p < 1 || m < 1 || v < 1)
    fail("stages=" + std::to_string(p) + ", micro_batches=" + std::to_string(m) +
             " and chunks=" + std::to_string(v) + " must all be at least 1",
         once);
  if (schedule.per_stage.size() != static_cast<std::size_t>(p))
    fail(std::to_string(schedule.per_stage.size()) + " programs for " + std::to_string(p) +
             " stages",
         once);
  // Flags are indexed by k * v + c, one per (micro-batch, chunk) of a stage.
  const auto slots = static_cast<std::size_t>(m) * static_cast<std::size_t>(v);
  const auto slot = [v](const Action& a) {
    return static_cast<std::size_t>(a.micro_batch) * static_cast<std::size_t>(v) +
           static_cast<std::size_t>(a.chunk);
  };
  const auto at = [](int s, std::size_t i, const Action& a) {
    return "stage " + std::to_string(s) + ", position " + std::to_string(i) + " (" + describe(a) +
           ")";
  };
  // uses_halves[s][k * v + c]: stage s runs the backward of (k, c) as two halves.
  std::vector<std::vector<char>> uses_halves(static_cast<std::size_t>(p),
                                             std::vector<char>(slots, 0));
  for (int s = 0; s < p; ++s) {
    const auto& program = schedule.per_stage[static_cast<std::size_t>(s)];
    // runs[pass][k * v + c]: how often the stage has run that pass of (k, c) so far.
    std::vector<std::vector<int>> runs(4, std::vector<int>(slots, 0));
    const auto ran = [&](Pass pass, std::size_t k) {
      return runs[static_cast<std::size_t>(pass)][k];
    };
    for (std::size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (a.chunk < 0 || a.chunk >= v)
        fail(at(s, i, a) + ": chunk " + std::to_string(a.chunk) + " is outside [0, " +
                 std::to_string(v) + ")",
             once);
      if (a.micro_batch < 0 || a.micro_batch >= m)
        fail(at(s, i, a) + ": micro-batch " + std::to_string(a.micro_batch) + " is outside [0, " +
                 std::to_string(m) + ")",
             once);
      const std::size_t k = slot(a);
      if (a.pass == Pass::backward || a.pass == Pass::backward_input) {
        if (ran(Pass::forward, k) == 0) fail(at(s, i, a) + ": runs before its forward", once);
      }
      if (a.pass == Pass::backward_weight && ran(Pass::backward_input, k) == 0)
        fail(at(s, i, a) + ": runs before its backward-input", once);
      if ((a.pass == Pass::backward &&
           ran(Pass::backward_input, k) + ran(Pass::backward_weight, k) > 0) ||
          (a.pass != Pass::forward && a.pass != Pass::backward && ran(Pass::backward, k) > 0))
        fail(at(s, i, a) + ": mixes the whole backward with its halves", once);
      if (++runs[static_cast<std::size_t>(a.pass)][k] > 1)
        fail(at(s, i, a) + ": runs a second time", once);
    }
    for (std::size_t k = 0; k < slots; ++k) {
      const bool halves = ran(Pass::backward_input, k) == 1;
      uses_halves[static_cast<std::size_t>(s)][k] = halves ? 1 : 0;
      Pass missing = Pass::forward;
      if (ran(Pass::forward, k) != 1)
        missing = Pass::forward;
      else if (halves && ran(Pass::backward_weight, k) != 1)
        missing = Pass::backward_weight;
      else if (!halves && ran(Pass::backward, k) != 1)
        missing = Pass::backward;
      else
        continue;
      fail("stage " + std::to_string(s) + " never runs the " +
               describe({missing, static_cast<int>(k) / v, static_cast<int>(k) % v}) +
               " (its program has " + std::to_string(program.size()) + " actions)",
           once);
    }
  }

  // Play the programs: each stage runs its next action as soon as that action's input exists.
  // Model chunk j lives on stage j % p as its chunk j / p (see PipelineSchedule).
  const int last = p * v - 1;
  // fdone: forward run; gdone: the input gradient sent (backward or backward-input run).
  std::vector<std::vector<char>> fdone(static_cast<std::size_t>(p), std::vector<char>(slots, 0));
  std::vector<std::vector<char>> gdone = fdone;
  // The stage and action whose output `a` on stage s needs; stage -1 when it needs none.
  const auto producer = [&](int s, const Action& a) -> std::pair<int, Action> {
    const int j = a.chunk * p + s;
    if (a.pass == Pass::forward)
      return j == 0 ? std::pair{-1, a}
                    : std::pair{(j - 1) % p, Action{Pass::forward, a.micro_batch, (j - 1) / p}};
    // The weight half needs only its own input half (checked above); the last chunk's backward
    // starts from the loss its own forward left.
    if (a.pass == Pass::backward_weight || j == last) return std::pair{-1, a};
    const int from = (j + 1) % p;
    Action need{Pass::backward, a.micro_batch, (j + 1) / p};
    if (uses_halves[static_cast<std::size_t>(from)][slot(need)]) need.pass = Pass::backward_input;
    return std::pair{from, need};
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      const auto& program = schedule.per_stage[static_cast<std::size_t>(s)];
      auto& i = next[static_cast<std::size_t>(s)];
      while (i < program.size()) {
        const Action& a = program[i];
        const auto [from, need] = producer(s, a);
        if (from >= 0) {
          const auto& done = need.pass == Pass::forward ? fdone : gdone;
          if (!done[static_cast<std::size_t>(from)][slot(need)]) break;
        }
        if (a.pass == Pass::forward) fdone[static_cast<std::size_t>(s)][slot(a)] = 1;
        if (a.pass == Pass::backward || a.pass == Pass::backward_input)
          gdone[static_cast<std::size_t>(s)][slot(a)] = 1;
        ++i;
        moved = true;
      }
    }
  }
  std::string stuck;
  for (int s = 0; s < p; ++s) {
    const auto& program = schedule.per_stage[static_cast<std::size_t>(s)];
    const std::size_t i = next[static_cast<std::size_t>(s)];
    if (i == program.size()) continue;
    const auto [from, need] = producer(s, program[i]);
    stuck += (stuck.empty() ? "" : "; ") + std::string("stage ") + std::to_string(s) +
             " waits at position " + std::to_string(i) + " (" + describe(program[i]) +
             ") for stage " + std::to_string(from) + "'s " + describe(need);
  }
  if (!stuck.empty())
    fail("deadlock: " + stuck,
         "order each program so that every action's input comes from an action its neighbour can "
         "reach first");
}

/// Given: the most (micro-batch, chunk) pairs stage `stage`'s program holds at once (forwards
/// run whose backward, or backward-weight, has not run yet): what the schedule asks of the
/// stage's activation memory, in chunk-micro-batches (one chunk's activations for one
/// micro-batch; a whole stage's when v = 1). A pair whose backward-input has run still counts
/// until its backward-weight: the weight half needs the saved inputs (model.hpp), so this is an
/// upper bound on what the ledger sees between the halves.
inline std::int64_t schedule_in_flight(const PipelineSchedule& schedule, int stage) {
  std::int64_t now = 0, peak = 0;
  for (const Action& a : schedule.per_stage.at(static_cast<std::size_t>(stage))) {
    if (a.pass == Pass::forward) ++now;
    if (a.pass == Pass::backward || a.pass == Pass::backward_weight) --now;
    peak = std::max(peak, now);
  }
  return peak;
}

/// The units stage `stage` of a p-stage pipeline holds: [first, last) in forward order.
struct StageUnits {
  int first = 0;  ///< first unit
  int last = 0;   ///< one past the last unit
  /// Same range.
  friend bool operator==(const StageUnits&, const StageUnits&) = default;
};

/// Given: the stage split the chapter uses: the n_layers blocks in p equal runs (as
/// layers_per_stage), with the embedding added to stage 0 and the head to stage p - 1, so stages
/// cost the same up to those two small units. The same split gives the model chunks of an
/// interleaved pipeline: with v chunks per stage, stage_units(model, p * v, j) are the units of
/// model chunk j (embedding in chunk 0, head in chunk p*v - 1), and which stage holds chunk j is
/// the executor's business (PipelineSchedule).
/// @throws std::invalid_argument when p does not divide n_layers or stage is not in [0, p).
inline StageUnits stage_units(const model::Model& model, int p, int stage) {
  const std::int64_t layers = model.config().n_layers;
  if (p < 1 || layers % p != 0)
    throw std::invalid_argument("stage_units: p=" + std::to_string(p) +
                                " does not divide n_layers=" + std::to_string(layers) +
                                "; stages must have equal depth");
  const std::int64_t per = layers / p;
  if (stage < 0 || stage >= p)
    throw std::invalid_argument("stage_units: stage " + std::to_string(stage) + " is outside [0, " +
                                std::to_string(p) + "); stages are numbered 0 to p-1");
  // Unit 0 is the embedding, units 1..L the blocks, L + 1 the head.
  const int first = stage == 0 ? 0 : 1 + static_cast<int>(per) * stage;
  const int last = stage == p - 1 ? model.num_units() : 1 + static_cast<int>(per) * (stage + 1);
  return {first, last};
}

/// Given: `batch` cut into m equal micro-batches of whole sequences (the slices a step pipelines).
/// @throws std::invalid_argument when m < 1 or m does not divide the batch's sequences.
inline std::vector<model::Batch> split_micro_batches(const model::Batch& batch, int m) {
  if (m < 1 || batch.sequences % m != 0)
    throw std::invalid_argument("split_micro_batches: " + std::to_string(batch.sequences) +
                                " sequences do not split into m=" + std::to_string(m) +
                                " equal micro-batches; pick m dividing the batch size");
  std::vector<model::Batch> out;
  const std::int64_t each = batch.sequences / m;
  for (int k = 0; k < m; ++k) out.push_back(batch.slice(k * each, each));
  return out;
}

/// Declared again (with its contract) in schedules.hpp, for the form below.
double run_pipeline(Rank& rank, Comm& pp, const model::Model& model,
                    const PipelineSchedule& schedule, std::span<const float> params,
                    std::span<float> grads, std::span<const model::Batch> micro_batches);

/// Given: run_pipeline with the stage's units spelled out, for schedules of one chunk per stage
/// (GPipe, 1F1B). `units` must be stage_units(model, pp.size(), pp.rank()), which the form above
/// works out itself.
/// @throws std::invalid_argument when the schedule has several chunks or `units` is another range,
///         and as the form above.
inline double run_pipeline(Rank& rank, Comm& pp, const model::Model& model, StageUnits units,
                           const PipelineSchedule& schedule, std::span<const float> params,
                           std::span<float> grads, std::span<const model::Batch> micro_batches) {
  if (schedule.chunks != 1)
    throw std::invalid_argument(
        "run_pipeline: a schedule of " + std::to_string(schedule.chunks) +
        " chunks per stage has no single range of units; call the form without units");
  if (units != stage_units(model, pp.size(), pp.rank()))
    throw std::invalid_argument("run_pipeline: units [" + std::to_string(units.first) + ", " +
                                std::to_string(units.last) + ") are not stage " +
                                std::to_string(pp.rank()) +
                                "'s; pass stage_units(model, pp.size(), pp.rank())");
  return run_pipeline(rank, pp, model, schedule, params, grads, micro_batches);
}

}  // namespace mgpu::pipeline
