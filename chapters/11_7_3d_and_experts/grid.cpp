// 11.7 skeleton: the process grid, a rank's tensor-, pipeline- and data-parallel communicators
// and its pipeline neighbours from a tp x pp x dp layout. The contract is in grid.hpp.
// `./mgpu hint 11_7 process_grid` gives hints for its TODO.
#include "11_7_3d_and_experts/grid.hpp"
#include "11_7_3d_and_experts/checks.hpp"  // check_grid (given)

#include <optional>

#include "mgpu/not_implemented.hpp"

namespace mgpu::layout {

ProcessGrid::ProcessGrid(Comm& world, const Layout& layout) : layout_(layout) {
  // TODO(11.7 process_grid): a wrong layout must fail on every rank before any collective.
  //   Then this rank's coordinates, its three groups (each one world.split(color, key, name),
  //   named "tp", "pp" and "dp" for the traffic meter) and its two neighbours. Which ranks must
  //   end up with the same color for each axis, and what key puts them in order along it? What
  //   is past either end of a pipeline?
  throw NotImplemented("11.7 process_grid");
}

}  // namespace mgpu::layout
