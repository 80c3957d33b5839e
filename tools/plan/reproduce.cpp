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
  a.model.params = m.value("params", 0.0);
  const nlohmann::json& l = r.at("layout");
  a.layout.tp = count(l, "tp", 1);
  a.layout.pp = count(l, "pp", 1);
  a.layout.dp = count(l, "dp", 1);
  a.layout.cp = count(l, "cp", 1);
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
  static const char* const kMeasures[] = {"tflops_per_gpu",   "step_seconds",
                                          "layer_forward_ms", "layer_backward_ms",
                                          "mfu_percent",      "tokens_per_gpu_per_s"};
  bool known = false;
  for (const char* k : kMeasures) known = known || a.measure == k;
  if (!known) throw std::invalid_argument("unknown measure '" + a.measure + "'");
  return a;
}

double measured(const Anchor& a, const StepTime& st) {
  const std::string& measure = a.measure;
  if (measure == "tokens_per_gpu_per_s") {
    const RunLayout& l = a.layout;
    const double gpus = static_cast<double>(l.tp * l.cp * l.pp * l.dp);
    return static_cast<double>(a.model.global_batch * a.model.seq) / (st.seconds * gpus);
  }
  if (measure == "tflops_per_gpu") return st.paper_tflops_per_gpu;
  if (measure == "step_seconds") return st.seconds;
  if (measure == "layer_forward_ms") return st.layer_forward * 1e3;
  if (measure == "mfu_percent") return 100 * st.mfu;
  return st.layer_backward * 1e3;
}

// The time, in seconds, that the measure stands for in the model: a step, or one layer's
// forward or backward for one micro-batch.
double model_seconds(const std::string& measure, const StepTime& st) {
  if (measure == "layer_forward_ms") return st.layer_forward;
  if (measure == "layer_backward_ms") return st.layer_backward;
  return st.seconds;
}

// The same time as the paper measured it. A rate (TFLOP/s, MFU, tokens/s) counts the same FLOPs in
// the paper as in the model, so the published time is the modelled one scaled by the rates' ratio.
double published_seconds(const Anchor& a, double predicted, double modelled) {
  if (a.measure == "step_seconds") return a.published;
  if (a.measure == "layer_forward_ms" || a.measure == "layer_backward_ms") return a.published / 1e3;
  return modelled * predicted / a.published;
}

const char* unit(const std::string& measure) {
  if (measure == "tflops_per_gpu") return "TFLOP/s";
  if (measure == "step_seconds") return "s";
  if (measure == "mfu_percent") return "%";
  if (measure == "tokens_per_gpu_per_s") return "tok/s";
  return "ms";
}

}  // namespace

std::string default_anchors_path() { return plan_data_dir() + "/anchors.json"; }

std::vector<Anchor> load_anchors(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("anchors file " + path + " cannot be read");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Anchor> out;
  const std::string fitted = j.value("fitted_group", "");
  for (const auto& r : j.at("rows")) {
    try {
      out.push_back(parse_anchor(r));
      out.back().fitted = out.back().group == fitted;
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
    const Hardware& hw = presets.at(a.hardware);
    AnchorResult r;
    r.anchor = a;
    r.step = step_time(a.model, a.layout, hw);
    r.predicted = measured(a, r.step);
    r.error = r.predicted / a.published - 1;
    Hardware bare = hw;
    bare.compute_overhead = 0;
    const double modelled = model_seconds(a.measure, r.step);
    r.overhead_seconds = modelled - model_seconds(a.measure, step_time(a.model, a.layout, bare));
    r.residual_seconds = published_seconds(a, r.predicted, modelled) - modelled;
    out.push_back(r);
  }
  return out;
}

double fit_compute_overhead(const std::vector<Anchor>& anchors) {
  std::vector<const Anchor*> rows;
  for (const Anchor& a : anchors)
    if (a.fitted) rows.push_back(&a);
  if (rows.empty())
    throw std::invalid_argument(
        "no anchor is in the file's \"fitted_group\": name the group compute_overhead is fitted "
        "on");
  for (const Anchor* a : rows)
    if (a->hardware != rows.front()->hardware)
      throw std::invalid_argument(fmt::format(
          "the fitted rows span presets {} and {}: one constant is fitted on one GPU's runs",
          rows.front()->hardware, a->hardware));
  Hardware hw = load_hardware(rows.front()->hardware);
  // Mean log of model time over published time: increasing in the overhead.
  const auto slowness = [&](double overhead) {
    hw.compute_overhead = overhead;
    double sum = 0;
    for (const Anchor* a : rows) {
      const StepTime st = step_time(a->model, a->layout, hw);
      const double modelled = model_seconds(a->measure, st);
      sum += std::log(modelled / published_seconds(*a, measured(*a, st), modelled));
    }
    return sum / static_cast<double>(rows.size());
  };
  double lo = 0, hi = 1;
  if (slowness(lo) > 0 || slowness(hi) < 0)
    throw std::invalid_argument(fmt::format(
        "no compute_overhead in [0, 1] fits the {} rows on {}: the model is {} than the runs at "
        "either end; check the preset's GEMM curve and rates",
        rows.front()->group, hw.name, slowness(lo) > 0 ? "slower" : "faster"));
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (slowness(mid) > 0 ? hi : lo) = mid;
  }
  return (lo + hi) / 2;
}

