// The Doxygen input filter for the course's Markdown: READMEs are written for GitHub (math as
// $...$ and $$...$$, links between READMEs by relative path), and Doxygen 1.9.4 understands
// neither, so every *.md passes through github_to_doxygen before Doxygen reads it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace mgpu::docs {

/// Where the file being filtered sits in the site.
struct FilterOptions {
  /// The file, relative to the repository root, with '/' separators ("README.md",
  /// "chapters/11_5_pipeline/README.md"): its page name prefixes its heading labels, and
  /// relative links are resolved against its folder.
  std::string page = "README.md";
  /// The repository, to tell which linked .md files exist (links to other files are left as
  /// they are). Empty: every relative .md link is taken to exist.
  std::filesystem::path root;
  /// The file Doxygen uses as the main page (USE_MDFILE_AS_MAINPAGE), relative to the root;
  /// links to it go to the page "index".
  std::string mainpage = "README.md";
  /// Folder of the figures `./mgpu docs` generated. A figure line names a file there; a figure
  /// whose file is absent (or with no folder given) becomes a blank line.
  std::filesystem::path figures;
};

/// Doxygen's page name for a Markdown file at `rel` (relative to the repository root):
/// "index" for the main page, otherwise "md_" followed by the path without its extension, with
/// '/' turned into '_' (md_chapters_11_5_pipeline_README), as Doxygen 1.9.4 names it when
/// STRIP_FROM_PATH is the root.
std::string page_id(std::string_view rel, std::string_view mainpage);

/// GitHub's anchor for a heading's text: lower case, punctuation other than '-' and '_'
/// dropped, spaces turned into '-'. Bytes of multi-byte UTF-8 characters are kept.
std::string github_slug(std::string_view heading);

/// GitHub-flavoured Markdown in, Doxygen Markdown out, line for line (Doxygen's warnings keep
/// their line numbers):
/// - inline math $...$ (and $`...`$) becomes \f$...\f$; display math $$...$$ and ```math fences
///   become \f[...\f]. A '$' opens inline math only when a non-space follows it and a matching
///   '$' follows a non-space and no digit follows that; otherwise it is text (so "$5 and $6"
///   stays text). Display math ends at the next "$$" of the same paragraph.
/// - headings of level 2 and deeper get a label, the page's name, '_' and GitHub's anchor
///   (numbered -1, -2 on repeats as GitHub does), and links to a README (relative path, with or
///   without #anchor, or #anchor alone) become @ref links to that page or heading.
/// - a line `<!-- figure: FILE caption -->` (invisible on GitHub) becomes
///   `\image html FILE "caption"` when FILE is among the generated figures.
/// - an escaped bar in a code span (GitHub's way to put '|' in a table cell) closes the span
///   around it: `1\|2` becomes `1`\|`2`, since Doxygen would show the backslash.
/// Fenced and indented-by-fence code blocks, inline code spans, HTML comments and backslash
/// escapes otherwise pass through untouched, so `$HOME` in code stays as it is.
std::string github_to_doxygen(std::string_view markdown, const FilterOptions& options);

}  // namespace mgpu::docs
