// Unpacking a submission by rules rather than by trust: libzip reads the archive in this process
// (no `unzip` and its options to get right), every entry name is checked before anything is
// written, and sizes are counted while decompressing. Folders are checked by the same rules.
#include "pipeline/unpack.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <fmt/format.h>

#include <memory>

#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

constexpr const char* kFixZip =
    "upload the zip that `./mgpu submit` writes, or zip the chapter folders "
    "yourself with plain files only";
constexpr const char* kFixFolder =
    "pass a folder that holds only your chapter folders with plain files (copies, "
    "not links), or the zip that `./mgpu submit` writes";

[[noreturn]] void reject(const fs::path& submission, const std::string& entry,
                         const std::string& problem, const char* fix) {
  throw RejectedSubmission(
      valid_utf8(fmt::format("{}: `{}` {}; fix: {}", submission.string(), entry, problem, fix)));
}

// Counts entries and bytes against the caps; the same arithmetic for zips and folders.
struct Caps {
  const fs::path& submission;
  const char* fix;
  std::size_t entries = 0;
  std::uint64_t bytes = 0;

  void entry(const std::string& name) {
    if (++entries > kMaxSubmissionEntries)
      reject(submission, name,
             fmt::format("is entry number {}: a submission holds at most {} files and folders",
                         entries, kMaxSubmissionEntries),
             fix);
  }
  // `file_bytes` is the entry's size so far; `more` bytes were just added to it.
  void add(const std::string& name, std::uint64_t file_bytes, std::uint64_t more) {
    bytes += more;
    if (file_bytes > kMaxSubmissionFileBytes)
      reject(submission, name,
             fmt::format("is larger than {} MiB, the limit for one file",
                         kMaxSubmissionFileBytes >> 20),
             fix);
    if (bytes > kMaxSubmissionBytes)
      reject(submission, name,
             fmt::format("takes the submission over {} MiB, the limit for all files together",
                         kMaxSubmissionBytes >> 20),
             fix);
  }
};

// The entry's path relative to the destination, or a rejection: absolute paths and `..` could
// write outside it. Backslashes (old Windows tools) are read as separators, as unzip does.
fs::path safe_relative(const fs::path& submission, const std::string& raw) {
  std::string name = raw;
  for (char& c : name)
    if (c == '\\') c = '/';
  if (name.empty()) reject(submission, raw, "has an empty name", kFixZip);
  if (name.front() == '/') reject(submission, raw, "is an absolute path", kFixZip);
  fs::path rel;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    std::string part = name.substr(start, end - start);
    if (part == "..") reject(submission, raw, "climbs out of the submission with `..`", kFixZip);
    if (!part.empty() && part != ".") rel /= part;
    start = end + 1;
  }
  return rel;
}

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }  // read only: nothing to write back
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

using ZipArchive = std::unique_ptr<zip_t, ZipCloser>;

ZipArchive open_zip(const fs::path& archive) {
  int code = 0;
  ZipArchive za(zip_open(archive.c_str(), ZIP_RDONLY, &code));
  if (za) return za;
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string why = zip_error_strerror(&err);
  zip_error_fini(&err);
  throw std::runtime_error(
      fmt::format("cannot read {} as a zip file ({}); fix: upload the zip that `./mgpu submit` "
                  "writes, or the chapter folders themselves",
                  archive.string(), why));
}

// An entry's name as stored, and its checked path relative to the destination.
struct ZipEntry {
  std::string name;
  fs::path rel;
};

// Every entry's name, checked against the caps and the rules before anything is written.
std::vector<ZipEntry> checked_entries(zip_t* za, const fs::path& archive, Caps& caps) {
  std::vector<ZipEntry> entries;
  const zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    auto idx = static_cast<zip_uint64_t>(i);
    const char* cname = zip_get_name(za, idx, 0);
    const std::string& name = entries.emplace_back(ZipEntry{cname ? cname : "", {}}).name;
    caps.entry(name);
    entries.back().rel = safe_relative(archive, name);
    zip_uint8_t opsys = 0;
    zip_uint32_t attr = 0;
    if (zip_file_get_external_attributes(za, idx, 0, &opsys, &attr) == 0 &&
        opsys == ZIP_OPSYS_UNIX) {
      // Unix zips keep st_mode in the high 16 bits: `zip --symlinks` stores a link as S_IFLNK.
      mode_t type = (attr >> 16) & S_IFMT;
      if (type == S_IFLNK)
        reject(
            archive, name,
            "is a symbolic link; links are refused (they could reach files outside the submission)",
            kFixZip);
      if (type != 0 && type != S_IFREG && type != S_IFDIR)
        reject(archive, name, "is a device, pipe or socket, not a file", kFixZip);
    }
  }
  return entries;
}

