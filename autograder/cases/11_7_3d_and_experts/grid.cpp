// The rank bodies of 11.7's process-grid cases (grid.host.cpp): each rank builds the grid of the
// layout it is given and publishes what it sees of it (coordinates, groups, pipeline neighbours),
// or the sums of an all-reduce of its world rank over each group.
#include <cstddef>
#include <vector>

#include "11_7_3d_and_experts/grid.hpp"
#include "grid.inputs.hpp"
#include "mgpu/cluster.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
namespace ly = mgpu::layout;

namespace {

// One rank's group as numbers: its rank in the group, then its members in group order.
void append_group(std::vector<double>& ranks, std::vector<double>& members, mgpu::Comm& g) {
  ranks.push_back(g.rank());
  for (int m : g.members()) members.push_back(m);
}

}  // namespace

// What this rank sees of the grid; a rank may be a process of its own, so what it saw leaves it
// through publish.
MGPU_RANK_BODY("11_7.process_grid", ly::Layout) {
  ly::ProcessGrid grid(rank.world(), in);
  const ly::RankCoords& c = grid.coords();
  std::vector<double> group_ranks, tp, pp, dp;
  append_group(group_ranks, tp, grid.tp());
  append_group(group_ranks, pp, grid.pp());
  append_group(group_ranks, dp, grid.dp());
  rank.publish("coords", std::vector<double>{static_cast<double>(c.tp), static_cast<double>(c.pp),
                                             static_cast<double>(c.dp)});
  rank.publish("group_ranks", group_ranks);
  rank.publish("tp", tp);
  rank.publish("pp", pp);
  rank.publish("dp", dp);
  // -1 where there is no neighbour.
  rank.publish("neighbours",
               std::vector<double>{static_cast<double>(grid.previous_stage().value_or(-1)),
                                   static_cast<double>(grid.next_stage().value_or(-1))});
  rank.publish("ends", std::vector<double>{grid.is_first_stage() ? 1.0 : 0.0,
                                           grid.is_last_stage() ? 1.0 : 0.0});
}

// The grid built and nothing else: whether the constructor accepts the layout.
MGPU_RANK_BODY("11_7.grid_only", ly::Layout) { ly::ProcessGrid grid(rank.world(), in); }

// The sums over its tp, pp and dp groups, then tp, pp and dp in a row (the sum over the whole
// world). 12 doubles per all-reduce: every group size of the cases (1 to 4) divides it, so the
// ring sends exactly 2 (n - 1)/n of the buffer on every rank.
MGPU_RANK_BODY("11_7.grid_all_reduce", ly::Layout) {
  constexpr std::size_t kLength = 12;
  ly::ProcessGrid grid(rank.world(), in);
  std::vector<double> mine;
  for (mgpu::Comm* g : {&grid.tp(), &grid.pp(), &grid.dp()}) {
    std::vector<double> x(kLength, static_cast<double>(rank.id()));
    g->all_reduce(x);
    mine.push_back(x[static_cast<std::size_t>(rank.id()) % kLength]);
  }
  std::vector<double> x(kLength, static_cast<double>(rank.id()));
  for (mgpu::Comm* g : {&grid.tp(), &grid.pp(), &grid.dp()}) g->all_reduce(x);
  mine.push_back(x.back());
  rank.publish("sums", mine);  // the rank may be a process of its own
}
