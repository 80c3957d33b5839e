// GitHub Markdown to Doxygen Markdown (md_filter.hpp). Block structure (fences, comments,
// headings, indented code) is decided line by line; math, code spans and links inside each
// paragraph at once, since a code span or a formula may wrap onto the next line.
#include "md_filter.hpp"

#include <cctype>
#include <map>
#include <regex>
#include <vector>

namespace mgpu::docs {
namespace {

namespace fs = std::filesystem;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool is_blank(std::string_view line) {
  for (char c : line)
    if (!is_space(c)) return false;
  return true;
}

std::size_t indent_of(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  return i;
}

// A fence line: its indentation, then three or more backticks or tildes. Any indentation counts,
// so that fences nested in list items are seen too.
struct Fence {
  char ch = 0;
  std::size_t len = 0;
  std::string info;
};

bool open_fence(std::string_view line, Fence& f) {
  std::size_t i = indent_of(line);
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  char ch = line[i];
  std::size_t n = 0;
  while (i + n < line.size() && line[i + n] == ch) ++n;
  if (n < 3) return false;
  std::string info(line.substr(i + n));
  while (!info.empty() && is_space(info.back())) info.pop_back();
  while (!info.empty() && is_space(info.front())) info.erase(info.begin());
  if (ch == '`' && info.find('`') != std::string::npos) return false;  // an inline code span
  f = {ch, n, info};
  return true;
}

bool closes_fence(std::string_view line, const Fence& f) {
  std::size_t i = indent_of(line), n = 0;
  while (i + n < line.size() && line[i + n] == f.ch) ++n;
  return n >= f.len && is_blank(line.substr(i + n));
}

bool is_heading(std::string_view line, std::size_t& level) {
  std::size_t i = indent_of(line);
  if (i > 3) return false;
  std::size_t n = 0;
  while (i + n < line.size() && line[i + n] == '#') ++n;
  if (n == 0 || n > 6) return false;
  if (i + n < line.size() && !is_space(line[i + n])) return false;
  level = n;
  return true;
}

bool starts_comment(std::string_view line) {
  return line.substr(indent_of(line)).starts_with("<!--");
}

// "a/b/../c" -> "a/c", without touching the disk.
std::string normalize(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..")
        parts.pop_back();
      else
        parts.push_back(part);
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = end + 1;
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

class Converter {
 public:
  explicit Converter(const FilterOptions& o) : o_(o), id_(page_id(o.page, o.mainpage)) {
    std::size_t slash = o.page.rfind('/');
    dir_ = slash == std::string::npos ? "" : o.page.substr(0, slash);
  }

  std::string run(std::string_view text) {
    std::vector<std::string_view> lines;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t end = text.find('\n', pos);
      end = end == std::string_view::npos ? text.size() : end + 1;
      lines.push_back(text.substr(pos, end - pos));
      pos = end;
    }
    std::string out;
    bool after_blank = true;  // an indented code block starts only after a blank line
    bool in_details = false;  // inside <details> ... </details>
    for (std::size_t i = 0; i < lines.size();) {
      std::string_view line = lines[i];
      Fence fence;
      std::size_t level = 0;
      std::string_view trimmed = line.substr(indent_of(line));
      // Only a <details> inside a list item (indented) is affected; one at the margin may hold
      // lists and paragraphs of its own, which Doxygen renders well.
      if (trimmed.starts_with("<details") && indent_of(line) > 0) in_details = true;
      if (line.find("</details>") != std::string_view::npos) in_details = false;
      if (is_blank(line) && in_details) {
        // Doxygen closes a <details> at the first paragraph break inside a list item, leaving
        // the answer outside its fold; a line break keeps the block one paragraph.
        out += std::string(i > 0 ? indent_of(lines[i - 1]) : 0, ' ') + "<br>" + eol(line);
        ++i;
        continue;
      }
      if (is_blank(line)) {
        out += line;
        ++i;
        after_blank = true;
        continue;
      }
      if (open_fence(line, fence)) {
        // Everything up to the closing fence is code, or, for ```math, a display formula.
        bool math = fence.info == "math";
        out += math ? std::string(indent_of(line), ' ') + "\\f[" + eol(line) : std::string(line);
        for (++i; i < lines.size(); ++i) {
          if (closes_fence(lines[i], fence)) {
            out += math ? std::string(indent_of(lines[i]), ' ') + "\\f]" + eol(lines[i])
                        : std::string(lines[i]);
            ++i;
            break;
          }
          out += lines[i];
        }
      } else if (figure(line, out)) {
        ++i;
      } else if (starts_comment(line)) {
        // An HTML comment (the README's instructor-only and student-only blocks) is copied as it
        // is, whatever it holds, up to the line that closes it.
        std::size_t from = indent_of(line) + 4;
        for (; i < lines.size(); ++i, from = 0) {
          out += lines[i];
          if (lines[i].find("-->", from) != std::string_view::npos) {
            ++i;
            break;
          }
        }
      } else if (is_heading(line, level)) {
        heading(line, level, out);
        ++i;
      } else if (after_blank && indent_of(line) >= 4) {
        // An indented code block (or a deeply nested list paragraph): left as it is.
        for (; i < lines.size() && !is_blank(lines[i]); ++i) out += lines[i];
      } else {
        std::string para;
        for (; i < lines.size(); ++i) {
          std::string_view l = lines[i];
          if (!para.empty() && (is_blank(l) || open_fence(l, fence) || is_heading(l, level) ||
                                starts_comment(l) || is_figure(l)))
            break;
          if (!para.empty() && l.find("</details>") != std::string_view::npos) in_details = false;
          para += l;
        }
        out += inline_pass(para);
      }
      after_blank = false;
    }
    return out;
  }

 private:
  static std::string eol(std::string_view line) { return line.ends_with('\n') ? "\n" : ""; }

  static bool is_figure(std::string_view line) {
    static const std::regex re(R"(^\s*<!--\s*figure:\s*\S+.*-->\s*$)");
    return std::regex_match(line.begin(), line.end(), re);
  }

  bool figure(std::string_view line, std::string& out) {
    static const std::regex re(R"(^\s*<!--\s*figure:\s*(\S+)\s*(.*?)\s*-->\s*$)");
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_match(line.begin(), line.end(), m, re)) return false;
    std::string file = m[1].str(), caption = m[2].str();
    std::error_code ec;
    if (!o_.figures.empty() && fs::is_regular_file(o_.figures / file, ec)) {
      for (char& c : caption)
        if (c == '"') c = '\'';
      out += "\\image html " + file + " \"" + caption + "\"";
    }
    out += eol(line);
    return true;
  }

