// Visible tests of the 11.7 process grid on the simulated cluster: for 2x2x2, 2x2x4 and a few
// edge layouts, every group's size, members and order, an all-reduce over each group summing
// exactly its members' ranks (with its bytes under the group's name), and the pipeline
// neighbours. Expected values come from the numbering rule itself, never from the code tested.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>

#include <cstdint>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "11_7_3d_and_experts/grid.hpp"
#include "mgpu/cluster.hpp"

using namespace mgpu;
using namespace mgpu::layout;

namespace {

// The layouts of the issue (2x2x2 and 2x2x4, every axis above 1), then the edges: a single
// rank, no pipeline (pp 1), no tensor parallelism (tp 1), and all three degrees different.
const std::vector<Layout> kLayouts = {{2, 2, 2}, {2, 2, 4}, {1, 1, 1},
                                      {4, 1, 2}, {1, 4, 2}, {3, 2, 1}};

int world_of(const Layout& l) { return static_cast<int>(l.tp * l.pp * l.dp); }

// The numbering rule of the chapter, written out here so the tests do not lean on the student's
// rank_coordinates: tp fastest, then pp, then dp.
int rank_at(const Layout& l, std::int64_t t, std::int64_t p, std::int64_t d) {
  return static_cast<int>(t + l.tp * (p + l.pp * d));
}

// Which axis a group runs along.
enum class Axis { tp, pp, dp };

// The world ranks of `rank`'s group along `axis`, in order along the axis.
std::vector<int> expected_members(const Layout& l, int rank, Axis axis) {
  const std::int64_t t = rank % l.tp, p = rank / l.tp % l.pp, d = rank / (l.tp * l.pp);
  std::vector<int> members;
  const std::int64_t n = axis == Axis::tp ? l.tp : axis == Axis::pp ? l.pp : l.dp;
  for (std::int64_t i = 0; i < n; ++i)
    members.push_back(axis == Axis::tp   ? rank_at(l, i, p, d)
                      : axis == Axis::pp ? rank_at(l, t, i, d)
                                         : rank_at(l, t, p, i));
  return members;
}

// What one rank's grid says about one of its groups.
struct GroupView {
  int size = 0, rank = -1;
  std::vector<int> members;
};

GroupView view(Comm& g) { return {g.size(), g.rank(), g.members()}; }

// What one rank's grid says about everything, recorded on its own thread, checked after the run.
struct GridView {
  RankCoords coords;
  GroupView tp, pp, dp;
  std::optional<int> previous, next;
  bool first = false, last = false;
};

std::vector<GridView> views_of(const Layout& l) {
  std::vector<GridView> views(static_cast<std::size_t>(world_of(l)));
  Cluster cluster(world_of(l));
  cluster.run([&](Rank& r) {
    ProcessGrid grid(r.world(), l);
    views[static_cast<std::size_t>(r.id())] = {
        grid.coords(),         view(grid.tp()),   view(grid.pp()),       view(grid.dp()),
        grid.previous_stage(), grid.next_stage(), grid.is_first_stage(), grid.is_last_stage()};
  });
  return views;
}

// Runs `check(l, r, view)` on what every rank r of every layout l saw, with the layout and the
// rank captured for a failure's message.
template <class Check>
void for_each_view(Check check) {
  for (const Layout& l : kLayouts) {
    CAPTURE(l.tp);
    CAPTURE(l.pp);
    CAPTURE(l.dp);
    const std::vector<GridView> views = views_of(l);
    for (int r = 0; r < world_of(l); ++r) {
      CAPTURE(r);
      check(l, r, views[static_cast<std::size_t>(r)]);
    }
  }
}

}  // namespace

TEST_CASE("process grid: every group has the layout's size, its members, in order along its axis") {
  for_each_view([](const Layout& l, int r, const GridView& v) {
    CHECK(rank_at(l, v.coords.tp, v.coords.pp, v.coords.dp) == r);
    CHECK(v.tp.size == l.tp);
    CHECK(v.pp.size == l.pp);
    CHECK(v.dp.size == l.dp);
    // The first rank whose group is wrong ends the test: the others would repeat its story.
    mgpu_test::require_close("tp group's members", v.tp.members, expected_members(l, r, Axis::tp),
                             {}, {.rank = r});
    mgpu_test::require_close("pp group's members", v.pp.members, expected_members(l, r, Axis::pp),
                             {}, {.rank = r});
    mgpu_test::require_close("dp group's members", v.dp.members, expected_members(l, r, Axis::dp),
                             {}, {.rank = r});
    // Ordered along the axis: the group rank is the coordinate.
    CHECK(v.tp.rank == v.coords.tp);
    CHECK(v.pp.rank == v.coords.pp);
    CHECK(v.dp.rank == v.coords.dp);
  });
}

