// mgpu-md-filter: Doxygen's INPUT_FILTER for *.md (docs/Doxyfile). Doxygen runs it as
// `mgpu-md-filter [options] FILE` and reads the page from its standard output.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "md_filter.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  mgpu::docs::FilterOptions options;
  fs::path root = ".", file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--root" && has_value) {
      root = argv[++i];
    } else if (a == "--mainpage" && has_value) {
      options.mainpage = argv[++i];
    } else if (a == "--figures" && has_value) {
      options.figures = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: mgpu-md-filter [--root DIR] [--mainpage FILE] [--figures DIR] FILE\n"
                   "GitHub Markdown FILE (math, README links, figure comments) as Doxygen Markdown "
                   "on stdout.\n"
                   "--root: the repository (default .); --mainpage: the main page's file, relative "
                   "to it\n"
                   "(default README.md); --figures: the folder of generated figures.\n";
      return 0;
    } else if (!a.starts_with("--") && file.empty()) {
      file = a;
    } else {
      std::cerr << "mgpu-md-filter: unexpected argument '" << a << "' (see --help)\n";
      return 2;
    }
  }
  if (file.empty()) {
    std::cerr << "mgpu-md-filter: name the Markdown file to filter (see --help)\n";
    return 2;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << "mgpu-md-filter: cannot read " << file << "\n";
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::error_code ec;
  fs::path abs_root = fs::weakly_canonical(root, ec);
  options.root = abs_root;
  options.page = fs::weakly_canonical(file, ec).lexically_relative(abs_root).generic_string();
  std::cout << mgpu::docs::github_to_doxygen(text.str(), options);
  return std::cout.good() ? 0 : 1;
}
