// Tests of the README filter: what becomes Doxygen math, labels and @ref links, and what must
// pass through unchanged (code, shell variables, HTML comments, prices), line for line.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "md_filter.hpp"

using mgpu::docs::FilterOptions;
using mgpu::docs::github_slug;
using mgpu::docs::github_to_doxygen;
using mgpu::docs::page_id;

namespace {

std::string convert(const std::string& md,
                    const std::string& page = "chapters/11_5_pipeline/README.md") {
  FilterOptions o;
  o.page = page;
  return github_to_doxygen(md, o);
}

}  // namespace

TEST_CASE("inline and display math become Doxygen formulas") {
  CHECK(convert("bubble $(p-1)/(m+p-1)$ of the step\n") ==
        "bubble \\f$(p-1)/(m+p-1)\\f$ of the step\n");
  CHECK(convert("$$\\frac{2(N-1)}{N}$$\n") == "\\f[\\frac{2(N-1)}{N}\\f]\n");
  CHECK(convert("a\n$$\nx = \\sqrt{L}\n$$\nb\n") == "a\n\\f[\nx = \\sqrt{L}\n\\f]\nb\n");
  CHECK(convert("```math\n16\\Psi/N\n```\n") == "\\f[\n16\\Psi/N\n\\f]\n");
  CHECK(convert("GitHub's $`a_{i} | b`$ form\n") == "GitHub's \\f$a_{i} | b\\f$ form\n");
  CHECK(convert("a formula $x$, then $y$.\n") == "a formula \\f$x\\f$, then \\f$y\\f$.\n");
}

TEST_CASE("a formula may wrap onto the next line of its paragraph, not past it") {
  CHECK(convert("the ratio $2(N-1)\n/N$ here\n") == "the ratio \\f$2(N-1)\n/N\\f$ here\n");
  CHECK(convert("$a\n\nb$\n") == "$a\n\nb$\n");
}

TEST_CASE("dollars that are not math stay text") {
  CHECK(convert("it costs $5 to $6 a GPU-hour\n") == "it costs $5 to $6 a GPU-hour\n");
  CHECK(convert("an open $ sign and $ another\n") == "an open $ sign and $ another\n");
  CHECK(convert("escaped \\$x\\$ stays\n") == "escaped \\$x\\$ stays\n");
  CHECK(convert("a lone $$ stays\n") == "a lone $$ stays\n");
}

TEST_CASE("code keeps its dollars: fences, spans, spans over two lines, indented blocks") {
  const std::string fenced = "```sh\necho $HOME $PATH\n```\n~~~\n$x$\n~~~\n";
  CHECK(convert(fenced) == fenced);
  CHECK(convert("run `echo $HOME and $PATH` now\n") == "run `echo $HOME and $PATH` now\n");
  CHECK(convert("run ``a ` $x$ `` now $y$\n") == "run ``a ` $x$ `` now \\f$y\\f$\n");
  CHECK(convert("see `./mgpu hint\n$A$ b` too\n") == "see `./mgpu hint\n$A$ b` too\n");
  const std::string indented = "text\n\n    MGPU_RANK=$SLURM_PROCID X=$Y\n";
  CHECK(convert(indented) == indented);
  const std::string listed = "1. step:\n   ```sh\n   grade-$ID.csv --shard $ID/8\n   ```\n";
  CHECK(convert(listed) == listed);
}

TEST_CASE("an escaped bar in a code span closes the span around it, so no backslash shows") {
  CHECK(convert("| `--level 1\\|2\\|3` | hints |\n") == "| `--level 1`\\|`2`\\|`3` | hints |\n");
  CHECK(convert("| ``a\\|b`` | c |\n") == "| ``a``\\|``b`` | c |\n");
  CHECK(convert("a plain `x|y` and \\| stay\n") == "a plain `x|y` and \\| stay\n");
}

TEST_CASE("HTML comments pass through whole, whatever they hold") {
  const std::string block = "<!-- student-only\n```sh\n$x$ and `y`\n```\n-->\nafter $z$\n";
  CHECK(convert(block) == "<!-- student-only\n```sh\n$x$ and `y`\n```\n-->\nafter \\f$z\\f$\n");
  CHECK(convert("<!-- instructor-only -->\n$a$\n<!-- /instructor-only -->\n") ==
        "<!-- instructor-only -->\n\\f$a\\f$\n<!-- /instructor-only -->\n");
  CHECK(convert("text <!-- $a$ --> $b$\n") == "text <!-- $a$ --> \\f$b\\f$\n");
}

