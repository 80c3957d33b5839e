// Small file and text helpers shared by the grader's parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace mgpu::grade {

/// The whole file as a string; throws std::runtime_error naming the file when unreadable.
std::string read_text(const std::filesystem::path& p);
/// Writes the file only when its content differs, so ninja sees unchanged files as unchanged.
/// Returns true when it wrote.
bool write_if_changed(const std::filesystem::path& p, const std::string& content);
/// Writes and fsyncs (reports and gradebooks must survive an interruption).
void write_text(const std::filesystem::path& p, const std::string& content);
/// A name safe for a folder: letters, digits, '-', '_' and '.', others replaced by '_'.
std::string safe_name(const std::string& s);
/// s with every invalid UTF-8 sequence (a stray byte, an overlong form, a surrogate, a character
/// cut short) replaced by U+FFFD, one per maximal invalid subpart as Unicode recommends. Student
/// output and compiler messages are bytes; JSON and XML reports need valid UTF-8.
std::string valid_utf8(const std::string& s);
/// At most max_bytes of s, cut at a character boundary: a multi-byte character that does not fit
/// is left out whole rather than cut in the middle.
std::string truncate_utf8(const std::string& s, std::size_t max_bytes);
/// FNV-1a, 64 bits: a stable hash of bytes (std::hash differs between libraries and runs), for
/// cache stamps and seed derivation. Not a cryptographic hash.
std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = 0xcbf29ce484222325ull);
/// The FNV-1a hash of a file's content, as 16 hex digits; throws when unreadable.
std::string file_hash(const std::filesystem::path& p);
/// CPUs this process may really use: the fewest of the affinity mask and the cgroup's CPU quota
/// (v2 cpu.max, v1 cfs quota), at least 1. A container limited to half a CPU on a 64-core host
/// gets 1, not 64 (std::thread::hardware_concurrency counts the host).
int available_cpus();
/// A phase of a long command, told on stderr: "mgpu-grade: <what>" when it starts, and a line
/// every 5 s while it lasts, so no minute passes in silence. Silent unless enable_progress(true)
/// (grade turns it on; a batch has its own progress line, and --quiet means quiet).
class Progress {
 public:
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};
void enable_progress(bool on);

/// True when stdout (fd 1) or stderr (fd 2) is a terminal and colour is wanted (NO_COLOR unset).
bool use_colour(int fd);

}  // namespace mgpu::grade
