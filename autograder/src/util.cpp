// File helpers: change-aware writes keep warm rebuilds incremental; fsync keeps reports intact.
// Text helpers: UTF-8 repair and truncation, so bytes from students never break a report.
#include "util.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

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
  if (std::filesystem::is_regular_file(p, ec) &&
      std::filesystem::file_size(p, ec) == content.size() && read_text(p) == content)
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
  for (char c : s)
    r +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (r.empty() || r[0] == '.') r = "_" + r;
  return r;
}

namespace {

// The UTF-8 sequence starting at s[i]: its length when valid, otherwise the length of its longest
// valid prefix (at least 1), which is the "maximal subpart" replaced by one U+FFFD.
struct Utf8Seq {
  std::size_t len;
  bool ok;
};

Utf8Seq utf8_at(const std::string& s, std::size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {1, true};
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the first continuation byte (Unicode table 3-7)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // shorter forms are overlong
    if (c == 0xED) hi = 0x9F;  // D800..DFFF are surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return {1, false};  // a continuation byte, C0/C1 (overlong) or F5..FF (beyond U+10FFFF)
  }
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return {k, false};
    auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return {k, false};
  }
  return {n, true};
}

}  // namespace

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    Utf8Seq q = utf8_at(s, i);
    if (q.ok)
      out.append(s, i, q.len);
    else
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
    i += q.len;
  }
  return out;
}

std::string truncate_utf8(const std::string& s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t cut = max_bytes;
  // Step back over continuation bytes (10xxxxxx) to the start of the character being cut; a
  // character is at most 4 bytes, so at most 3 steps.
  for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80; ++k)
    --cut;
  return s.substr(0, cut);
}

bool use_colour(int fd) {
  const char* nc = std::getenv("NO_COLOR");
  if (nc && *nc) return false;
  return ::isatty(fd) == 1;
}

std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string file_hash(const std::filesystem::path& p) {
  return fmt::format("{:016x}", fnv1a64(read_text(p)));
}

int available_cpus() {
  cpu_set_t set;
  int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  auto quota_cpus = [](double quota, double period) {
    return quota > 0 && period > 0 ? std::max(1, static_cast<int>(std::ceil(quota / period))) : 0;
  };
  int limit = 0;
  std::ifstream v2("/sys/fs/cgroup/cpu.max");  // "max 100000" or "50000 100000"
  std::string quota;
  double period = 0;
  if (v2 >> quota >> period && quota != "max") limit = quota_cpus(std::atof(quota.c_str()), period);
  std::ifstream q1("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
      p1("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double q = -1, p = 0;
  if (!limit && q1 >> q && p1 >> p) limit = quota_cpus(q, p);
  return std::max(1, limit ? std::min(cpus, limit) : cpus);
}

namespace {
std::atomic<bool> progress_on{false};
}  // namespace

void enable_progress(bool on) { progress_on = on; }

struct Progress::State {
  std::string what;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  std::thread heartbeat;
};

Progress::Progress(std::string what) {
  if (!progress_on) return;
  state_ = std::make_unique<State>();
  state_->what = std::move(what);
  std::fprintf(stderr, "mgpu-grade: %s\n", state_->what.c_str());
  state_->heartbeat = std::thread([s = state_.get()] {
    std::unique_lock lock(s->mu);
    while (!s->done_cv.wait_for(lock, std::chrono::seconds(5), [s] { return s->done; })) {
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - s->start);
      std::fprintf(stderr, "mgpu-grade:   still %s (%lld s)\n", s->what.c_str(),
                   static_cast<long long>(secs.count()));
    }
  });
}

Progress::~Progress() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mu);
    state_->done = true;
  }
  state_->done_cv.notify_all();
  state_->heartbeat.join();
}

}  // namespace mgpu::grade
