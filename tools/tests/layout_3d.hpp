// The 3D layout the planner's traffic tests price: 70B parameters on 128 GPUs as tp 8, pp 4 and
// dp 4, 16 micro-batches of one 4096-token sequence through 80 layers of width 8192.
#pragma once

#include "plan/model.hpp"

namespace tools_test {

/// That layout at ZeRO stage `stage`, with `recompute` and, when `sequence_parallel`, the
/// tensor-parallel groups splitting the sequence too.
inline mgpu::planner::Options layout_3d(int stage, mgpu::planner::Recompute recompute,
                                        bool sequence_parallel = false) {
  mgpu::planner::Options o;
  o.params = 70e9;
  o.gpus = 128;
  o.tp = 8;
  o.pp = 4;
  o.zero_stage = stage;
  o.micro_batches = 16;
  o.shape = mgpu::planner::ModelShape{
      {.seq = 4096, .micro_batch = 1, .hidden = 8192, .heads = 64, .layers = 80},
      recompute,
      sequence_parallel};
  return o;
}

}  // namespace tools_test