  void heading(std::string_view line, std::size_t level, std::string& out) {
    std::string text(line);
    while (!text.empty() && is_space(text.back())) text.pop_back();
    std::size_t start = indent_of(text) + level;
    while (start < text.size() && is_space(text[start])) ++start;
    std::string title = text.substr(start);
    while (!title.empty() && title.back() == '#') title.pop_back();  // closing #s
    std::string slug = github_slug(title);
    // GitHub numbers repeated anchors on a page: the second "Flags" is #flags-1.
    int seen = slugs_seen_[slug]++;
    if (seen > 0) slug += "-" + std::to_string(seen);
    std::string converted = inline_pass(text);
    // A level-1 heading is the page's title, which Doxygen also shows, unformatted, in the tree
    // view and the page list: a code span there would read "<tt>mgpu-grade</tt>".
    if (level == 1) std::erase(converted, '`');
    if (level >= 2 && text.find("{#") == std::string::npos)
      converted += " {#" + id_ + "_" + slug + "}";
    out += converted + eol(line);
  }

  // A link target: a README (relative path, maybe with #anchor) or an #anchor of this page
  // becomes an @ref to the page or heading; anything else is left as it is.
  std::string link_target(const std::string& target) const {
    if (target.find("://") != std::string::npos || target.starts_with("mailto:") ||
        target.starts_with("@ref") || target.starts_with("/"))
      return target;
    std::size_t hash = target.find('#');
    std::string path = target.substr(0, hash);
    std::string frag = hash == std::string::npos ? "" : target.substr(hash + 1);
    std::string page_name;
    if (path.empty()) {
      if (frag.empty()) return target;
      page_name = id_;
    } else {
      if (!path.ends_with(".md")) return target;
      std::string rel = normalize(dir_.empty() ? path : dir_ + "/" + path);
      std::error_code ec;
      if (rel.starts_with("..") || (!o_.root.empty() && !fs::is_regular_file(o_.root / rel, ec)))
        return target;
      page_name = page_id(rel, o_.mainpage);
    }
    return "@ref " + page_name + (frag.empty() ? "" : "_" + frag);
  }

