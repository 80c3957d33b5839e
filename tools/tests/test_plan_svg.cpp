// --svg and the text bar: the SVG is well-formed XML with an <svg> root, one rect per non-zero
// category per bar with widths proportional to the bytes, and a capacity line on the same scale;
// the text bar puts its letters and capacity mark at the same proportions.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <vector>

#include "cli_support.hpp"
#include "plan/categories.hpp"
#include "plan/model.hpp"
#include "plan/render.hpp"

using namespace mgpu::planner;

namespace {

using tools_test::Element;
using tools_test::parse_xml;

double number(const Element& e, const char* key) { return std::stod(e.attributes.at(key)); }

Plan stage3_at_8() {
  Options o;
  o.params = 70e9;
  o.gpus = 8;
  o.zero_stage = 3;
  o.shape = ModelShape{{.seq = 2048, .micro_batch = 1, .hidden = 8192, .heads = 64, .layers = 80},
                       Recompute::full,
                       false};
  return make_plan(o);
}

}  // namespace

TEST_CASE(
    "the SVG is well-formed, rooted at <svg>, with a rect per category per bar on one scale") {
  const Plan p = stage3_at_8();
  REQUIRE_FALSE(*p.fits);
  REQUIRE(p.min_gpus->gpus.has_value());
  const std::string svg = render_svg(p);
  std::string root;
  const std::vector<Element> elements = parse_xml(svg, root);
  CHECK(root == "svg");
  CHECK(elements.front().attributes.at("xmlns") == "http://www.w3.org/2000/svg");

  std::vector<Element> segments;
  const Element* capacity = nullptr;
  for (const auto& e : elements) {
    if (e.name == "rect" && e.attributes.count("data-category")) segments.push_back(e);
    if (e.name == "line" && e.attributes.count("data-capacity-bytes")) capacity = &e;
  }
  REQUIRE(capacity != nullptr);
  // Two bars (8 GPUs and the fewest that fit), five non-zero categories each.
  CHECK(segments.size() == 2 * kMemoryCategories.size());

  // Pixels per byte from the capacity line, then every segment must use the same ratio.
  const double left = number(segments.front(), "x");
  const double px_per_byte =
      (number(*capacity, "x1") - left) / number(*capacity, "data-capacity-bytes");
  double worst = 0;
  for (const auto& s : segments)
    worst = std::max(worst, std::abs(number(s, "width") - number(s, "data-bytes") * px_per_byte));
  MESSAGE("largest segment width error: " << worst << " px");
  CHECK(worst < 1e-3);
  // The first bar's segments, summed, are the plan's total.
  double first_bar_bytes = 0;
  for (std::size_t i = 0; i < kMemoryCategories.size(); ++i)
    first_bar_bytes += number(segments[i], "data-bytes");
  CHECK(first_bar_bytes == doctest::Approx(p.memory->total_bytes()));
}

TEST_CASE("the text bar stacks categories in proportion and marks the capacity") {
  mgpu::layout::GpuMemory m;
  m.weights_bytes = 10;
  m.grads_bytes = 10;
  m.master_bytes = 20;
  m.optimizer_bytes = 40;
  m.activation_bytes = 20;  // total 100
  const std::string bar = memory_bar(m, 50, 100, 50);
  MESSAGE("bar: [" << bar << "]");
  CHECK(bar.size() == 51);  // 50 columns and the capacity mark
  CHECK(std::count(bar.begin(), bar.end(), 'W') == 5);
  CHECK(std::count(bar.begin(), bar.end(), 'O') == 20);
  CHECK(bar.find('|') == 25);
  const std::string roomy = memory_bar(m, 200, 200, 40);
  CHECK(std::count(roomy.begin(), roomy.end(), '.') == 20);  // the free half
  CHECK(roomy.back() == '|');
}
