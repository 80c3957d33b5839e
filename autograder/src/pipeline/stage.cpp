// Stage: a submission's files (a folder or a zip) copied onto the pristine skeleton in a scratch
// folder, chapter by chapter and lab by lab; the submission itself is never touched, and nothing
// of it is built here.
#include "pipeline/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "pipeline/pristine.hpp"
#include "pipeline/unpack.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {

namespace {

// The folder of a submission that holds the chapter folders.
fs::path find_chapters_root(const fs::path& top, const Rubric& rubric) {
  std::vector<fs::path> candidates{top, top / "chapters"};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(top, ec))
    if (e.is_directory() && !e.is_symlink()) {
      candidates.push_back(e.path());
      candidates.push_back(e.path() / "chapters");
    }
  for (const auto& c : candidates)
    for (const auto& ch : rubric.chapters)
      if (fs::is_directory(c / ch.name, ec)) return c;
  return {};
}

// The folder the submission's files are read from: the folder itself, or where its zip (given,
// or the one zip in a folder without chapter folders: Gradescope keeps a zip inside a zip as a
// file) was unpacked. Both checks throw RejectedSubmission for a link, a `..` path or a
// submission over the caps.
fs::path unpacked_top(const fs::path& submission, const fs::path& scratch, const Rubric& rubric,
                      std::vector<std::string>& notes) {
  std::error_code ec;
  if (fs::is_regular_file(submission) && submission.extension() == ".zip") {
    extract_zip(submission, scratch / "unzipped");
    return scratch / "unzipped";
  }
  if (!fs::is_directory(submission))
    throw std::runtime_error(
        fmt::format("submission {} is neither a folder nor a .zip file; pass the folder holding "
                    "your chapter folders, or the zip that `./mgpu submit` wrote",
                    submission.string()));
  check_submission_folder(submission);
  std::vector<fs::path> zips;
  for (const auto& e : fs::directory_iterator(submission, ec))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() == ".zip")
      zips.push_back(e.path());
  if (!find_chapters_root(submission, rubric).empty() || zips.size() != 1) return submission;
  extract_zip(zips.front(), scratch / "unzipped");
  notes.push_back(fmt::format("graded the files inside {}", zips.front().filename().string()));
  return scratch / "unzipped";
}

using SubmittedFiles = std::map<std::string, std::map<std::string, fs::path>>;  // chapter, file

// Files named as exactly one chapter's manifest names them, loose in `top` (Gradescope uploads
// of single files arrive flat); the note says what was graded, and what was not and why.
SubmittedFiles loose_files(const fs::path& top, const Rubric& rubric,
                           std::vector<std::string>& notes) {
  SubmittedFiles found;
  std::vector<std::string> loose, ambiguous;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(top, ec)) {
    if (!e.is_regular_file() || e.is_symlink()) continue;
    const std::string name = e.path().filename().string();
    std::vector<std::string> owners;
    for (const auto& ch : rubric.chapters)
      if (std::find(ch.files.begin(), ch.files.end(), name) != ch.files.end())
        owners.push_back(ch.name);
    if (owners.size() == 1) {
      found[owners.front()][name] = e.path();
      loose.push_back(name + " -> " + owners.front());
    } else if (owners.size() > 1) {
      ambiguous.push_back(name);
    }
  }
  std::string note = fmt::format(
      "no chapter folder found in the submission (expected chapters/<chapter>/<file>, "
      "as `./mgpu submit` writes it)");
  if (!loose.empty()) {
    note += "; loose files graded by name:";
    for (const auto& l : loose) note += " " + l;
  }
  for (const auto& a : ambiguous)
    note += fmt::format(
        "; {} belongs to several chapters and was not graded: put it in chapters/<chapter>/", a);
  if (loose.empty()) note += "; every chapter is graded as the skeleton";
  notes.push_back(note);
  return found;
}

// The submitted files per chapter: from chapter folders, or else loose files.
SubmittedFiles submitted_files(const fs::path& top, const Rubric& rubric,
                               std::vector<std::string>& notes) {
  const fs::path src_root = find_chapters_root(top, rubric);
  if (src_root.empty()) return loose_files(top, rubric, notes);
  SubmittedFiles found;
  for (const auto& ch : rubric.chapters)
    for (const auto& f : ch.files) found[ch.name][f] = src_root / ch.name / f;
  return found;
}

