// `mgpu plan --json FILE`: the report's numbers in SI units (bytes, seconds, fractions) for
// scripts and notebooks. Keys are stable; absent quantities are null rather than missing, and
// `pending` says which of the nulls wait for a chapter function not written yet.
#include <fmt/format.h>
#include <tuple>
#include <utility>

#include "plan/categories.hpp"
#include "plan/render.hpp"

namespace mgpu::planner {

namespace {

nlohmann::ordered_json memory_json(const layout::GpuMemory& m) {
  nlohmann::ordered_json j;
  for (const auto& c : kMemoryCategories) j[c.key] = m.*c.bytes;
  j["total"] = m.total_bytes();
  return j;
}

template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

template <class T>
nlohmann::ordered_json or_null(const Row<T>& v) {
  return v.has_value() ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

// The count and the memory at it of a fewest-GPUs search, as two nullable fields.
std::pair<nlohmann::ordered_json, nlohmann::ordered_json> fewest_json(const Row<FewestGpus>& f) {
  if (!f.has_value() || !f->gpus) return {nullptr, nullptr};
  return {*f->gpus, memory_json(f->memory)};
}

nlohmann::ordered_json inputs_json(const Options& o, std::int64_t dp) {
  nlohmann::ordered_json j{{"params", o.params},
                           {"gpus", o.gpus},
                           {"gpu_memory_bytes", o.gpu_memory_bytes},
                           {"precision", o.precision},
                           {"zero_stage", o.zero_stage},
                           {"tp", o.tp},
                           {"pp", o.pp},
                           {"cp", o.cp},
                           {"dp", dp},
                           {"micro_batches", o.micro_batches},
                           {"interleave", o.interleave},
                           {"gpus_per_node", o.gpus_per_node},
                           {"tokens", or_null(o.tokens)},
                           {"gpu_flops", or_null(o.gpu_flops)},
                           {"mfu", o.mfu}};
  if (o.shape) {
    const ModelShape& s = *o.shape;
    j["shape"] = {{"layers", s.transformer.layers},
                  {"hidden", s.transformer.hidden},
                  {"heads", s.transformer.heads},
                  {"seq", s.transformer.seq},
                  {"micro_batch", s.transformer.micro_batch},
                  {"recompute", to_string(s.recompute)},
                  {"sequence_parallel", s.sequence_parallel},
                  {"kv_heads", s.kv()},
                  {"ffn", s.ffn_size()},
                  {"swiglu", s.swiglu},
                  {"flash_attention", s.flash_attention},
                  {"first_stage_layers", s.first_stage_layers},
                  {"last_stage_layers", s.last_stage_layers},
                  {"vocab", s.vocab}};
  } else {
    j["shape"] = nullptr;
  }
  return j;
}

using Json = nlohmann::ordered_json;

// Records under "pending" the chapter function a key waits for, if any.
void note(Json& pending, const std::string& key, const std::string& function) {
  if (!function.empty()) pending[key] = function;
}

// The layout's place: its inputs, groups and the capacity it is judged against.
void add_inputs(Json& j, const Plan& p) {
  j["inputs"] = inputs_json(p.options, p.dp);
  j["gradient_group"] = p.grad_group;
  j["cp_placement"] = p.options.cp == 1             ? Json(nullptr)
                      : cp_within_server(p.options) ? Json("within_server")
                                                    : Json("across_servers");
  j["params_per_gpu"] = p.params_per_gpu;
  j["stage_layers"] = p.stage_layers;
  j["stage_params_per_gpu"] = p.stage_params;
  j["capacity_bytes"] = p.options.gpu_memory_bytes;
  j["fit_rule"] = fmt::format(
      "memory of the busiest GPU <= capacity_bytes, no headroom kept back; GPU counts above one "
      "node in whole {}-GPU nodes",
      p.options.gpus_per_node);
}

Json advice_json(const std::vector<Advice>& all) {
  Json advice = Json::array();
  for (const auto& a : all)
    advice.push_back({{"change", a.change},
                      {"memory_bytes", a.memory.has_value() ? memory_json(*a.memory) : nullptr},
                      {"fits", a.memory.has_value() ? Json(a.fits) : nullptr},
                      {"fits_from_gpus",
                       a.fits_from.has_value() && *a.fits_from ? Json(**a.fits_from) : nullptr},
                      {"pending", a.memory.is_pending() ? Json(a.memory.missing()) : nullptr}});
  return advice;
}

// The verdict: one GPU's memory, whether it fits, the fewest GPUs that fit, the suggestions.
void add_memory(Json& j, Json& pending, const Plan& p) {
  j["memory_bytes"] = p.memory.has_value() ? memory_json(*p.memory) : nullptr;
  note(pending, "memory_bytes", p.memory.missing());
  j["fits"] = or_null(p.fits);
  note(pending, "fits", p.fits.missing());
  j["memory_stage"] = p.memory_stage;
  std::tie(j["min_gpus"], j["memory_bytes_at_min_gpus"]) = fewest_json(p.min_gpus);
  note(pending, "min_gpus", p.min_gpus.missing());
  std::tie(j["min_gpus_partial_node"], j["memory_bytes_at_min_gpus_partial_node"]) =
      fewest_json(p.min_gpus_any);
  note(pending, "min_gpus_partial_node", p.min_gpus_any.missing());
  j["advice"] = advice_json(p.advice);
}

// Bytes per step by kind, as a map with their total and as a list with labels and groups.
void add_traffic(Json& j, Json& pending, const Plan& p) {
  Json traffic = Json::object();
  Json traffic_list = Json::array();
  for (const auto& t : p.traffic) {
    traffic[t.kind] = or_null(t.bytes);
    traffic_list.push_back(
        {{"kind", t.kind}, {"label", t.label}, {"group", t.group}, {"bytes", or_null(t.bytes)}});
    note(pending, "traffic_bytes_per_step." + t.kind, t.bytes.missing());
  }
  traffic["total"] = or_null(p.traffic_total());
  j["traffic_bytes_per_step"] = traffic;
  j["traffic"] = traffic_list;
}

// The bubble, and with --tokens the FLOPs and the training time.
void add_time(Json& j, Json& pending, const Plan& p) {
  j["bubble_fraction"] = or_null(p.bubble);
  note(pending, "bubble_fraction", p.bubble.missing());
  j["flops"] = or_null(p.flops);
  note(pending, "flops", p.flops.missing());
  j["seconds"] = or_null(p.seconds);
  note(pending, "seconds", p.seconds.missing());
  j["seconds_ideal"] = or_null(p.seconds_ideal);
  note(pending, "seconds_ideal", p.seconds_ideal.missing());
  j["recompute_extra_fraction"] = p.recompute_extra_fraction;
}

Json factors_json(const std::vector<Factor>& all) {
  Json factors = Json::array();
  for (const auto& f : all) {
    factors.push_back({{"name", f.name},
                       {"value", or_null(f.value)},
                       {"formula", f.formula},
                       {"source", f.source}});
    if (f.value.is_pending()) factors.back()["pending"] = f.value.missing();
  }
  return factors;
}

}  // namespace

// The sections are written in this order, which the file keeps from run to run; "pending" gathers,
// in the same order, the chapter function each null value waits for.
nlohmann::ordered_json to_json(const Plan& p) {
  Json j;
  Json pending = Json::object();
  add_inputs(j, p);
  add_memory(j, pending, p);
  add_traffic(j, pending, p);
  add_time(j, pending, p);
  j["factors"] = factors_json(p.factors);
  j["notes"] = p.notes;
  j["pending"] = pending;
  return j;
}

}  // namespace mgpu::planner
