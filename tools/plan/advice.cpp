// evaluate_advice(): for a layout that does not fit, one suggestion per lever (ZeRO stage, tp,
// pp, recompute, sequence parallelism), each evaluated on the same GPU count before it is shown:
// the smallest change of that lever that fits, or, when none does, the one that comes closest.
// A change the options would refuse (a tp that does not divide the heads, say), or one that
// needs no less memory than the layout as it is, is never suggested. When no single change fits,
// the changes together are one more suggestion.
#include <fmt/format.h>
#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "plan/model_parts.hpp"

namespace mgpu::planner::detail {

namespace {

// A candidate change: what it does to the options, and the flag that says so.
struct Change {
  std::function<void(Options&)> apply;
  std::string flag;
};

// Divisors of n above `above`, ascending, found in O(sqrt n) (n can be 2^31).
std::vector<std::int64_t> divisors_above(std::int64_t n, std::int64_t above) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d) large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  std::vector<std::int64_t> out;
  for (std::int64_t d : small)
    if (d > above) out.push_back(d);
  return out;
}

// The candidates of each lever, in the order the report lists them; within a lever, from the
// smallest change to the largest.
std::vector<std::vector<Change>> levers(const Plan& p) {
  const Options& o = p.options;
  std::vector<Change> zero, tp, pp;
  if (p.grad_group > 1)
    for (int s = o.zero_stage + 1; s <= 3; ++s)
      zero.push_back({[s](Options& c) { c.zero_stage = s; }, fmt::format("--zero {}", s)});
  for (std::int64_t t : divisors_above(o.gpus_per_node, o.tp))
    if (o.gpus % (t * o.cp * o.pp) == 0)
      tp.push_back({[t](Options& c) { c.tp = t; }, fmt::format("--tp {}", t)});
  for (std::int64_t q : divisors_above(o.gpus / (o.tp * o.cp), o.pp))
    pp.push_back({[q](Options& c) { c.pp = q; }, fmt::format("--pp {}", q)});
  std::vector<std::vector<Change>> out = {zero, tp, pp};
  if (!o.shape) return out;
  std::vector<Change> recompute;
  for (Recompute r : {Recompute::selective, Recompute::full})
    if (static_cast<int>(r) > static_cast<int>(o.shape->recompute))
      recompute.push_back({[r](Options& c) { c.shape->recompute = r; },
                           fmt::format("--recompute {}", to_string(r))});
  out.push_back(recompute);
  if (o.tp > 1 && !o.shape->sequence_parallel)
    out.push_back({{[](Options& c) { c.shape->sequence_parallel = true; }, "--sequence-parallel"}});
  return out;
}

// One GPU's memory with changed options; nothing when the options refuse the change.
std::optional<Row<layout::GpuMemory>> evaluate(const Options& changed) {
  try {
    validate(changed);
  } catch (const UsageError&) {
    return std::nullopt;
  }
  return compute_row([&] { return memory_per_gpu(changed); });
}

// The suggestions found so far, each beside the change behind it.
struct Suggestions {
  const Options& options;
  double now;  // one GPU's bytes without any change
  std::vector<Advice> advice;
  std::vector<Change> chosen;

  void add(const Advice& a, const Change& change) {
    advice.push_back(a);
    chosen.push_back(change);
  }

  // The best change of one lever, if any is better than now. A pending one cannot be judged
  // yet: it is shown, with what it waits for, in place of the lever's others.
  void lever(const std::vector<Change>& candidates) {
    std::optional<std::pair<Advice, Change>> best;
    for (const Change& change : candidates) {
      Options changed = options;
      change.apply(changed);
      const auto memory = evaluate(changed);
      if (!memory) continue;
      Advice a;
      a.change = change.flag;
      a.memory = *memory;
      if (a.memory.is_pending()) return add(a, change);
      if (a.memory->total_bytes() >= now) continue;
      a.fits = fits_capacity(*a.memory, changed);
      if (a.fits || !best || a.memory->total_bytes() < best->first.memory->total_bytes())
        best = {a, change};
      if (a.fits) break;
    }
    if (!best) return;
    if (!best->first.fits) {  // from how many GPUs on it would fit
      Options changed = options;
      best->second.apply(changed);
      best->first.fits_from = compute_row([&] { return min_gpus_that_fit(changed, true); });
    }
    add(best->first, best->second);
  }

  // When no single change fits: the changes together, each kept only when the options still
  // make sense with it and it lowers the memory further, evaluated like the others.
  void together() {
    const bool any_fits_or_pending = std::any_of(advice.begin(), advice.end(), [](const Advice& a) {
      return a.fits || a.memory.is_pending();
    });
    if (advice.size() <= 1 || any_fits_or_pending) return;
    Options all = options;
    double lowest = now;
    Advice combined;
    int used = 0;
    for (const Change& change : chosen) {
      Options next = all;
      change.apply(next);
      const auto memory = evaluate(next);
      if (!memory || !memory->has_value() || (*memory)->total_bytes() >= lowest) continue;
      all = next;
      lowest = (*memory)->total_bytes();
      combined.change += (used++ ? " " : "") + change.flag;
      combined.memory = *memory;
      combined.fits = fits_capacity(**memory, all);
    }
    if (used <= 1) return;
    if (!combined.fits)
      combined.fits_from = compute_row([&] { return min_gpus_that_fit(all, true); });
    advice.push_back(combined);
  }
};

}  // namespace

std::vector<Advice> evaluate_advice(const Plan& p) {
  Suggestions s{p.options, p.memory->total_bytes(), {}, {}};
  for (const std::vector<Change>& candidates : levers(p)) s.lever(candidates);
  s.together();
  return s.advice;
}

}  // namespace mgpu::planner::detail