// Decompresses entry idx into the new file `out`, counting its bytes against the caps.
void extract_file(zip_t* za, std::size_t idx, const std::string& name, const fs::path& out,
                  const fs::path& archive, Caps& caps, std::vector<char>& buf) {
  std::unique_ptr<zip_file_t, ZipFileCloser> zf(zip_fopen_index(za, idx, 0));
  if (!zf)
    reject(archive, name, fmt::format("cannot be read ({})", zip_strerror(za)),
           "zip without a password or encryption (`./mgpu submit` does)");
  // O_EXCL | O_NOFOLLOW: a name given twice is refused instead of overwriting, and nothing in
  // dest is followed; every extracted file is a new file, so none is a hard link.
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    reject(archive, name, "appears twice in the zip, or clashes with a folder of the same name",
           kFixZip);
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_fd{fd};
  std::uint64_t size = 0;
  for (zip_int64_t got; (got = zip_fread(zf.get(), buf.data(), buf.size())) != 0;) {
    if (got < 0)
      reject(archive, name, fmt::format("is damaged ({})", zip_file_strerror(zf.get())),
             "make the zip again (`./mgpu submit`) and upload it once more");
    size += static_cast<std::uint64_t>(got);
    caps.add(name, size, static_cast<std::uint64_t>(got));
    if (::write(fd, buf.data(), static_cast<std::size_t>(got)) != got)
      throw std::runtime_error(
          fmt::format("cannot write {} while unpacking {}", out.string(), archive.string()));
  }
}

}  // namespace

void extract_zip(const fs::path& archive, const fs::path& dest) {
  ZipArchive za = open_zip(archive);
  std::error_code ec;
  fs::remove_all(dest, ec);
  fs::create_directories(dest);
  Caps caps{archive, kFixZip};
  // Names first: a bad entry rejects the zip before a single byte of it is written.
  const std::vector<ZipEntry> entries = checked_entries(za.get(), archive, caps);
  std::vector<char> buf(64 * 1024);
  for (std::size_t idx = 0; idx < entries.size(); ++idx) {
    const auto& [name, rel] = entries[idx];
    if (rel.empty()) continue;  // "./" and the like: the destination itself
    fs::path out = dest / rel;
    bool is_dir = name.back() == '/' || name.back() == '\\';  // safe_relative refused empty names
    fs::create_directories(is_dir ? out : out.parent_path(), ec);
    if (ec)
      reject(archive, name,
             fmt::format("cannot be created ({}): another entry is a file of the same name",
                         ec.message()),
             kFixZip);
    if (!is_dir) extract_file(za.get(), idx, name, out, archive, caps, buf);
  }
}

void check_submission_folder(const fs::path& dir) {
  Caps caps{dir, kFixFolder};
  std::error_code ec;
  // The iterator does not follow links into folders, so a link is seen once, as a link.
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::string name = p.lexically_relative(dir).string();
    caps.entry(name);
    fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(st)) {
      std::error_code rec;
      fs::path target = fs::read_symlink(p, rec);
      reject(
          dir, name,
          fmt::format("is a symbolic link (to {}); links are refused, even ones that point inside",
                      target.string()),
          kFixFolder);
    }
    if (fs::is_directory(st)) continue;
    if (!fs::is_regular_file(st))
      reject(dir, name, "is a device, pipe or socket, not a file", kFixFolder);
    if (auto links = fs::hard_link_count(p, ec); !ec && links > 1)
      reject(dir, name,
             fmt::format("is a hard link ({} names for one file); links are refused", links),
             kFixFolder);
    std::uintmax_t size = fs::file_size(p, ec);
    if (ec) break;
    caps.add(name, size, size);
  }
  if (ec)
    throw std::runtime_error(
        fmt::format("cannot read the submission folder {}: {}", dir.string(), ec.message()));
}

Grade rejected_grade(Grade g, const std::vector<const ChapterSpec*>& chapters,
                     const std::string& why) {
  g.notes.insert(g.notes.begin(), "rejected-submission: " + why);
  g.chapters.clear();
  for (const auto* ch : chapters) {
    ChapterGrade cg;
    cg.name = ch->name;
    cg.title = ch->title;
    for (const auto& cs : ch->cases) {
      CaseGrade c;
      c.name = cs.name;
      c.chapter = ch->name;
      c.visibility = cs.visibility;
      c.status = Status::rejected_submission;
      c.max_score = cs.max_score();
      c.reason = why;
      cg.cases.push_back(std::move(c));
    }
    g.chapters.push_back(std::move(cg));
  }
  return g;
}

}  // namespace mgpu::grade
