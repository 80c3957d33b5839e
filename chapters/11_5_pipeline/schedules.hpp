// 11.5 Pipeline schedules as data, and an executor that runs any of them across stage ranks:
// each stage holds a contiguous range of the course model's units, receives activations from
// the stage before it, sends them on, and sends input gradients back the other way.
#pragma once

#include "11_5_pipeline/formulas.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/model/model.hpp"
#include "mgpu/not_implemented.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::pipeline {

/// Direction of one step of a stage's program.
enum class Pass {
  forward,   ///< receive the activation (unless first stage), run the stage's units, send it on
  backward,  ///< receive the output gradient (unless last stage), run unit_backward, send dX back
};

/// One entry of a stage's program: which pass of which micro-batch comes next.
struct Action {
  Pass pass = Pass::forward;  ///< forward or backward
  int micro_batch = 0;        ///< 0-based micro-batch index
  /// Same pass of the same micro-batch.
  friend bool operator==(const Action&, const Action&) = default;
};

/// A pipeline schedule: for every stage, the ordered actions that stage runs in one step. The
/// sends and receives are implied: a forward on stage s > 0 first receives micro-batch k's
/// activation from s - 1, and one on s < p - 1 ends by sending it to s + 1; a backward mirrors it.
/// Micro-batches are interchangeable (equal size and cost), so numbering them in another order
/// that every stage shares gives the same schedule: the graded cases compare schedules after
/// renumbering the micro-batches in the order stage 0 runs their forwards.
struct PipelineSchedule {
  int stages = 1;                         ///< p
  int micro_batches = 1;                  ///< m
  std::vector<std::vector<Action>> per_stage;  ///< per_stage[s] is stage s's program
};

/// Given: throws std::invalid_argument naming the first problem unless `schedule` is valid: p
/// programs, each running the forward and the backward of every micro-batch exactly once, and a
/// micro-batch's backward after its forward.
inline void check_schedule(const PipelineSchedule& schedule) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("check_schedule: " + what + "; every stage must run each micro-batch's forward, "
                                "then its backward, exactly once");
  };
  if (schedule.stages < 1 || schedule.micro_batches < 1)
    fail("stages=" + std::to_string(schedule.stages) + " and micro_batches=" +
         std::to_string(schedule.micro_batches) + " must both be at least 1");
  if (schedule.per_stage.size() != static_cast<std::size_t>(schedule.stages))
    fail(std::to_string(schedule.per_stage.size()) + " programs for " + std::to_string(schedule.stages) + " stages");
  for (int s = 0; s < schedule.stages; ++s) {
    const auto m = static_cast<std::size_t>(schedule.micro_batches);
    std::vector<int> fwd(m, 0), bwd(m, 0);
    for (const Action& a : schedule.per_stage[static_cast<std::size_t>(s)]) {
      const std::string where = "stage " + std::to_string(s) + " micro-batch " + std::to_string(a.micro_batch);
      if (a.micro_batch < 0 || a.micro_batch >= schedule.micro_batches) fail(where + " is out of range");
      const auto k = static_cast<std::size_t>(a.micro_batch);
      if (a.pass == Pass::forward) {
        if (++fwd[k] > 1) fail(where + " runs its forward twice");
      } else {
        if (fwd[k] == 0) fail(where + " runs its backward before its forward");
        if (++bwd[k] > 1) fail(where + " runs its backward twice");
      }
    }
    for (std::size_t k = 0; k < m; ++k)
      if (fwd[k] != 1 || bwd[k] != 1)
        fail("stage " + std::to_string(s) + " micro-batch " + std::to_string(k) + " is missing a pass");
  }
}

