// Batch grading. The reference runs the visible cases once before any worker starts (hidden
// cases too when there is no secret; with one, each student's hidden seed is run as it comes); each
// worker owns a cached student build tree (slot) that it reuses for every submission it grades, so
// only the files that differ between submissions are recompiled.
#include "commands/batch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "pipeline/gpu_labs.hpp"
#include "report/report.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {

std::vector<std::string> csv_header(const std::vector<std::string>& blocks) {
  std::vector<std::string> h{"submission", "score", "max_score"};
  h.insert(h.end(), blocks.begin(), blocks.end());
  h.insert(h.end(), {"failed_cases", "hints", "status", "seconds", "seed", "hidden_seed"});
  return h;
}

std::vector<std::string> csv_row(const std::string& submission, const Grade& g,
                                 const std::vector<std::string>& blocks) {
  std::vector<std::string> row{submission, fmt::format("{:g}", g.score()),
                               fmt::format("{:g}", g.max_score())};
  // By name, not by position: the grade's blocks follow the rubric, the columns follow the header.
  for (const auto& b : blocks) {
    auto ch = std::find_if(g.chapters.begin(), g.chapters.end(),
                           [&](const ChapterGrade& c) { return c.name == b; });
    row.push_back(ch == g.chapters.end() ? "" : fmt::format("{:g}", ch->score()));
  }
  std::string failed, rejected;
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases) {
      if (c.status == Status::rejected_submission)
        rejected = c.reason;
      else if (c.score < c.max_score && c.status != Status::reference_error)
        failed += (failed.empty() ? "" : " ") + c.name + ":" + status_name(c.status);
    }
  row.push_back(failed);
  std::string hints;  // "chapter:TODO=level ..."
  for (const auto& ch : g.chapters)
    for (const auto& [todo, level] : ch.hints)
      hints += fmt::format("{}{}:{}={}", hints.empty() ? "" : " ", ch.name, todo, level);
  row.push_back(hints);
  row.push_back(rejected.empty()
                    ? "graded"
                    : std::string(status_name(Status::rejected_submission)) + ": " + rejected);
  row.push_back(fmt::format("{:.1f}", g.execution_seconds));
  row.push_back(std::to_string(g.seed));
  row.push_back(g.hidden_seed ? std::to_string(*g.hidden_seed) : "");
  return row;
}

std::string csv_field(const std::string& raw) {
  std::string s =
      valid_utf8(raw);  // names and messages can hold any bytes; spreadsheets want UTF-8
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string r = "\"";
  for (char c : s) {
    if (c == '"') r += '"';
    r += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return r + "\"";
}

std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cur += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

int shard_of(const std::string& submission, int shards) {
  return static_cast<int>(fnv1a64(submission) % static_cast<std::uint64_t>(std::max(1, shards)));
}

void parse_shard(const std::string& text, BatchOptions& opts) {
  int i = 0, n = 0;
  char slash = 0, extra = 0;
  std::istringstream in(text);
  if (!(in >> i >> slash >> n) || slash != '/' || (in >> extra) || n < 1 || i < 1 || i > n)
    throw std::runtime_error(
        "--shard " + text +
        ": expected I/N with 1 <= I <= N, e.g. --shard 2/4 for the second of four");
  opts.shard = i - 1;
  opts.shards = n;
}

std::size_t merge_gradebooks(const std::vector<fs::path>& inputs, const fs::path& out) {
  if (inputs.empty()) throw std::runtime_error("merge: give the gradebooks of the shards to join");
  std::string header;
  std::map<std::string, std::pair<std::string, fs::path>> rows;  // submission -> (line, from)
  for (const auto& in : inputs) {
    std::ifstream f(in);
    if (!f) throw std::runtime_error("merge: cannot read " + in.string());
    std::string line;
    bool first = true;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      if (first) {
        if (!header.empty() && line != header)
          throw std::runtime_error(
              fmt::format("merge: {} has other columns than {}; shards of one batch grade the same "
                          "chapters with the same rubric",
                          in.string(), inputs.front().string()));
        header = line;
        first = false;
        continue;
      }
      const std::string name = csv_split(line).at(0);
      auto [it, fresh] = rows.try_emplace(name, line, in);
      if (!fresh && it->second.first != line)
        throw std::runtime_error(
            fmt::format("merge: {} is graded differently in {} and {}; keep one of the rows", name,
                        it->second.second.string(), in.string()));
    }
  }
  std::string text = header + "\n";
  for (const auto& [name, row] : rows) text += row.first + "\n";
  write_text(out, text);
  return rows.size();
}

