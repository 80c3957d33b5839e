// Small file helpers shared by the grader's parts.
#pragma once

#include <filesystem>
#include <string>

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
/// True when stdout (fd 1) or stderr (fd 2) is a terminal and colour is wanted (NO_COLOR unset).
bool use_colour(int fd);

}  // namespace mgpu::grade