std::string render_reproduce(const std::vector<AnchorResult>& results) {
  // The unmodelled time in the measure's time unit: ms for one layer, s for a step.
  const auto time_unit = [](const std::string& measure) {
    return measure.rfind("layer_", 0) == 0 ? std::pair{1e3, "ms"} : std::pair{1.0, "s"};
  };
  std::string out =
      fmt::format("{:<30} {:<12} {:<8} {:>11} {:>11} {:>7} {:>11} {:>11}\n", "run", "hardware",
                  "role", "published", "predicted", "error", "overhead", "residual");
  struct Group {
    int rows = 0, within15 = 0, within20 = 0;
    bool fitted = false;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (const auto& r : results) {
    const Anchor& a = r.anchor;
    const auto [scale, tu] = time_unit(a.measure);
    out += fmt::format(
        "{:<30} {:<12} {:<8} {:>8.2f} {:<2} {:>8.2f} {:<2} {:>+6.1f}% {:>8.3f} {:<2} {:>+8.3f} "
        "{}\n",
        a.name, a.hardware, a.fitted ? "fitted" : "held out", a.published, unit(a.measure),
        r.predicted, unit(a.measure), 100 * r.error, scale * r.overhead_seconds, tu,
        scale * r.residual_seconds, tu);
    if (!groups.count(a.group)) order.push_back(a.group);
    Group& g = groups[a.group];
    ++g.rows;
    g.fitted = a.fitted;
    g.within15 += std::abs(r.error) <= 0.15 ? 1 : 0;
    g.within20 += std::abs(r.error) <= 0.20 ? 1 : 0;
  }
  out +=
      "\noverhead: what the hardware file's fitted compute_overhead adds to the modelled kernels; "
      "residual: the\npublished time less the predicted one (positive: the run was slower than "
      "the model), time not\nattributed to any component. Together they are the unmodelled "
      "time.\n\n";
  for (const auto& name : order) {
    const Group& g = groups[name];
    out += fmt::format("{} ({}): {} of {} rows within 15%, {} within 20%\n", name,
                       g.fitted ? "fitted" : "held out", g.within15, g.rows, g.within20);
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
    const std::vector<Anchor> anchors = load_anchors(path);
    out << render_reproduce(reproduce(anchors));
    // The one fitted constant, refitted here beside the value the presets carry, so a hand-tuned
    // preset shows.
    bool any_fitted = false;
    for (const Anchor& a : anchors) any_fitted = any_fitted || a.fitted;
    if (any_fitted) {
      std::string preset;
      for (const Anchor& a : anchors)
        if (a.fitted) preset = a.hardware;
      out << fmt::format(
          "\ncompute_overhead: {:.3f} refitted on the fitted rows; the {} preset carries {:.3f}\n",
          fit_compute_overhead(anchors), preset, load_hardware(preset).compute_overhead);
    }
    return 0;
  } catch (const std::exception& e) {
    err << "mgpu plan --reproduce: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mgpu::planner
