// What the student-side records share (the hints opened, hint_book.hpp; the predictions made,
// predictions.hpp): where the record file lies and how its lines stamp the time.
#pragma once

#include <filesystem>
#include <string>

namespace mgpu::grade {

/// The record file: the path in environment variable `variable` (relative to the folder ./mgpu
/// was called from, MGPU_CALLER_PWD) when it is set and not empty, else `fallback`.
std::filesystem::path record_path(const char* variable, const std::filesystem::path& fallback);

/// The current UTC time as the records write it: 2026-12-01T18:00:00Z.
std::string utc_now();

}  // namespace mgpu::grade
