// Graded cases of 11.7's process grid on the simulated cluster, over a fixed grid of layouts
// (all three degrees different, a pure pipeline, no pipeline, one rank) plus a drawn one: every
// rank's coordinates, groups and pipeline neighbours; then an all-reduce of the world rank over
// each group, with the bytes each rank sends under each group's name. Each rank runs grid.cpp's
// rank bodies on the layout given here.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "case.hpp"
#include "grid.inputs.hpp"
#include "mgpu/cluster.hpp"
#include "rank_code.hpp"

using namespace mgpu::grade;
namespace ly = mgpu::layout;

namespace {

// The fixed layouts, each catching a family of mistakes:
// - 2x3x4: every degree different and above 1, so any two axes swapped, colors that collide, or
//   a neighbour one world rank away (instead of tp) all show;
// - 1x4x1: the pipeline is the whole world (a grid that reuses the world Comm shows by name), and
//   its ends show a ring that wraps around;
// - 4x1x2: no pipeline, so no rank has a neighbour;
// - 1x1x1: one rank, every group of size 1.
// Then one drawn layout, drawn again when it repeats a fixed one (values are named by layout).
std::vector<ly::Layout> layouts(Ctx& ctx) {
  std::vector<ly::Layout> g = {{2, 3, 4}, {1, 4, 1}, {4, 1, 2}, {1, 1, 1}};
  ly::Layout d;
  do {
    d = {ctx.pick<std::int64_t>({1, 2, 4}), ctx.uniform_int(1, 4), ctx.uniform_int(1, 4)};
  } while (std::any_of(g.begin(), g.end(), [&](const ly::Layout& l) {
    return l.tp == d.tp && l.pp == d.pp && l.dp == d.dp;
  }));
  g.push_back(d);
  return g;
}

// Prefix naming a layout in every value it emits, so feedback says where a value went wrong.
std::string label(const ly::Layout& l) {
  return "tp" + std::to_string(l.tp) + "_pp" + std::to_string(l.pp) + "_dp" + std::to_string(l.dp) +
         ".";
}

int world_of(const ly::Layout& l) { return static_cast<int>(l.tp * l.pp * l.dp); }

}  // namespace

MGPU_CASE_ISOLATED("11_7.process_grid") {
  for (const ly::Layout& l : layouts(ctx)) {
    const int n = world_of(l);
    // Per world rank, published by that rank (11_7.process_grid), emitted in rank order.
    struct Seen {
      std::vector<double> coords, group_ranks, tp, pp, dp, neighbours, ends;
    };
    std::vector<Seen> seen(static_cast<std::size_t>(n));
    mgpu::Cluster cluster(n);
    const std::pair<const char*, std::vector<double> Seen::*> parts[] = {
        {"coords", &Seen::coords}, {"group_ranks", &Seen::group_ranks},
        {"tp", &Seen::tp},         {"pp", &Seen::pp},
        {"dp", &Seen::dp},         {"neighbours", &Seen::neighbours},
        {"ends", &Seen::ends}};
    run_ranks(cluster, "11_7.process_grid", [&](int) { return l; });
    for (int id = 0; id < n; ++id)
      for (const auto& [name, part] : parts)
        seen[static_cast<std::size_t>(id)].*part = cluster.published<double>(id, name);
    // Each value is every rank's part, concatenated in world-rank order: a group of the wrong
    // size makes a value of the wrong length.
    const auto all = [&](std::vector<double> Seen::*part) {
      std::vector<double> v;
      for (const Seen& s : seen) v.insert(v.end(), (s.*part).begin(), (s.*part).end());
      return v;
    };
    const std::string at = label(l);
    ctx.emit(at + "coordinates", all(&Seen::coords));
    ctx.emit(at + "group_ranks", all(&Seen::group_ranks));
    ctx.emit(at + "tp_members", all(&Seen::tp));
    ctx.emit(at + "pp_members", all(&Seen::pp));
    ctx.emit(at + "dp_members", all(&Seen::dp));
    ctx.emit(at + "previous_and_next_stage", all(&Seen::neighbours));
    ctx.emit(at + "first_and_last_stage", all(&Seen::ends));
  }
  ctx.emit_rejects("rejects_layout_not_covering_world", [] {
    mgpu::Cluster cluster(8);
    run_ranks(cluster, "11_7.grid_only", [](int) { return ly::Layout{2, 2, 4}; });
  });
}

MGPU_CASE_ISOLATED("11_7.grid_all_reduce") {
  for (const ly::Layout& l : layouts(ctx)) {
    const int n = world_of(l);
    // Per world rank: the sums over its tp, pp and dp groups, then over all three in a row (the
    // sum over the whole world), and the bytes it sent under each group name.
    std::vector<std::vector<double>> sums(static_cast<std::size_t>(n));
    mgpu::Cluster cluster(n);
    run_ranks(cluster, "11_7.grid_all_reduce", [&](int) { return l; });
    for (int id = 0; id < n; ++id)
      sums[static_cast<std::size_t>(id)] = cluster.published<double>(id, "sums");
    std::vector<double> group_sums, world_sums, bytes;
    for (int r = 0; r < n; ++r) {
      const std::vector<double>& mine = sums[static_cast<std::size_t>(r)];
      group_sums.insert(group_sums.end(), mine.begin(), mine.begin() + 3);
      world_sums.push_back(mine.back());
      const mgpu::TrafficMeter& meter = cluster.report(r).traffic;
      for (const char* name : {"tp", "pp", "dp", "world"})
        bytes.push_back(static_cast<double>(meter.group(name).bytes_sent));
    }
    const std::string at = label(l);
    ctx.emit(at + "tp_pp_dp_sums", group_sums);
    ctx.emit(at + "sum_over_tp_then_pp_then_dp", world_sums);
    // Exact both ways: the names are the contract the traffic meter reports by, and a grid that
    // talks outside its groups, or moves data while it is built, sends other bytes.
    ctx.emit(at + "bytes_sent_in_tp_pp_dp_world", bytes);
  }
}