  // Math, code spans, comments and links inside one paragraph (or heading).
  std::string inline_pass(const std::string& s) {
    std::string out;
    std::vector<bool> image_brackets;  // for each open '[', whether it began an image
    const std::size_t n = s.size();
    auto run_of = [&](std::size_t at, char ch) {
      std::size_t k = 0;
      while (at + k < n && s[at + k] == ch) ++k;
      return k;
    };
    // The next run of exactly `len` backticks at or after `from`, or npos.
    auto closing_ticks = [&](std::size_t from, std::size_t len) {
      for (std::size_t j = from; j < n;) {
        if (s[j] != '`') {
          ++j;
          continue;
        }
        std::size_t k = run_of(j, '`');
        if (k == len) return j;
        j += k;
      }
      return std::string::npos;
    };
    for (std::size_t i = 0; i < n;) {
      char c = s[i];
      if (c == '\\' && i + 1 < n) {
        out += s.substr(i, 2);
        i += 2;
      } else if (c == '`') {
        std::size_t len = run_of(i, '`');
        std::size_t close = closing_ticks(i + len, len);
        if (close == std::string::npos) {
          out += s.substr(i, len);
          i += len;
        } else {
          // GitHub reads `\|` in a code span as a '|' of the span (the way to write one in a
          // table cell); Doxygen shows the backslash. Closed around an escaped '|' outside it,
          // the span shows the bar alone: `1\|2` becomes `1`\|`2`.
          const std::string ticks(len, '`');
          std::string span = s.substr(i, close + len - i);
          for (std::size_t at = span.find("\\|"); at != std::string::npos;
               at = span.find("\\|", at + 2 + 2 * len)) {
            span.replace(at, 2, ticks + "\\|" + ticks);
          }
          out += span;
          i = close + len;
        }
      } else if (s.compare(i, 4, "<!--") == 0) {
        std::size_t close = s.find("-->", i + 4);
        close = close == std::string::npos ? n : close + 3;
        out += s.substr(i, close - i);
        i = close;
      } else if (c == '$' && i + 1 < n && s[i + 1] == '$') {
        std::size_t close = s.find("$$", i + 2);
        if (close == std::string::npos) {
          out += "$$";
          i += 2;
        } else {
          out += "\\f[" + s.substr(i + 2, close - i - 2) + "\\f]";
          i = close + 2;
        }
      } else if (c == '$' && i + 1 < n && s[i + 1] == '`') {
        // GitHub's other inline form, $`...`$, for formulas that would upset Markdown.
        std::size_t len = run_of(i + 1, '`');
        std::size_t close = closing_ticks(i + 1 + len, len);
        if (close != std::string::npos && close + len < n && s[close + len] == '$') {
          out += "\\f$" + s.substr(i + 1 + len, close - i - 1 - len) + "\\f$";
          i = close + len + 1;
        } else {
          out += '$';
          ++i;
        }
      } else if (c == '$') {
        std::size_t close = inline_math_end(s, i);
        if (close == std::string::npos) {
          out += '$';
          ++i;
        } else {
          out += "\\f$" + s.substr(i + 1, close - i - 1) + "\\f$";
          i = close + 1;
        }
      } else if (c == '[') {
        image_brackets.push_back(i > 0 && s[i - 1] == '!');
        out += c;
        ++i;
      } else if (c == ']' && !image_brackets.empty()) {
        bool image = image_brackets.back();
        image_brackets.pop_back();
        out += c;
        ++i;
        if (!image && i < n && s[i] == '(') {
          std::size_t close = s.find(')', i);
          std::string target = close == std::string::npos ? "" : s.substr(i + 1, close - i - 1);
          if (!target.empty() && target.find_first_of(" \t\n") == std::string::npos) {
            out += "(" + link_target(target) + ")";
            i = close + 1;
          }
        }
      } else {
        out += c;
        ++i;
      }
    }
    return out;
  }

  // Where the inline formula opened by the '$' at `open` closes, or npos when that '$' is text:
  // the content must start and end with a non-space, and the closing '$' must not be followed
  // by a digit ("costs $5 to $6" is text) or be half of "$$".
  static std::size_t inline_math_end(const std::string& s, std::size_t open) {
    const std::size_t n = s.size();
    if (open + 1 >= n || is_space(s[open + 1])) return std::string::npos;
    for (std::size_t j = open + 1; j < n; ++j) {
      if (s[j] == '\\') {
        ++j;
        continue;
      }  // \$ and \\ inside a formula
      if (s[j] != '$') continue;
      if (j + 1 < n && s[j + 1] == '$') return std::string::npos;
      if (is_space(s[j - 1])) return std::string::npos;
      if (j + 1 < n && std::isdigit(static_cast<unsigned char>(s[j + 1]))) return std::string::npos;
      return j;
    }
    return std::string::npos;
  }

  const FilterOptions& o_;
  std::string id_;
  std::string dir_;
  std::map<std::string, int> slugs_seen_;
};

}  // namespace

std::string page_id(std::string_view rel, std::string_view mainpage) {
  std::string r = normalize(std::string(rel));
  if (r == normalize(std::string(mainpage))) return "index";
  std::size_t dot = r.rfind('.');
  std::size_t slash = r.rfind('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) r.erase(dot);
  for (char& c : r)
    if (c == '/') c = '_';
  return "md_" + r;
}

std::string github_slug(std::string_view heading) {
  std::string slug;
  for (char c : heading) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80 || std::isalnum(u) || c == '_' || c == '-')
      slug += static_cast<char>(std::tolower(u));
    else if (c == ' ')
      slug += '-';
  }
  return slug;
}

std::string github_to_doxygen(std::string_view markdown, const FilterOptions& options) {
  return Converter(options).run(markdown);
}

}  // namespace mgpu::docs