/// Given: the most micro-batches stage `stage`'s program holds at once (forwards run whose
/// backward has not run yet): what the schedule asks of the stage's activation memory.
inline std::int64_t schedule_in_flight(const PipelineSchedule& schedule, int stage) {
  std::int64_t now = 0, peak = 0;
  for (const Action& a : schedule.per_stage.at(static_cast<std::size_t>(stage))) {
    now += a.pass == Pass::forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

/// The units stage `stage` of a p-stage pipeline holds: [first, last) in forward order.
struct StageUnits {
  int first = 0;  ///< first unit
  int last = 0;   ///< one past the last unit
};

/// Given: the stage split the chapter uses: the n_layers blocks in p equal runs (as layers_per_stage),
/// with the embedding added to stage 0 and the head to stage p - 1, so stages cost the same up
/// to those two small units.
/// @throws std::invalid_argument when p does not divide n_layers or stage is not in [0, p).
inline StageUnits stage_units(const model::Model& model, int p, int stage) {
  const std::int64_t layers = model.config().n_layers;
  if (p < 1 || layers % p != 0)
    throw std::invalid_argument("stage_units: p=" + std::to_string(p) + " does not divide n_layers=" +
                                std::to_string(layers) + "; stages must have equal depth");
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

/// GPipe (Huang et al. 2019): every stage runs the forwards of micro-batches 0..m-1, then their
/// backwards in the same order 0..m-1. Every stage holds all m micro-batches at its peak.
///
/// TODO 9 of 11.5.
/// @throws std::invalid_argument when p or m is below 1.
PipelineSchedule gpipe_schedule(int p, int m);

/// 1F1B (PipeDream-Flush, Narayanan et al. 2021): stage s runs w = min(m, p - 1 - s) warm-up
/// forwards (micro-batches 0..w-1), then alternates one forward (the next micro-batch) and one
/// backward (the oldest held) while forwards remain, then the remaining backwards (cool-down).
/// Same bubble as GPipe; stage s holds min(m, p - s) micro-batches at its peak.
/// Example, p = 2, m = 3: stage 0 runs F0 F1 B0 F2 B1 B2; stage 1 runs F0 B0 F1 B1 F2 B2.
/// (Taking the micro-batches in another order shared by all stages, say m-1 down to 0, is the
/// same schedule: see PipelineSchedule.)
///
/// TODO 10 of 11.5.
/// @throws std::invalid_argument when p or m is below 1.
PipelineSchedule one_f_one_b_schedule(int p, int m);

/// Runs stage pp.rank()'s program of `schedule` for one training step and returns the mean loss
/// over the micro-batches on the last stage (0 on the others).
///
/// The stage owns `units` (stage_units); `params` and `grads` are full flat buffers in the
/// model's layout of which only this stage's units are read and written. Gradients are
/// ACCUMULATED into `grads`: the loss of each micro-batch is scaled by 1/m, so the sum is the
/// gradient of the mean loss over the whole batch, as model.forward_backward on it gives.
///
/// TODO 11 of 11.5.
/// - forward of micro-batch k: stage 0 starts from model.input(rank, micro_batches[k]); the
///   others receive (tokens, in_width of units.first) from pp.rank() - 1 into a
///   Category::activations buffer. Run the units with a UnitCache each, kept until k's backward.
///   The last stage turns the head output into the loss gradient (loss_backward, scale 1/m),
///   kept as k's output gradient; the others send the output to pp.rank() + 1.
/// - backward of micro-batch k: the last stage uses the kept gradient; the others receive it
///   from pp.rank() + 1. Run unit_backward from units.last - 1 down to units.first (this empties
///   k's caches, freeing its activations) and send dX to pp.rank() - 1 unless this is stage 0.
/// - tag each message with the micro-batch and the direction so that any valid schedule pairs
///   sends and receives correctly.
/// @throws std::invalid_argument when the schedule is invalid (check_schedule), its p is not
///         pp.size() or its m is not micro_batches.size().
double run_pipeline(Rank& rank, Comm& pp, const model::Model& model, StageUnits units,
                    const PipelineSchedule& schedule, std::span<const float> params, std::span<float> grads,
                    std::span<const model::Batch> micro_batches);

}  // namespace mgpu::pipeline