std::string batch_display_name(const std::string& raw) {
  std::string s = valid_utf8(raw);
  std::replace_if(
      s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return s;
}

std::string batch_report_stem(const std::string& name) {
  // Under NAME_MAX (255) with ".json": a name of invalid bytes triples in size (U+FFFD each).
  constexpr std::size_t kMax = 200;
  std::string stem = safe_name(name);
  if (stem.size() <= kMax) return stem;
  return stem.substr(0, kMax - 17) + fmt::format("_{:016x}", fnv1a64(name));
}

BatchNames unique_batch_names(const std::vector<std::string>& raw,
                              const std::vector<std::string>& file_names) {
  BatchNames out;
  std::map<std::string, std::vector<std::size_t>> by_report;  // report stem -> indices
  for (std::size_t i = 0; i < raw.size(); ++i) {
    out.names.push_back(batch_display_name(raw[i]));
    by_report[batch_report_stem(out.names.back())].push_back(i);
  }
  // A name alone keeps it; each of a clashing group gets "~" and a hash of its file name, or,
  // where another submission already holds that name (one named like the suffixed form), the
  // hash of its file name and a count: every submission ends with a name of its own, none is
  // refused, and a folder always gets the same name in a batch that holds the same entries
  // (the shards and a resume agree).
  std::set<std::string> taken;
  for (const auto& [report, idx] : by_report)
    if (idx.size() == 1) taken.insert(report);
  for (const auto& [report, idx] : by_report) {
    if (idx.size() < 2) continue;
    std::string who;
    for (std::size_t i : idx) {
      const std::string& file = i < file_names.size() ? file_names[i] : raw[i];
      std::string name;
      for (int k = 0; name.empty() || !taken.insert(batch_report_stem(name)).second; ++k) {
        const std::string salted = k == 0 ? file : fmt::format("{}\n{}", file, k);
        name = fmt::format("{}~{:08x}", out.names[i], fnv1a64(salted) & 0xffffffffu);
      }
      out.names[i] = name;
      who += fmt::format("{}'{}' as '{}'", who.empty() ? "" : ", ", valid_utf8(file), name);
    }
    out.collisions.push_back(
        fmt::format("{} submissions would share the report name {}; graded apart, {}", idx.size(),
                    report, who));
  }
  return out;
}

namespace {

// One gradebook line: the fields quoted as CSV needs, without the newline.
std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (const auto& f : fields) line += (line.empty() ? "" : ",") + csv_field(f);
  return line;
}

/// A submission of the batch.
struct Sub {
  std::string name;  ///< unique: the gradebook row, the report's name, the student id
  fs::path path;
  std::string raw;        ///< the folder's name or the zip's stem, as found
  std::string collision;  ///< when the name was disambiguated: why, for the report
};

/// The submissions (folders and .zip files) in b.dir that belong to b's shard, sorted by name.
std::vector<Sub> shard_submissions(const BatchOptions& b) {
  if (!fs::is_directory(b.dir))
    throw std::runtime_error(
        fmt::format("grade-batch: {} is not a folder of submissions", b.dir.string()));
  std::vector<Sub> all;
  for (const auto& e : fs::directory_iterator(b.dir)) {
    std::string fn = e.path().filename().string();
    if (fn.empty() || fn[0] == '.') continue;
    // Error codes, not exceptions: an entry that cannot be looked at (a link that loops) is no
    // submission, and must not stop the batch.
    std::error_code ec;
    if (e.is_directory(ec))
      all.push_back({"", e.path(), fn, ""});
    else if (e.is_regular_file(ec) && e.path().extension() == ".zip")
      all.push_back({"", e.path(), e.path().stem().string(), ""});
  }
  // Names are made unique over the whole folder, before sharding, so every shard agrees.
  std::sort(all.begin(), all.end(), [](const Sub& x, const Sub& y) {
    return x.raw != y.raw ? x.raw < y.raw : x.path < y.path;
  });
  std::vector<std::string> raws, files;
  for (const auto& s : all) {
    raws.push_back(s.raw);
    files.push_back(s.path.filename().string());
  }
  BatchNames names = unique_batch_names(raws, files);
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i].name = names.names[i];
    if (all[i].name != batch_display_name(all[i].raw))
      all[i].collision = fmt::format(
          "graded as '{}': another submission in the batch has a name that cleans to the same "
          "report name",
          all[i].name);
  }
  for (const auto& c : names.collisions) std::fprintf(stderr, "grade-batch: %s\n", c.c_str());
  std::vector<Sub> subs;
  for (const auto& s : all)
    if (shard_of(s.name, b.shards) == b.shard) subs.push_back(s);
  std::sort(subs.begin(), subs.end(), [](const Sub& x, const Sub& y) { return x.name < y.name; });
  return subs;
}

