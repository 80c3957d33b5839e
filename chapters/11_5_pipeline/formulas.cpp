// 11.5 skeleton: pipeline bubble, micro-batches needed, in-flight activations and boundary
// traffic. The contract is in formulas.hpp; fill in each TODO.
// A TODO's id is the last word in its parentheses: `./mgpu hint 11_5 <id>` gives hints for it.
#include "11_5_pipeline/formulas.hpp"
#include "11_5_pipeline/checks.hpp"  // check_stage (given)

#include "mgpu/check_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mgpu/not_implemented.hpp"

namespace mgpu::pipeline {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

double gpipe_bubble_fraction(std::int64_t p, std::int64_t m) {
  // TODO(11.5 gpipe_bubble_fraction): the share of a GPipe step a stage sits idle: 0 with one
  // stage, falling towards 0 as m grows; p = 4, m = 8 gives 3/11. p or m below 1 throws.
  throw NotImplemented("11.5 gpipe_bubble_fraction");
}

std::int64_t min_micro_batches_for_bubble(std::int64_t p, double target) {
  // TODO(11.5 min_micro_batches_for_bubble): the smallest m whose GPipe bubble is strictly below
  // `target` (p = 4, 10%: 28), exact for every p and target even where floating point rounds
  // a hair off. A target outside (0, 1], NaN included, throws.
  throw NotImplemented("11.5 min_micro_batches_for_bubble");
}

double interleaved_bubble_fraction(std::int64_t p, std::int64_t m, std::int64_t v) {
  // TODO(11.5 interleaved_bubble_fraction): the bubble with v model chunks per stage; v = 1 is
  // GPipe's, and more chunks never make it larger.
  throw NotImplemented("11.5 interleaved_bubble_fraction");
}

double bubble_to_compute_ratio(std::int64_t p, std::int64_t m, std::int64_t v) {
  // TODO(11.5 bubble_to_compute_ratio): Narayanan et al.'s form of the same bubble: idle time
  // over compute time rather than over the whole step.
  throw NotImplemented("11.5 bubble_to_compute_ratio");
}

double pipeline_step_seconds(std::int64_t p, std::int64_t m, double forward_seconds,
                             double backward_seconds) {
  // TODO(11.5 pipeline_step_seconds): the duration of one GPipe step, bubble included, for a
  // micro-batch whose forward and backward on one stage take the given seconds.
  throw NotImplemented("11.5 pipeline_step_seconds");
}

double zb_h1_bubble_seconds(std::int64_t p, double forward_seconds, double input_backward_seconds,
                            double weight_backward_seconds) {
  // TODO(11.5 zb_h1_bubble_seconds): the seconds a ZB-H1 stage waits per step, as the header
  // states, with its argument checks (the formula's condition on T_W included).
  throw NotImplemented("11.5 zb_h1_bubble_seconds");
}

double zb_h2_bubble_seconds(std::int64_t p, std::int64_t m, double pass_seconds) {
  // TODO(11.5 zb_h2_bubble_seconds): the longest wait inside one stage's part of a ZB-H2 step, as
  // the header states, with its argument checks. What happens to it once m passes the schedule's
  // memory bound?
  throw NotImplemented("11.5 zb_h2_bubble_seconds");
}

std::int64_t in_flight_micro_batches(Schedule schedule, std::int64_t p, std::int64_t m,
                                     std::int64_t stage) {
  // TODO(11.5 in_flight_micro_batches): the most micro-batches whose activations `stage` holds
  // at once under `schedule`; never more for 1F1B than for GPipe. The test compares it with
  // schedule_in_flight of your schedules. check_stage rejects a bad stage.
  throw NotImplemented("11.5 in_flight_micro_batches");
}

std::int64_t layers_per_stage(std::int64_t layers, std::int64_t p) {
  // TODO(11.5 layers_per_stage): the depth of each of p equal stages; layers that do not split
  // evenly throw, naming both numbers.
  throw NotImplemented("11.5 layers_per_stage");
}

double boundary_bytes_sent_per_stage(const TransformerShape& shape, std::int64_t p, std::int64_t m,
                                     std::int64_t stage, double bytes_per_element) {
  // TODO(11.5 boundary_bytes_sent_per_stage): the bytes `stage` sends to its neighbours in one
  // step (activations one way, their gradients the other), so that every byte crossing a
  // boundary is counted once, by its sender; one stage sends nothing.
  throw NotImplemented("11.5 boundary_bytes_sent_per_stage");
}

}  // namespace mgpu::pipeline