TEST_CASE("process grid: an all-reduce over each group sums exactly its members' ranks") {
  // 12 doubles per all-reduce, a length every group size here divides, so the ring sends
  // exactly 2 (n - 1)/n of the 96 bytes on every rank.
  constexpr std::size_t kLength = 12;
  constexpr double kBytes = kLength * sizeof(double);
  for (const Layout& l : kLayouts) {
    CAPTURE(l.tp);
    CAPTURE(l.pp);
    CAPTURE(l.dp);
    const int n = world_of(l);
    // Per rank: the tp, pp and dp sums, each an element of the buffer the rank got back.
    std::vector<std::vector<double>> sums(static_cast<std::size_t>(n));
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      ProcessGrid grid(r.world(), l);
      for (Comm* g : {&grid.tp(), &grid.pp(), &grid.dp()}) {
        std::vector<double> x(kLength, static_cast<double>(r.id()));
        g->all_reduce(x);
        sums[static_cast<std::size_t>(r.id())].push_back(
            x[static_cast<std::size_t>(r.id()) % kLength]);
      }
    });
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      std::vector<double> expected;
      for (Axis axis : {Axis::tp, Axis::pp, Axis::dp}) {
        const std::vector<int> m = expected_members(l, r, axis);
        expected.push_back(std::accumulate(m.begin(), m.end(), 0.0));
      }
      mgpu_test::require_close("all-reduced sums over its tp, pp and dp groups",
                               sums[static_cast<std::size_t>(r)], expected, {}, {.rank = r});
      // The bytes land under the group's name, as the traffic meter reports them per axis.
      const TrafficMeter& meter = cluster.report(r).traffic;
      const auto ring = [&](std::int64_t size) {
        return 2.0 * static_cast<double>(size - 1) / static_cast<double>(size) * kBytes;
      };
      CHECK(static_cast<double>(meter.group("tp").bytes_sent) == ring(l.tp));
      CHECK(static_cast<double>(meter.group("pp").bytes_sent) == ring(l.pp));
      CHECK(static_cast<double>(meter.group("dp").bytes_sent) == ring(l.dp));
      CHECK(meter.group("world").bytes_sent == 0);  // building the grid moves no data
    }
  }
}

TEST_CASE(
    "process grid: pipeline neighbours are the next stage's rank either side, none past the ends") {
  for_each_view([](const Layout& l, int r, const GridView& v) {
    const std::int64_t stage = r / l.tp % l.pp;
    // One stage along is tp ranks away, with the same tp and dp index.
    const std::optional<int> previous =
        stage > 0 ? std::optional<int>(r - static_cast<int>(l.tp)) : std::nullopt;
    const std::optional<int> next =
        stage + 1 < l.pp ? std::optional<int>(r + static_cast<int>(l.tp)) : std::nullopt;
    CHECK(v.previous == previous);
    CHECK(v.next == next);
    CHECK(v.first == (stage == 0));
    CHECK(v.last == (stage == l.pp - 1));
  });
}

TEST_CASE(
    "process grid: the example of grid.hpp (2x2x2, rank 5) and the README's (2x2x4, rank 11)") {
  const GridView v = views_of({2, 2, 2})[5];
  using Members = std::vector<int>;
  mgpu_test::check_close("2x2x2 tp group's members", v.tp.members, Members{4, 5}, {}, {.rank = 5});
  mgpu_test::check_close("2x2x2 pp group's members", v.pp.members, Members{5, 7}, {}, {.rank = 5});
  mgpu_test::check_close("2x2x2 dp group's members", v.dp.members, Members{1, 5}, {}, {.rank = 5});
  CHECK_FALSE(v.previous.has_value());
  CHECK(v.next == std::optional<int>(7));

  const GridView w = views_of({2, 2, 4})[11];
  const auto show = [](const std::vector<int>& members) {
    std::string text;
    for (int m : members) text += (text.empty() ? "" : ", ") + std::to_string(m);
    return "{" + text + "}";
  };
  const auto show_rank = [](std::optional<int> rank) {
    return rank ? std::to_string(*rank) : "none";
  };
  MESSAGE("2x2x4 rank 11: coordinates (tp "
          << w.coords.tp << ", pp " << w.coords.pp << ", dp " << w.coords.dp << "), tp "
          << show(w.tp.members) << ", pp " << show(w.pp.members) << ", dp " << show(w.dp.members)
          << ", previous stage " << show_rank(w.previous) << ", next stage " << show_rank(w.next));
  mgpu_test::check_close("2x2x4 tp group's members", w.tp.members, Members{10, 11}, {},
                         {.rank = 11});
  mgpu_test::check_close("2x2x4 pp group's members", w.pp.members, Members{9, 11}, {},
                         {.rank = 11});
  mgpu_test::check_close("2x2x4 dp group's members", w.dp.members, Members{3, 7, 11, 15}, {},
                         {.rank = 11});
  CHECK(w.previous == std::optional<int>(9));
  CHECK_FALSE(w.next.has_value());
}

TEST_CASE("process grid: a layout that does not cover the world is rejected on every rank") {
  Cluster cluster(8);
  CHECK_THROWS_AS(cluster.run([](Rank& r) {
    ProcessGrid grid(r.world(), Layout{2, 2, 4});
  }),
                  std::invalid_argument);
  CHECK_THROWS_AS(cluster.run([](Rank& r) {
    ProcessGrid grid(r.world(), Layout{2, 0, 4});
  }),
                  std::invalid_argument);
}
