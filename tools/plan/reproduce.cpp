// Reading the anchors file, pricing each row, and the table of published against predicted.
#include "plan/reproduce.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "plan/hardware.hpp"

namespace mgpu::planner {

namespace {

std::int64_t count(const nlohmann::json& j, const char* key, std::int64_t fallback) {
  if (!j.contains(key)) return fallback;
  return j.at(key).get<std::int64_t>();
}

Anchor parse_anchor(const nlohmann::json& r) {
  Anchor a;
  a.name = r.at("name").get<std::string>();
  a.group = r.at("group").get<std::string>();
  a.source = r.at("source").get<std::string>();
  a.hardware = r.at("hardware").get<std::string>();
  a.measure = r.at("measure").get<std::string>();
  a.published = r.at("published").get<double>();
  if (a.source.empty()) throw std::invalid_argument("every anchor needs a source");
  const nlohmann::json& m = r.at("model");
  a.model.layers = count(m, "layers", 0);
  a.model.hidden = count(m, "hidden", 0);
  a.model.heads = count(m, "heads", 0);
  a.model.kv_heads = count(m, "kv_heads", 0);
  a.model.ffn = count(m, "ffn", 0);
  a.model.swiglu = m.value("swiglu", false);
  a.model.seq = count(m, "seq", 0);
  a.model.vocab = count(m, "vocab", 0);
  a.model.global_batch = count(m, "global_batch", 0);
  const nlohmann::json& l = r.at("layout");
  a.layout.tp = count(l, "tp", 1);
  a.layout.pp = count(l, "pp", 1);
  a.layout.dp = count(l, "dp", 1);
  a.layout.micro_batch = count(l, "micro_batch", 1);
  a.layout.interleave = count(l, "interleave", 1);
  a.layout.first_stage_layers = count(l, "first_stage_layers", 0);
  a.layout.last_stage_layers = count(l, "last_stage_layers", 0);
  a.layout.recompute = parse_recompute(l.value("recompute", "none"));
  a.layout.sequence_parallel = l.value("sequence_parallel", false);
  a.layout.flash_attention = l.value("flash_attention", false);
  a.layout.zero_stage = static_cast<int>(count(l, "zero_stage", 0));
  a.layout.dp_overlap = l.value("dp_overlap", false);
  a.layout.grad_bytes = l.value("grad_bytes", 2.0);
  static const char* const kMeasures[] = {"tflops_per_gpu", "step_seconds", "layer_forward_ms",
                                          "layer_backward_ms", "mfu_percent"};
  bool known = false;
  for (const char* k : kMeasures) known = known || a.measure == k;
  if (!known) throw std::invalid_argument("unknown measure '" + a.measure + "'");
  return a;
}

double measured(const std::string& measure, const StepTime& st) {
  if (measure == "tflops_per_gpu") return st.paper_tflops_per_gpu;
  if (measure == "step_seconds") return st.seconds;
  if (measure == "layer_forward_ms") return st.layer_forward * 1e3;
  if (measure == "mfu_percent") return 100 * st.mfu;
  return st.layer_backward * 1e3;
}

const char* unit(const std::string& measure) {
  if (measure == "tflops_per_gpu") return "TFLOP/s";
  if (measure == "step_seconds") return "s";
  if (measure == "mfu_percent") return "%";
  return "ms";
}

}  // namespace

std::string default_anchors_path() { return plan_data_dir() + "/anchors.json"; }

std::vector<Anchor> load_anchors(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("anchors file " + path + " cannot be read");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Anchor> out;
  for (const auto& r : j.at("rows")) {
    try {
      out.push_back(parse_anchor(r));
    } catch (const std::exception& e) {
      throw std::invalid_argument(
          fmt::format("anchors file {}: row {}: {}", path, r.value("name", "?"), e.what()));
    }
  }
  return out;
}

std::vector<AnchorResult> reproduce(const std::vector<Anchor>& anchors) {
  std::map<std::string, Hardware> presets;
  std::vector<AnchorResult> out;
  for (const Anchor& a : anchors) {
    if (!presets.count(a.hardware)) presets.emplace(a.hardware, load_hardware(a.hardware));
    AnchorResult r;
    r.anchor = a;
    r.step = step_time(a.model, a.layout, presets.at(a.hardware));
    r.predicted = measured(a.measure, r.step);
    r.error = r.predicted / a.published - 1;
    out.push_back(r);
  }
  return out;
}

std::string render_reproduce(const std::vector<AnchorResult>& results) {
  std::string out = fmt::format("{:<30} {:<12} {:>11} {:>11} {:>7}\n", "run", "hardware",
                                "published", "predicted", "error");
  std::map<std::string, std::pair<int, std::pair<int, int>>> groups;  // rows, within 15%, 20%
  std::vector<std::string> order;
  for (const auto& r : results) {
    const Anchor& a = r.anchor;
    out +=
        fmt::format("{:<30} {:<12} {:>8.2f} {:<2} {:>8.2f} {:<2} {:>+6.1f}%\n", a.name, a.hardware,
                    a.published, unit(a.measure), r.predicted, unit(a.measure), 100 * r.error);
    if (!groups.count(a.group)) order.push_back(a.group);
    auto& g = groups[a.group];
    ++g.first;
    g.second.first += std::abs(r.error) <= 0.15 ? 1 : 0;
    g.second.second += std::abs(r.error) <= 0.20 ? 1 : 0;
  }
  out += "\n";
  for (const auto& name : order) {
    const auto& g = groups[name];
    out += fmt::format("{}: {} of {} rows within 15%, {} within 20%\n", name, g.second.first,
                       g.first, g.second.second);
  }
  out += fmt::format(
      "\nWhere the time goes (seconds per step):\n{:<30} {:>8} {:>8} {:>8} {:>8} "
      "{:>8} {:>8} {:>8} {:>6} {:>6}\n",
      "run", "compute", "tp", "bubble", "p2p", "dp", "optim", "step", "MFU", "HFU");
  for (const auto& r : results) {
    if (r.anchor.measure == "layer_backward_ms") continue;  // the same step as the forward row
    const StepTime& s = r.step;
    out += fmt::format(
        "{:<30} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>5.1f}% "
        "{:>5.1f}%\n",
        r.anchor.name, s.compute, s.exposed_tp, s.bubble, s.p2p, s.exposed_dp, s.optimizer,
        s.seconds, 100 * s.mfu, 100 * s.hfu);
  }
  out += "\nSources of the published numbers:\n";
  std::vector<std::string> seen;
  for (const auto& r : results)
    if (std::find(seen.begin(), seen.end(), r.anchor.source) == seen.end()) {
      seen.push_back(r.anchor.source);
      out += "  " + r.anchor.source + "\n";
    }
  return out;
}

int run_reproduce_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() > 2) {
    err << "mgpu plan --reproduce [FILE]: takes at most one anchors file\n";
    return 2;
  }
  const std::string path = args.size() == 2 ? args[1] : default_anchors_path();
  try {
    out << render_reproduce(reproduce(load_anchors(path)));
    return 0;
  } catch (const std::exception& e) {
    err << "mgpu plan --reproduce: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mgpu::planner
