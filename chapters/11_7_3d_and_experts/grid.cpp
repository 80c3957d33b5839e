// 11.7 skeleton: the process grid, a rank's tensor-, pipeline- and data-parallel communicators
// and its pipeline neighbours from a tp x pp x dp layout. The contract is in grid.hpp.
// `./mgpu hint 11_7 process_grid` gives hints for its TODO.
#include "11_7_3d_and_experts/grid.hpp"
#include "11_7_3d_and_experts/checks.hpp"  // check_grid (given)

#include <optional>

#include "mgpu/not_implemented.hpp"

namespace mgpu::layout {

ProcessGrid::ProcessGrid(Comm& world, const Layout& layout) : layout_(layout) {
  // TODO(11.7 process_grid): check_grid first, so a wrong layout fails on every rank before any
  //   split. Then coords_ from your rank_coordinates(world.rank(), layout). Each group is one
  //   world.split(color, key, name): the members of a group share the two coordinates that are NOT
  //   its axis, so encode those two as the color (one number per group); the key is the coordinate
  //   along the axis, so group rank = that coordinate. Name the groups "tp", "pp" and "dp": the
  //   traffic meter adds up bytes by these names. Neighbours: the same (tp, dp) one stage earlier
  //   and one stage later, as world ranks through your global_rank, and std::nullopt past either
  //   end of the pipeline (it is not a ring).
  throw NotImplemented("11.7 ProcessGrid");
}

}  // namespace mgpu::layout