/// Resume: the submissions already in the gradebook b.csv, which must have header_line (set
/// have_header when it has one). A row cut short by a crash mid-write is dropped first.
std::set<std::string> graded_before(const BatchOptions& b, const std::string& header_line,
                                    bool& have_header) {
  std::set<std::string> done;
  have_header = false;
  if (fs::exists(b.csv)) {
    // A row cut short by a crash mid-write is dropped, so that submission is graded again.
    std::string text = read_text(b.csv);
    if (!text.empty() && text.back() != '\n')
      write_text(b.csv, text.substr(0, text.rfind('\n') + 1));
    std::ifstream in(b.csv);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (!have_header) {
        if (line != header_line)
          throw std::runtime_error(
              fmt::format("grade-batch: {} has other columns ({}); grade into a new file or "
                          "select the same chapters",
                          b.csv.string(), line));
        have_header = true;
        continue;
      }
      done.insert(csv_split(line).at(0));
    }
  }
  return done;
}

/// The gradebook line of submission s, graded in the student tree `slot` (its JSON report
/// written too when b asks for reports). A submission that cannot be graded at all (a corrupt zip)
/// still gets every column, its status saying why.
std::string grade_row(const Sub& s, const std::string& slot, const Project& project,
                      const Rubric& rubric, Reference& reference, const GradeOptions& opts,
                      const BatchOptions& b, const std::vector<std::string>& blocks) {
  std::vector<std::string> row;
  try {
    // A rejected upload comes back as a grade whose cases are all rejected-submission.
    Grade g =
        grade_submission(s.path, slot, project, rubric, reference, opts.for_student(s.name), false);
    if (!s.collision.empty()) g.notes.push_back(s.collision);
    row = csv_row(s.name, g, blocks);
    if (!b.reports.empty())
      write_text(b.reports / (batch_report_stem(s.name) + ".json"), json_report(g).dump(2));
  } catch (const std::exception& e) {
    Grade none;
    none.seed = opts.seed;
    row = csv_row(s.name, none, blocks);
    const std::vector<std::string> header = csv_header(blocks);
    row[std::find(header.begin(), header.end(), "status") - header.begin()] =
        std::string("error: ") + e.what();
  }
  return csv_line(row);
}

// The gradebook's score columns: the selected chapters, then the GPU labs (graded after them).
std::vector<std::string> gradebook_blocks(const Rubric& rubric, const GradeOptions& opts,
                                          const std::vector<const ChapterSpec*>& chapters) {
  std::vector<std::string> blocks;
  for (const auto* c : chapters) blocks.push_back(c->name);
  if (gpu_labs_selected(rubric, opts.chapters)) blocks.push_back("gpu_labs");
  return blocks;
}

