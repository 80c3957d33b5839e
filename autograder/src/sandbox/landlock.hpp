// Landlock views: which parts of the file system a process may still reach. Used by the uid
// sandbox for a whole case and a student build, and by a host case program for each rank it
// starts (autograder/harness/case_main.cpp), which then reaches its own folder and no other
// rank's. Only the C library: the case harness links it too.
#pragma once

#include <filesystem>
#include <vector>

namespace mgpu::grade {

/// What a process confined with Landlock may reach: everything else of the file system is out
/// of reach whatever its permissions (read, write, execute, list, create).
struct FsView {
  std::vector<std::filesystem::path> read_only;   ///< read, list and execute
  std::vector<std::filesystem::path> read_write;  ///< everything, beneath each
  std::vector<std::filesystem::path> devices;     ///< open for reading and writing, no creating
};

/// The view of a case in the uid sandbox: the system's programs and libraries, /proc and /sys
/// read-only, the standard device nodes (null, zero, full, random, urandom) and `devices` (a GPU's
/// nodes), and its own folder. Nothing of /tmp, /dev/shm, the project or another case's folder,
/// whatever their modes.
FsView case_view(const std::filesystem::path& workdir,
                 const std::vector<std::filesystem::path>& devices = {});

/// Landlock's ABI version on this kernel, 0 when it has none (the uid sandbox then relies on file
/// modes alone; see SECURITY.md).
int landlock_abi();

/// A Landlock ruleset (a descriptor, close-on-exec) for view, to be enforced in the child with
/// landlock_restrict_self after PR_SET_NO_NEW_PRIVS; -1 when Landlock is unavailable. Paths that
/// do not exist are left out.
int landlock_ruleset(const FsView& view);

/// Confines this process to `view` for good (after PR_SET_NO_NEW_PRIVS): true when done, false
/// when Landlock is unavailable here. Throws naming the step that failed otherwise.
bool confine_to(const FsView& view);

}  // namespace mgpu::grade