TEST_CASE("the output has as many lines as the input") {
  const std::string md =
      "# T\n\n## A $x$\ntext $$\ny\n$$\n```\nz\n```\n<!-- figure: f.svg cap -->\n";
  std::string out = convert(md);
  CHECK(std::count(out.begin(), out.end(), '\n') == std::count(md.begin(), md.end(), '\n'));
}

TEST_CASE("headings get the page's name and GitHub's anchor as a label") {
  CHECK(github_slug("`./mgpu pipeline`: the pipeline-bubble figure") ==
        "mgpu-pipeline-the-pipeline-bubble-figure");
  CHECK(github_slug("11.5 Pipeline parallelism (GPipe, 1F1B)") ==
        "115-pipeline-parallelism-gpipe-1f1b");
  CHECK(convert("# Title\n## Flags\n### Flags\n") ==
        "# Title\n## Flags {#md_chapters_11_5_pipeline_README_flags}\n"
        "### Flags {#md_chapters_11_5_pipeline_README_flags-1}\n");
  CHECK(convert("## Kept {#mine}\n") == "## Kept {#mine}\n");
  CHECK(
      convert("# autograder: `mgpu-grade`\n## The `rubric`\n") ==
      "# autograder: mgpu-grade\n## The `rubric` {#md_chapters_11_5_pipeline_README_the-rubric}\n");
  CHECK(convert("## Hints\n", "README.md") == "## Hints {#index_hints}\n");
}

TEST_CASE("links to READMEs become @ref links to their pages and headings") {
  CHECK(page_id("chapters/11_5_pipeline/README.md", "README.md") ==
        "md_chapters_11_5_pipeline_README");
  CHECK(page_id("README.md", "README.md") == "index");
  CHECK(convert("see [tools](tools/README.md#mgpu-pipeline-x).\n", "README.md") ==
        "see [tools](@ref md_tools_README_mgpu-pipeline-x).\n");
  CHECK(convert("[11.2](../11_2_data_parallel/README.md) and [top](../../README.md)\n") ==
        "[11.2](@ref md_chapters_11_2_data_parallel_README) and [top](@ref index)\n");
  CHECK(convert("[below](#hints)\n", "autograder/README.md") ==
        "[below](@ref md_autograder_README_hints)\n");
  const std::string others =
      "[web](https://example.org/a.md) ![fig](pic.svg) [code](model.hpp) `[x](y.md)`\n";
  CHECK(convert(others) == others);
}

TEST_CASE("links to .md files that are not in the repository are left alone") {
  FilterOptions o;
  o.page = "README.md";
  o.root = "/nonexistent-mgpu-root";
  CHECK(github_to_doxygen("[a](gone.md)\n", o) == "[a](gone.md)\n");
}

TEST_CASE("a figure comment shows the figure when it was generated, else nothing") {
  FilterOptions o;
  o.page = "chapters/11_5_pipeline/README.md";
  const std::string line = "<!-- figure: made.svg The \"1F1B\" timeline -->\n";
  CHECK(github_to_doxygen(line, o) == "\n");
  auto dir = std::filesystem::temp_directory_path() / "mgpu_md_filter_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "made.svg") << "<svg/>";
  o.figures = dir;
  CHECK(github_to_doxygen(line, o) == "\\image html made.svg \"The '1F1B' timeline\"\n");
  CHECK(github_to_doxygen("<!-- figure: missing.svg cap -->\n", o) == "\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a <details> answer in a list item stays one paragraph, so Doxygen keeps it folded") {
  CHECK(convert("1. Q?\n\n   <details><summary>Answer</summary>\n\n   It is $3/11$.\n\n   "
                "</details>\n\nafter\n") ==
        "1. Q?\n\n   <details><summary>Answer</summary>\n   <br>\n   It is \\f$3/11\\f$.\n   "
        "<br>\n   </details>\n\nafter\n");
}

TEST_CASE("a <details> at the margin keeps its paragraphs and lists") {
  const std::string md = "<details><summary>Answer</summary>\n\n- one\n- two\n\n</details>\n";
  CHECK(convert(md) == md);
}