// The gradebook file, to which any worker appends whole lines, each on disk before it returns (a
// crash loses at most the row being written, which a resume drops).
class GradebookFile {
 public:
  explicit GradebookFile(const fs::path& csv)
      : csv_(csv), fd_(::open(csv.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
    if (fd_ < 0)
      throw std::runtime_error("grade-batch: cannot open " + csv.string() + " for appending");
  }
  GradebookFile(const GradebookFile&) = delete;
  GradebookFile& operator=(const GradebookFile&) = delete;
  ~GradebookFile() { ::close(fd_); }

  void append(const std::string& line) {
    std::lock_guard lock(mu);
    std::string l = line + "\n";
    if (::write(fd_, l.data(), l.size()) != static_cast<ssize_t>(l.size()))
      throw std::runtime_error("grade-batch: cannot append to " + csv_.string());
    ::fsync(fd_);
  }

  std::mutex mu;  // also keeps the progress line whole

 private:
  fs::path csv_;
  int fd_;
};

// The submissions of subs not in the gradebook yet, with a line on stderr saying how many.
std::vector<Sub> still_to_grade(const std::vector<Sub>& subs, const std::set<std::string>& done,
                                const BatchOptions& b) {
  std::vector<Sub> todo;
  for (const auto& s : subs)
    if (!done.count(s.name)) todo.push_back(s);
  std::fprintf(stderr, "grade-batch: %zu submissions%s, %zu already in %s, %zu to grade\n",
               subs.size(),
               b.shards > 1 ? fmt::format(" in shard {}/{}", b.shard + 1, b.shards).c_str() : "",
               subs.size() - todo.size(), b.csv.c_str(), todo.size());
  return todo;
}

// f of n graded, the last one `last`: a bar redrawn in place on a terminal, a line per
// submission in a log.
void show_progress(std::size_t f, std::size_t n, const std::string& last, bool tty) {
  if (tty) {
    int width = 30;
    int fill = n ? static_cast<int>(width * f / n) : width;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu %-30.30s", std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), f, n, last.c_str());
    if (f == n) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "grade-batch: %zu/%zu %s\n", f, n, last.c_str());
  }
}

}  // namespace

int grade_batch(const BatchOptions& b, const Project& project, const Rubric& rubric,
                const GradeOptions& opts) {
  const std::vector<Sub> subs = shard_submissions(b);
  auto chapters = select_chapters(rubric, opts.chapters);
  const std::vector<std::string> blocks = gradebook_blocks(rubric, opts, chapters);
  const std::string header_line = csv_line(csv_header(blocks));

  // Resume: rows already in the gradebook are done.
  bool have_header = false;
  const std::set<std::string> done = graded_before(b, header_line, have_header);
  GradebookFile book(b.csv);
  if (!have_header) book.append(header_line);
  const std::vector<Sub> todo = still_to_grade(subs, done, b);

  Reference reference(project, rubric, opts);
  double ref_s = reference.prepare(chapters, opts);
  std::fprintf(stderr, "grade-batch: reference results for seed %llu ready (%.1f s)%s\n",
               static_cast<unsigned long long>(opts.seed), ref_s,
               opts.secret.empty() ? "" : "; hidden cases get each student's secret seed");

  const bool tty = ::isatty(2) == 1;
  std::atomic<std::size_t> finished{0};
  GradeOptions worker_opts = opts;
  worker_opts.jobs = 1;  // parallel across submissions, sequential inside one
  // Each worker owns one cached student build tree (slot) for every submission it grades.
  parallel_for(todo.size(), b.jobs, [&](std::size_t i, int slot) {
    const auto& s = todo[i];
    book.append(grade_row(s, fmt::format("batch-slot-{}", slot), project, rubric, reference,
                          worker_opts, b, blocks));
    ++finished;
    std::lock_guard lock(book.mu);
    show_progress(finished.load(), todo.size(), s.name, tty);
  });
  return static_cast<int>(todo.size());
}

}  // namespace mgpu::grade
