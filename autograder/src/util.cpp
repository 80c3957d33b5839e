// File helpers: change-aware writes keep warm rebuilds incremental; fsync keeps reports intact.
#include "util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mgpu::grade {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_if_changed(const std::filesystem::path& p, const std::string& content) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(p, ec) && std::filesystem::file_size(p, ec) == content.size() &&
      read_text(p) == content)
    return false;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + p.string());
  return true;
}

void write_text(const std::filesystem::path& p, const std::string& content) {
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + p.string());
  const char* d = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, d, left);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + p.string());
    }
    d += n;
    left -= static_cast<std::size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
}

std::string safe_name(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (r.empty() || r[0] == '.') r = "_" + r;
  return r;
}

bool use_colour(int fd) {
  const char* nc = std::getenv("NO_COLOR");
  if (nc && *nc) return false;
  return ::isatty(fd) == 1;
}

}  // namespace mgpu::grade
