// 11.7 reference solution: the process grid, a rank's tensor-, pipeline- and data-parallel
// communicators and its pipeline neighbours from a tp x pp x dp layout.
// Implements chapters/11_7_3d_and_experts/grid.hpp.
#include "11_7_3d_and_experts/grid.hpp"
#include "11_7_3d_and_experts/checks.hpp"  // check_grid (given)

#include <optional>

namespace mgpu::layout {

namespace {

// One color per group: the two coordinates a group's members share, as a single number (the
// first varies fastest). Every color fits an int because it is below the world size.
int color_of(std::int64_t fast, std::int64_t slow, std::int64_t fast_degree) {
  return static_cast<int>(fast + fast_degree * slow);
}

}  // namespace

ProcessGrid::ProcessGrid(Comm& world, const Layout& layout) : layout_(layout) {
  // Every rank sees the same layout and world size, so either all throw here or none does.
  check_grid("ProcessGrid", layout, world.size());
  coords_ = rank_coordinates(world.rank(), layout);
  const RankCoords& c = coords_;

  // Same (pp, dp): one stage of one replica. Keyed by the axis index, so group rank = index.
  tp_ = world.split(color_of(c.pp, c.dp, layout.pp), static_cast<int>(c.tp), "tp");
  // Same (tp, dp): one pipeline.
  pp_ = world.split(color_of(c.tp, c.dp, layout.tp), static_cast<int>(c.pp), "pp");
  // Same (tp, pp): the replicas of one shard.
  dp_ = world.split(color_of(c.tp, c.pp, layout.tp), static_cast<int>(c.dp), "dp");

  // The pipeline is a line, not a ring: the first stage has no previous, the last no next.
  if (c.pp > 0) previous_stage_ = static_cast<int>(global_rank({c.tp, c.pp - 1, c.dp}, layout));
  if (c.pp + 1 < layout.pp)
    next_stage_ = static_cast<int>(global_rank({c.tp, c.pp + 1, c.dp}, layout));
}

}  // namespace mgpu::layout
