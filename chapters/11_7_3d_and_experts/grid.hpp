// 11.7 The process grid: one object turns a tp x pp x dp layout into the three communicators a
// rank trains with and the ranks of its pipeline neighbours, so the rest of a 3D training step
// never works out for itself who talks to whom.
#pragma once

#include <optional>

#include "11_7_3d_and_experts/formulas.hpp"
#include "mgpu/comm.hpp"

namespace mgpu::layout {

/// One rank's place in a tp x pp x dp layout: its coordinates, its tensor-, pipeline- and
/// data-parallel groups, and its pipeline neighbours. Everything is built in the constructor, in
/// one place, and only read afterwards.
///
/// Ranks are numbered as rank_coordinates numbers them (tp fastest, then pp, then dp), so for
/// this rank with coordinates (t, p, d):
/// - tp() holds the layout.tp ranks (0..tp-1, p, d): same stage, same replica. Named "tp".
/// - pp() holds the layout.pp ranks (t, 0..pp-1, d): one pipeline, stage by stage. Named "pp".
/// - dp() holds the layout.dp ranks (t, p, 0..dp-1): the replicas of the same shard. Named "dp".
/// Each group is ordered along its own axis, so tp().rank() == coords().tp, pp().rank() ==
/// coords().pp and dp().rank() == coords().dp. The names key the traffic meter: the bytes of all
/// tensor-parallel groups add up under "tp", and so on.
///
/// Example, Layout{2, 2, 2} on 8 ranks: rank 5 is (1, 0, 1); its tp group is {4, 5}, its pp group
/// {5, 7}, its dp group {1, 5}; it is the first stage, so it has no previous stage, and its next
/// stage is rank 7.
class ProcessGrid {
 public:
  /// Builds this rank's groups. Collective over `world`: every member constructs its grid with
  /// the same layout, before it is used for anything else, since each Comm::split is itself a
  /// collective. The ranks below are ranks of `world` (usually Rank::world(), where they are
  /// the global ranks).
  ///
  /// The coordinates and neighbours agree with rank_coordinates and global_rank. Meter: the
  /// groups' traffic counts under "tp", "pp" and "dp" (the world's stays under its own name).
  ///
  /// TODO(11.7 process_grid) (grid.cpp).
  /// @throws std::invalid_argument when a degree is below 1 or tp * pp * dp differs from
  ///         world.size(), on every rank alike and before any split, so no rank is left waiting.
  ProcessGrid(Comm& world, const Layout& layout);

  /// The layout this grid was built for.
  [[nodiscard]] const Layout& layout() const { return layout_; }
  /// This rank's index along each axis.
  [[nodiscard]] const RankCoords& coords() const { return coords_; }
  /// The tensor-parallel group: same stage and replica, size layout.tp.
  Comm& tp() { return tp_; }
  /// The pipeline group: same tp index and replica, size layout.pp, group rank = stage.
  Comm& pp() { return pp_; }
  /// The data-parallel group: same tp index and stage, size layout.dp.
  Comm& dp() { return dp_; }

  /// Rank in `world` of the previous stage's rank with this rank's tp and dp index (it sends
  /// this rank its activations), or std::nullopt on the first stage. In pp() it is group rank
  /// pp().rank() - 1.
  [[nodiscard]] std::optional<int> previous_stage() const { return previous_stage_; }
  /// Rank in `world` of the next stage's rank with this rank's tp and dp index, or std::nullopt
  /// on the last stage. In pp() it is group rank pp().rank() + 1.
  [[nodiscard]] std::optional<int> next_stage() const { return next_stage_; }
  /// True on stage 0, which reads the input.
  [[nodiscard]] bool is_first_stage() const { return coords_.pp == 0; }
  /// True on stage layout.pp - 1, which computes the loss.
  [[nodiscard]] bool is_last_stage() const { return coords_.pp == layout_.pp - 1; }

 private:
  Layout layout_;
  RankCoords coords_;
  Comm tp_, pp_, dp_;
  std::optional<int> previous_stage_, next_stage_;
};

}  // namespace mgpu::layout
