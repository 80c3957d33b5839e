// `mgpu plan --json FILE`: the report's numbers in SI units (bytes, seconds, fractions) for
// scripts and notebooks. Keys are stable; absent quantities are null rather than missing.
#include "plan/categories.hpp"
#include "plan/render.hpp"

namespace mgpu::planner {

namespace {

nlohmann::ordered_json memory_json(const MemoryBytes& m) {
  nlohmann::ordered_json j;
  for (const auto& c : kMemoryCategories) j[c.key] = m.*c.bytes;
  j["total"] = m.total();
  return j;
}

template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json inputs_json(const Options& o, std::int64_t dp) {
  nlohmann::ordered_json j{{"params", o.params},
                           {"gpus", o.gpus},
                           {"gpu_memory_bytes", o.gpu_memory_bytes},
                           {"precision", o.precision},
                           {"zero_stage", o.zero_stage},
                           {"tp", o.tp},
                           {"pp", o.pp},
                           {"dp", dp},
                           {"micro_batches", o.micro_batches},
                           {"gpus_per_node", o.gpus_per_node},
                           {"tokens", or_null(o.tokens)},
                           {"gpu_flops", or_null(o.gpu_flops)},
                           {"mfu", o.mfu}};
  if (o.shape) {
    const ModelShape& s = *o.shape;
    j["shape"] = {{"layers", s.layers},
                  {"hidden", s.hidden},
                  {"heads", s.heads},
                  {"seq", s.seq},
                  {"micro_batch", s.micro_batch},
                  {"recompute", to_string(s.recompute)},
                  {"sequence_parallel", s.sequence_parallel}};
  } else {
    j["shape"] = nullptr;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json to_json(const Plan& p) {
  nlohmann::ordered_json j;
  j["inputs"] = inputs_json(p.options, p.dp);
  j["params_per_gpu"] = p.params_per_gpu;
  j["capacity_bytes"] = p.options.gpu_memory_bytes;
  j["memory_bytes"] = memory_json(p.memory);
  j["fits"] = p.fits;
  j["min_gpus"] = or_null(p.min_gpus);
  j["memory_bytes_at_min_gpus"] =
      p.min_gpus ? memory_json(p.memory_at_min) : nlohmann::ordered_json(nullptr);
  j["min_gpus_partial_node"] = or_null(p.min_gpus_any);
  j["memory_bytes_at_min_gpus_partial_node"] =
      p.min_gpus_any ? memory_json(p.memory_at_min_any) : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json traffic = nlohmann::ordered_json::object();
  nlohmann::ordered_json traffic_list = nlohmann::ordered_json::array();
  for (const auto& t : p.traffic) {
    traffic[t.kind] = t.bytes;
    traffic_list.push_back(
        {{"kind", t.kind}, {"label", t.label}, {"group", t.group}, {"bytes", t.bytes}});
  }
  traffic["total"] = p.traffic_total();
  j["traffic_bytes_per_step"] = traffic;
  j["traffic"] = traffic_list;
  j["bubble_fraction"] = p.bubble;
  j["flops"] = or_null(p.flops);
  j["seconds"] = or_null(p.seconds);
  j["seconds_ideal"] = or_null(p.seconds_ideal);
  j["recompute_extra_fraction"] = p.recompute_extra_fraction;
  nlohmann::ordered_json factors = nlohmann::ordered_json::array();
  for (const auto& f : p.factors)
    factors.push_back(
        {{"name", f.name}, {"value", f.value}, {"formula", f.formula}, {"source", f.source}});
  j["factors"] = factors;
  return j;
}

}  // namespace mgpu::planner
