// 11.7 skeleton: the 3D-parallel training step, tensor-parallel blocks, the stage boundary sent
// in 1/tp slices, ZeRO-1 over the replicas and the 1F1B order. The contract is in step3d.hpp,
// the given parts (shares, state) in share.hpp. `./mgpu hint 11_7 <todo>` gives hints for each
// TODO.
#include "11_7_3d_and_experts/step3d.hpp"

#include "mgpu/cluster.hpp"
#include "mgpu/model/layers.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/tensor.hpp"

namespace mgpu::layout {

Buffer<float> tp_block_forward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                               std::span<const float> unit_params, Buffer<float> x,
                               std::int64_t tokens, BlockCache3d& cache) {
  // TODO(11.7 tp_block_forward): the block's output from this rank's heads and FFN columns.
  //   block_slices names the slices. Each half (attention, then FFN) computed on a slice gives a
  //   partial sum of that half's output, the same shape as the full one; what turns it into the
  //   full output? Where do the residual and the bias held whole come in, and how many times?
  //   Fill every cache field, and charge the rank's share of the block's FLOPs.
  throw NotImplemented("11.7 tp_block_forward");
}

Buffer<float> tp_block_backward(Rank& rank, Comm& tp, const model::Model& model, int unit,
                                std::span<const float> unit_params, std::span<float> unit_grads,
                                BlockCache3d& cache, std::span<const float> dy) {
  // TODO(11.7 tp_block_backward): the forward in reverse, FFN first. The layers' backward
  //   functions give this rank's slice gradients (accumulated) and a partial input gradient per
  //   half; the input gradient must come out the same on every tp rank. Keep the residual paths.
  throw NotImplemented("11.7 tp_block_backward");
}

void send_boundary(ProcessGrid& grid, Direction direction, std::span<const float> tensor, int tag) {
  // TODO(11.7 send_boundary): every tp rank holds the same tensor. Which part does this rank
  //   send, and to which rank of grid.pp()?
  throw NotImplemented("11.7 send_boundary");
}

Buffer<float> receive_boundary(Rank& rank, ProcessGrid& grid, Direction direction,
                               std::size_t elements, int tag) {
  // TODO(11.7 receive_boundary): receive this rank's part where it belongs in the whole tensor,
  //   then let the tp group fill in the rest.
  throw NotImplemented("11.7 receive_boundary");
}

void zero1_update(Rank& rank, ProcessGrid& grid, State3d& state) {
  // TODO(11.7 zero1_update): done when state.grads at this rank's shard holds that shard's
  //   gradient summed over the dp replicas, state.params is the same on every replica and is
  //   one Adam step on the summed gradient, and state.adam (which covers this shard only) has
  //   advanced once. The dp meter shows ZeRO-1's bytes and no all-reduce; nothing stays
  //   allocated. Which collective leaves each rank exactly the part it updates?
  throw NotImplemented("11.7 zero1_update");
}

std::vector<std::pair<bool, int>> one_f_one_b_order(int stage, int stages, int micro_batches) {
  // TODO(11.7 one_f_one_b_order): the 1F1B order of one stage. How many forwards can a stage
  //   run before the first backward comes back to it, and what does it do once one has? Check
  //   your answer against the example in the contract, and against the last stage.
  throw NotImplemented("11.7 one_f_one_b_order");
}

std::optional<double> train_step_3d(Rank& rank, ProcessGrid& grid, const model::Model& model,
                                    State3d& state, const model::Batch& global, int micro_batches) {
  // TODO(11.7 train_step_3d): done when every rank's parameters equal one Adam step of
  //   one-rank training on `global` (the mean loss over all its sequences), cut as the rank
  //   holds them; a stage never holds more than min(m, pp - stage) micro-batches' activations
  //   and none once it returns; the bytes per group are what the contract states; and the last
  //   stage returns its replica's mean loss. A batch that does not split throws before any message.
  //   What must stay alive from a micro-batch's forward until its backward, and what scale
  //   makes the sums over micro-batches and replicas a mean? Climb the README's ladder.
  throw NotImplemented("11.7 train_step_3d");
}

}  // namespace mgpu::layout
