// The release's last check: no reference solution's code ships in the student's copy. A test
// fixture, a comment or a tool that repeats a solved body would hand students the answer.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mgpu::grade {

/// Where a shipped file repeats lines of a reference solution that its skeleton does not have.
struct ReferenceLeak {
  std::string
      shipped;  ///< the shipped file and line, relative to its root ("runtime/tests/x.cpp:78")
  std::string
      reference;  ///< the reference file and line it repeats ("solutions/11_2_.../x.cpp:40")
};

/// Every place under `shipped` (sealed hints read as `./mgpu hint` shows them) that repeats kWindow
/// consecutive lines of a reference solution (each .cpp/.cu under `exported`/solutions), lines
/// compared with comments and spacing removed. Only solved lines count: a reference line that a
/// file of its skeleton's folder (under chapters/ or gpu_labs/, tests left out) or, for a lab,
/// gpu_labs/common also has is given code, and breaks a window. Lines with nothing but punctuation
/// and keywords (`}`, `return;`) never start a match.
std::vector<ReferenceLeak> reference_leaks(const std::filesystem::path& exported,
                                           const std::filesystem::path& shipped);

/// How many consecutive solved lines make a match: few enough that a copied loop is caught, many
/// enough that two unrelated files rarely share them.
inline constexpr std::size_t kWindow = 3;

}  // namespace mgpu::grade
