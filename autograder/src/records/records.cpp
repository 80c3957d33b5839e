// Record files and their time stamps (records.hpp).
#include "records/records.hpp"

#include <chrono>
#include <cstdlib>
#include <ctime>

namespace fs = std::filesystem;

namespace mgpu::grade {

fs::path record_path(const char* variable, const fs::path& fallback) {
  const char* log = std::getenv(variable);
  if (log == nullptr || *log == '\0') return fallback;
  fs::path p = log;
  const char* caller = std::getenv("MGPU_CALLER_PWD");
  return p.is_absolute() || caller == nullptr ? p : fs::path(caller) / p;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace mgpu::grade