// Writes every chapter the build knows (the whole chapters/ tree) into `chapters_dir`: the
// committed skeleton's .cpp files (pristine.hpp), never the working chapters/, with the
// submitted files of the rubric's chapters on top. Returns the chapters a file was taken for.
std::vector<std::string> write_staged_chapters(const SubmittedFiles& found,
                                               const fs::path& chapters_dir, const Rubric& rubric,
                                               const Project& project, const fs::path& pristine) {
  std::vector<std::string> taken;
  std::error_code ec;
  std::map<std::string, fs::path> skeletons;
  for (const auto& e : fs::directory_iterator(pristine_dir(project, pristine, "chapters"), ec))
    if (e.is_directory()) skeletons[e.path().filename().string()] = e.path();
  for (const auto& ch : rubric.chapters)
    skeletons[ch.name] = pristine_dir(project, pristine, ch.skeleton);
  for (const auto& [name, skel] : skeletons) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(skel, ec))
      if (e.is_regular_file() && e.path().extension() == ".cpp")
        files[e.path().filename().string()] = read_text(e.path());
    const auto submitted = found.find(name);
    bool any = false;
    if (rubric.chapter(name) && submitted != found.end())
      for (const auto& [f, p] : submitted->second) {
        // Checked when unpacked; checked again because a folder can change after the check.
        if (fs::is_symlink(p) || !fs::is_regular_file(p) || fs::hard_link_count(p) > 1) continue;
        if (fs::file_size(p) > kMaxSubmissionFileBytes) continue;
        files[f] = read_text(p);
        any = true;
      }
    if (any) taken.push_back(name);
    const fs::path dest = chapters_dir / name;
    fs::create_directories(dest);
    for (const auto& e : fs::directory_iterator(dest, ec))
      if (!files.count(e.path().filename().string())) fs::remove_all(e.path(), ec);
    for (const auto& [f, text] : files) write_if_changed(dest / f, text);
  }
  return taken;
}

// Writes each GPU lab's files into gpu_labs_dir/<lab>/: the pristine file, or the submission's
// copy found first under top/gpu_labs/<lab>/, top/<lab>/ (loose) or <folder>/gpu_labs/<lab>/ for a
// folder directly in top.
void write_staged_labs(const GpuLabsSpec& spec, const fs::path& top, const fs::path& gpu_labs_dir,
                       const Project& project, const fs::path& pristine) {
  std::vector<fs::path> roots{top / "gpu_labs", top};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(top, ec))
    if (e.is_directory() && !e.is_symlink()) roots.push_back(e.path() / "gpu_labs");
  for (const auto& [lab, files] : spec.files) {
    fs::create_directories(gpu_labs_dir / lab);
    for (const auto& f : files) {
      std::string text = read_text(pristine_dir(project, pristine, fs::path("gpu_labs") / lab) / f);
      for (const auto& r : roots) {
        fs::path p = r / lab / f;
        if (!fs::is_symlink(p) && fs::is_regular_file(p) &&
            fs::file_size(p) <= kMaxSubmissionFileBytes) {
          text = read_text(p);
          break;
        }
      }
      write_if_changed(gpu_labs_dir / lab / f, text);
    }
  }
}

}  // namespace

Staged stage_submission(const fs::path& submission, const fs::path& scratch, const Rubric& rubric,
                        const Project& project, const fs::path& pristine,
                        const GpuLabsSpec* gpu_labs) {
  std::error_code ec;
  // The submission's folder (src/ and its build trees) is the grader's alone between builds.
  fs::create_directories(scratch, ec);
  fs::permissions(scratch.parent_path(), fs::perms::owner_all, fs::perm_options::replace, ec);
  Staged st;
  st.top = unpacked_top(submission, scratch, rubric, st.notes);
  st.chapters_dir = scratch / "chapters";
  st.chapters_found = write_staged_chapters(submitted_files(st.top, rubric, st.notes),
                                            st.chapters_dir, rubric, project, pristine);
  if (gpu_labs) {
    st.gpu_labs_dir = scratch / "gpu_labs";
    write_staged_labs(*gpu_labs, st.top, st.gpu_labs_dir, project, pristine);
  }
  return st;
}

}  // namespace mgpu::grade
