// Preloaded (LD_PRELOAD) into every process of a student build, in both sandboxes: a file the
// build may not read reads as absent. Opening a file outside the build's view (Landlock, in the
// uid sandbox) or one its uid may not read fails with EACCES where an absent file fails with
// ENOENT, and the compiler tells them apart: `__has_include` of an unreadable file fails the build
// naming it, `#include` says "Permission denied". Either would tell a submission that a file it
// may not read exists. Only opens for reading are changed: nothing else says whether a file
// exists to code that is compiled (the compiler runs none of it). Plain C linkage and no C++
// runtime, so it loads into any program; the system calls stay the C library's own.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cerrno>

namespace {

// A failed open for reading (flags) that was refused, made to read as "no such file".
void as_absent(int flags) {
  if (errno == EACCES && (flags & O_ACCMODE) == O_RDONLY && !(flags & O_CREAT)) errno = ENOENT;
}

// The mode argument of an open that creates a file, which only then is passed.
mode_t mode_of(int flags, va_list args) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(args, mode_t) : 0;
}

// The C library's own definition of `name`, looked up at each call (a microsecond): a static
// would need the C++ runtime's guard.
template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

#define MGPU_HIDE_OPEN(name)                                       \
  int name(const char* path, int flags, ...) {                     \
    const auto real = next<int (*)(const char*, int, ...)>(#name); \
    va_list args;                                                  \
    va_start(args, flags);                                         \
    const mode_t mode = mode_of(flags, args);                      \
    va_end(args);                                                  \
    const int fd = real(path, flags, mode);                        \
    if (fd < 0) as_absent(flags);                                  \
    return fd;                                                     \
  }
#define MGPU_HIDE_OPENAT(name)                                          \
  int name(int dir, const char* path, int flags, ...) {                 \
    const auto real = next<int (*)(int, const char*, int, ...)>(#name); \
    va_list args;                                                       \
    va_start(args, flags);                                              \
    const mode_t mode = mode_of(flags, args);                           \
    va_end(args);                                                       \
    const int fd = real(dir, path, flags, mode);                        \
    if (fd < 0) as_absent(flags);                                       \
    return fd;                                                          \
  }
#define MGPU_HIDE_OPEN_2(name)                                \
  int name(const char* path, int flags) {                     \
    const auto real = next<int (*)(const char*, int)>(#name); \
    const int fd = real(path, flags);                         \
    if (fd < 0) as_absent(flags);                             \
    return fd;                                                \
  }
#define MGPU_HIDE_OPENAT_2(name)                                   \
  int name(int dir, const char* path, int flags) {                 \
    const auto real = next<int (*)(int, const char*, int)>(#name); \
    const int fd = real(dir, path, flags);                         \
    if (fd < 0) as_absent(flags);                                  \
    return fd;                                                     \
  }
#define MGPU_HIDE_FOPEN(name)                                            \
  FILE* name(const char* path, const char* mode) {                       \
    const auto real = next<FILE* (*)(const char*, const char*)>(#name);  \
    FILE* f = real(path, mode);                                          \
    if (!f && mode[0] == 'r' && !strchr(mode, '+')) as_absent(O_RDONLY); \
    return f;                                                            \
  }

MGPU_HIDE_OPEN(open)
MGPU_HIDE_OPEN(open64)
MGPU_HIDE_OPENAT(openat)
MGPU_HIDE_OPENAT(openat64)
MGPU_HIDE_OPEN_2(__open_2)
MGPU_HIDE_OPEN_2(__open64_2)
MGPU_HIDE_OPENAT_2(__openat_2)
MGPU_HIDE_OPENAT_2(__openat64_2)
MGPU_HIDE_FOPEN(fopen)
MGPU_HIDE_FOPEN(fopen64)

}  // extern "C"
