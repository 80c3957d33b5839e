// 11.5 skeleton: pipeline bubble, micro-batches needed, in-flight activations and boundary
// traffic. The contract is in formulas.hpp; fill in each TODO.
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
  // TODO(11.5): draw the timeline for p = 3, m = 2: how many time slots does one pass take,
  // and in how many of them is a given stage busy?
  throw NotImplemented("11.5 gpipe_bubble_fraction");
}

std::int64_t min_micro_batches_for_bubble(std::int64_t p, double target) {
  // TODO(11.5): validate (target in (0, 1], NaN rejected). Solve bubble < target for m, then
  // step m down/up using gpipe_bubble_fraction itself so that rounding cannot make it off by
  // one (the inequality is strict: p = 4, target 0.1 must give 28, not 27).
  throw NotImplemented("11.5 min_micro_batches_for_bubble");
}

double interleaved_bubble_fraction(std::int64_t p, std::int64_t m, std::int64_t v) {
  // TODO(11.5): with v chunks per stage each slot is 1/v as long; the fill and drain still take
  // p - 1 of those shorter slots.
  throw NotImplemented("11.5 interleaved_bubble_fraction");
}

double bubble_to_compute_ratio(std::int64_t p, std::int64_t m, std::int64_t v) {
  // TODO(11.5): idle slots over busy slots.
  throw NotImplemented("11.5 bubble_to_compute_ratio");
}

double pipeline_step_seconds(std::int64_t p, std::int64_t m, double forward_seconds,
                             double backward_seconds) {
  // TODO(11.5): slots per pass times the cost of one micro-batch's forward and backward.
  throw NotImplemented("11.5 pipeline_step_seconds");
}

std::int64_t in_flight_micro_batches(Schedule schedule, std::int64_t p, std::int64_t m,
                                     std::int64_t stage) {
  // TODO(11.5): validate (check_stage). For 1F1B: how many forwards has stage i run when its
  // first backward arrives, and what happens to that number afterwards?
  throw NotImplemented("11.5 in_flight_micro_batches");
}

std::int64_t layers_per_stage(std::int64_t layers, std::int64_t p) {
  // TODO(11.5): validate that the stages come out equal.
  throw NotImplemented("11.5 layers_per_stage");
}

double boundary_bytes_sent_per_stage(const TransformerShape& shape, std::int64_t p, std::int64_t m,
                                     std::int64_t stage, double bytes_per_element) {
  // TODO(11.5): validate. Count the directions this stage sends in (forward to stage + 1 if it
  // exists, backward to stage - 1 if it exists), each one activation-sized message per
  // micro-batch.
  throw NotImplemented("11.5 boundary_bytes_sent_per_stage");
}

}  // namespace mgpu::pipeline
