// The one doctest main shared by every test program in the project.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <string_view>

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  // CTest learns a program's cases from --list-test-cases (mgpu_doctest). A case that skips
  // itself here (a device test without a GPU, a grading test in a student tree) is listed too,
  // so that CTest shows it as skipped instead of leaving it out; running it still skips it.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--list-test-cases" || arg == "-ltc") context.setOption("no-skip", true);
  }
  return context.run();
}
