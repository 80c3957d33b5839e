// 11.5 reference solution: pipeline bubble, micro-batches needed, in-flight activations and
// boundary traffic. Implements chapters/11_5_pipeline/formulas.hpp.
#include "11_5_pipeline/formulas.hpp"
#include "11_5_pipeline/checks.hpp"  // check_stage (given)

#include "mgpu/check_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mgpu::pipeline {

using namespace mgpu::args;  // check_count, check_positive, fail, ...

double gpipe_bubble_fraction(std::int64_t p, std::int64_t m) {
  check_count("gpipe_bubble_fraction", "p", p);
  check_count("gpipe_bubble_fraction", "m", m);
  // m + p - 1 slots per pass; each stage works in m of them.
  return static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
}

std::int64_t min_micro_batches_for_bubble(std::int64_t p, double target) {
  const char* where = "min_micro_batches_for_bubble";
  check_count(where, "p", p);
  if (!(target > 0 && target <= 1))
    fail(where, "target", show(target), "is outside (0, 1]: a fraction such as 0.1 for 10%");
  // (p-1)/(m+p-1) < target  <=>  m > (p-1)(1/target - 1). Start from the real-valued bound and
  // step with the exact comparison, so rounding can never give an off-by-one answer.
  const double bound = static_cast<double>(p - 1) * (1.0 / target - 1.0);
  std::int64_t m = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(bound)));
  while (m > 1 && gpipe_bubble_fraction(p, m - 1) < target) --m;
  while (!(gpipe_bubble_fraction(p, m) < target)) ++m;
  return m;
}

double interleaved_bubble_fraction(std::int64_t p, std::int64_t m, std::int64_t v) {
  const char* where = "interleaved_bubble_fraction";
  check_count(where, "p", p);
  check_count(where, "m", m);
  check_count(where, "v", v);
  const double fill = static_cast<double>(p - 1);  // slots to fill and drain the pipeline
  return fill / (static_cast<double>(v) * static_cast<double>(m) + fill);
}

double bubble_to_compute_ratio(std::int64_t p, std::int64_t m, std::int64_t v) {
  const char* where = "bubble_to_compute_ratio";
  check_count(where, "p", p);
  check_count(where, "m", m);
  check_count(where, "v", v);
  return static_cast<double>(p - 1) / (static_cast<double>(v) * static_cast<double>(m));
}

double pipeline_step_seconds(std::int64_t p, std::int64_t m, double forward_seconds,
                             double backward_seconds) {
  const char* where = "pipeline_step_seconds";
  check_count(where, "p", p);
  check_count(where, "m", m);
  check_non_negative(where, "forward_seconds", forward_seconds);
  check_non_negative(where, "backward_seconds", backward_seconds);
  return static_cast<double>(m + p - 1) * (forward_seconds + backward_seconds);
}

double zb_h1_bubble_seconds(std::int64_t p, double forward_seconds, double input_backward_seconds,
                            double weight_backward_seconds) {
  const char* where = "zb_h1_bubble_seconds";
  check_count(where, "p", p);
  check_non_negative(where, "forward_seconds", forward_seconds);
  check_non_negative(where, "input_backward_seconds", input_backward_seconds);
  check_non_negative(where, "weight_backward_seconds", weight_backward_seconds);
  if (weight_backward_seconds > std::min(forward_seconds, input_backward_seconds))
    throw std::invalid_argument(
        std::string(where) +
        ": weight_backward_seconds=" + std::to_string(weight_backward_seconds) +
        " exceeds forward_seconds=" + std::to_string(forward_seconds) +
        " or input_backward_seconds=" + std::to_string(input_backward_seconds) +
        "; the formula holds only while a weight half fits in the waits it fills");
  // The gradient's trip back costs T_B per stage, as in 1F1B; the W halves that 1F1B ran on that
  // trip now fill waits, so each of the p - 1 slots gains back one T_W instead of paying one.
  return static_cast<double>(p - 1) *
         (forward_seconds + input_backward_seconds - weight_backward_seconds);
}

double zb_h2_bubble_seconds(std::int64_t p, std::int64_t m, double pass_seconds) {
  const char* where = "zb_h2_bubble_seconds";
  check_count(where, "p", p);
  check_count(where, "m", m);
  check_non_negative(where, "pass_seconds", pass_seconds);
  // The first stage needs 2p - 1 forwards to cover the first micro-batch's trip out and back
  // (p forwards, p - 1 input halves); each one short of that is a slot it waits, and from
  // m = 2p - 1 on the weight halves fill every remaining gap.
  return static_cast<double>(std::max<std::int64_t>(0, 2 * p - 1 - m)) * pass_seconds;
}

std::int64_t in_flight_micro_batches(Schedule schedule, std::int64_t p, std::int64_t m,
                                     std::int64_t stage) {
  const char* where = "in_flight_micro_batches";
  check_count(where, "p", p);
  check_count(where, "m", m);
  check_stage(where, stage, p);
  switch (schedule) {
    case Schedule::gpipe:
      return m;
    case Schedule::one_f_one_b:
      return std::min(m, p - stage);
  }
  fail(where, "schedule", std::to_string(static_cast<int>(schedule)),
       "is not a Schedule value: use gpipe or one_f_one_b");
  return 0;
}

std::int64_t layers_per_stage(std::int64_t layers, std::int64_t p) {
  check_count("layers_per_stage", "layers", layers);
  check_count("layers_per_stage", "p", p);
  if (layers % p != 0)
    fail("layers_per_stage", "p", std::to_string(p),
         "does not divide layers=" + std::to_string(layers) + ": stages must have equal depth");
  return layers / p;
}

double boundary_bytes_sent_per_stage(const TransformerShape& shape, std::int64_t p, std::int64_t m,
                                     std::int64_t stage, double bytes_per_element) {
  const char* where = "boundary_bytes_sent_per_stage";
  check_count(where, "p", p);
  check_count(where, "m", m);
  check_stage(where, stage, p);
  check_count(where, "seq", shape.seq);
  check_count(where, "micro_batch", shape.micro_batch);
  check_count(where, "hidden", shape.hidden);
  check_positive(where, "bytes_per_element", bytes_per_element);
  const double activation = static_cast<double>(shape.seq) *
                            static_cast<double>(shape.micro_batch) *
                            static_cast<double>(shape.hidden) * bytes_per_element;
  const int directions = (stage + 1 < p ? 1 : 0) + (stage > 0 ? 1 : 0);  // forward, backward
  return static_cast<double>(m) * directions * activation;
}

}  // namespace mgpu::pipeline
