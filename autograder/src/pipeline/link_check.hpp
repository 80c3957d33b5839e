// The link-time check of a submission: its object files may define, with external linkage, only
// what the reference's objects for the same files define. A global `write`, `malloc`,
// `operator new` or a runtime function of its own would otherwise take the place of the real one
// inside the case program, where the grader's measures and the result are produced.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mgpu::grade {

/// One definition a submission may not make.
struct ForeignSymbol {
  std::string file;    ///< the submitted source file, "chapters/<chapter>/<file>.cpp"
  std::string symbol;  ///< demangled name
  std::string why;     ///< what makes it foreign, in a few words
};

/// The outcome of the check for one chapter's case program.
struct LinkCheck {
  bool ok = true;
  std::string first_error;  ///< a one-line summary naming the first file and symbol
  std::string log;          ///< every refused symbol and what to do about it
  std::vector<ForeignSymbol> refused;
};

/// Compares the chapter libraries (libmgpu_<chapter>.a) that `target` (a case program) links in
/// the student tree, as its build.ninja lists them, with the same archives of the reference tree,
/// object by object (an archive member is named after its source file). A symbol the student's
/// object defines with external linkage is allowed when the reference's object for the same file
/// defines it too (a weak one where the reference's is weak or strong, a strong one only where the
/// reference's is strong), or when it is weak, mangled (an inline function or template
/// instantiation: COMDAT, which the linker merges) and not defined strongly by the runtime, the
/// harness or the C and C++ libraries. Everything else is refused. An archive the reference tree
/// lacks is not checked.
LinkCheck check_submission_symbols(const std::filesystem::path& student_tree,
                                   const std::filesystem::path& reference_tree,
                                   const std::string& target);

}  // namespace mgpu::grade
