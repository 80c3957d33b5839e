// Which "secrets" a process holds in its own memory: strings "mgpu-secret-" followed by 24
// lowercase letters, found by reading every readable mapping through /proc/self/mem (which skips
// what cannot be read instead of faulting). The tests give each rank one secret as its input and
// check that no rank holds another's.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace mgpu::test {

inline const std::string kSecretPrefix = "mgpu-secret-";
constexpr std::size_t kSecretLetters = 24;

/// The distinct secrets (their letters) in `bytes`.
inline void collect_secrets(std::string_view bytes, std::set<std::string>& out) {
  for (std::size_t at = bytes.find(kSecretPrefix); at != std::string_view::npos;
       at = bytes.find(kSecretPrefix, at + 1)) {
    const std::string_view rest = bytes.substr(at + kSecretPrefix.size(), kSecretLetters);
    bool letters = rest.size() == kSecretLetters;
    for (char c : rest) letters = letters && c >= 'a' && c <= 'z';
    if (letters) out.emplace(rest);
  }
}

/// Every secret in this process's readable memory.
inline std::set<std::string> secrets_in_own_memory() {
  std::set<std::string> found;
  std::ifstream maps("/proc/self/maps");
  const int mem = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  std::vector<char> chunk(std::size_t(1) << 20);
  std::string line;
  while (mem >= 0 && std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
    if (line.find("[vvar") != std::string::npos || line.find("[vsyscall]") != std::string::npos)
      continue;
    // Chunks overlap by a secret's length, so one that straddles a boundary is still seen.
    const unsigned long step = chunk.size() - kSecretPrefix.size() - kSecretLetters;
    for (unsigned long at = lo; at < hi; at += step) {
      const auto want = static_cast<std::size_t>(std::min<unsigned long>(chunk.size(), hi - at));
      const ssize_t got = ::pread(mem, chunk.data(), want, static_cast<off_t>(at));
      if (got <= 0) break;
      collect_secrets(std::string_view(chunk.data(), static_cast<std::size_t>(got)), found);
    }
  }
  if (mem >= 0) ::close(mem);
  return found;
}

}  // namespace mgpu::test
