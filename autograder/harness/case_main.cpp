// main() of every case program: `cases_<chapter> --case NAME --seed S --result-fd N
// [--rank-program PATH]`. Runs one case and writes exactly one JSON document to fd N (a pipe the
// grader opened), then exits. stdout and stderr belong to the student's code and are only ever
// shown as feedback.
//
// Without --rank-program (the reference, the instructor's proofs) everything runs here, ranks as
// threads. A student's case runs in the host program (cases_<chapter>_host, linked without
// chapter code) given `--rank-program`, the chapter's case program with the student's code: each
// rank of run_ranks (rank_code.hpp) starts as that program with `--rank-body NAME`, each student
// call with `--call NAME`, and a plain case the host does not hold runs there whole with
// `--plain-case NAME`, each in a folder of its own under the case's.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <typeinfo>

#include <sys/stat.h>

#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/type_name.hpp"
#include "rank_code.hpp"
#include "sandbox/landlock.hpp"
#include "untrusted.hpp"

namespace {

using mgpu::detail::type_name;
using mgpu::grade::detail::write_all;

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --case NAME [--seed S] --result-fd N [--rank-program PATH]   (or "
               "the seed in MGPU_CASE_SEED)\n"
               "       %s --list\n"
               "Runs one graded case and writes its result as JSON to file descriptor N.\n"
               "--rank-program PATH runs the student code of the case (its ranks, its calls, a\n"
               "plain case whole) as the program PATH, never here.\n"
               "(--rank-body, --plain-case and --call are how such a program is started.)\n",
               argv0, argv0);
  return 2;
}

/// What the command line asks for.
struct Args {
  std::string name;
  std::uint64_t seed = 0;
  int fd = -1;
  std::string rank_program;  // host: the program ranks and plain cases run as
  std::string rank_body;     // a rank of a host's run
  std::string plain_case;    // a plain case run whole for a host
  std::string call;          // a student call made for a host
};

/// Reads the command line into `args`; returns the exit status when the program is done
/// already (--list, or a usage error), -1 when a case is to run.
int parse_args(int argc, char** argv, Args& args) {
  bool has_seed_arg = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--list") {
      for (const auto& n : mgpu::grade::case_names()) std::printf("%s\n", n.c_str());
      return 0;
    }
    if (i + 1 >= argc) return usage(argv[0]);
    if (a == "--case")
      args.name = argv[++i];
    else if (a == "--seed")
      args.seed = std::strtoull(argv[++i], nullptr, 10), has_seed_arg = true;
    else if (a == "--result-fd")
      args.fd = std::atoi(argv[++i]);
    else if (a == "--rank-program")
      args.rank_program = argv[++i];
    else if (a == "--rank-body")
      args.rank_body = argv[++i];
    else if (a == "--plain-case")
      args.plain_case = argv[++i];
    else if (a == "--call")
      args.call = argv[++i];
    else
      return usage(argv[0]);
  }
  // The grader passes the seed in the environment, which no other user can read: a command line
  // is readable by every process of the machine (/proc/<pid>/cmdline).
  if (const char* env = std::getenv("MGPU_CASE_SEED"); env && !has_seed_arg)
    args.seed = std::strtoull(env, nullptr, 10);
  if (!args.rank_body.empty() || !args.plain_case.empty() || !args.call.empty()) return -1;
  if (args.name.empty() || args.fd < 0) return usage(argv[0]);
  return -1;
}

/// In a process of student code started by the host: works in its own folder under the case's
/// (rank r of every run of the case in the same one), made when missing, and, where the kernel
/// has Landlock, reaches no other: not another rank's folder, not the case's /tmp, through which
/// ranks could pass each other their inputs. The system, /proc and the rank program stay readable.
void enter_own_folder(const std::string& name) {
  if ((::mkdir(name.c_str(), 0700) != 0 && errno != EEXIST) || ::chdir(name.c_str()) != 0)
    throw std::runtime_error("cannot make its working folder " + name + ": " +
                             std::strerror(errno));
  mgpu::grade::FsView view = mgpu::grade::case_view(std::filesystem::current_path());
  view.read_only.push_back(mgpu::grade::rank_program());
  mgpu::grade::confine_to(view);
}

/// Runs the case `fn` and returns its result, or what escaped it, with its "status".
nlohmann::json run_case(const Args& args, mgpu::grade::CaseFn fn) {
  mgpu::grade::Ctx ctx(args.name, args.seed);
  nlohmann::json out;
  try {
    if (!fn) {
      out = mgpu::grade::run_plain_case_program(args.rank_program, args.name, args.seed,
                                                [] { mgpu::grade::enter_folder("plain"); });
    } else {
      fn(ctx);
      out = ctx.result();
    }
    out["status"] = "ok";
  } catch (const mgpu::grade::UnreadableResult& e) {
    out = {{"status", "no-result"}, {"message", e.what()}};
  } catch (const mgpu::grade::CaughtElsewhere& e) {
    out = {{"status", "exception"}, {"type", e.type()}, {"message", e.what()}};
  } catch (const mgpu::NotImplemented& e) {
    out = {{"status", "not-implemented"}, {"message", e.what()}};
  } catch (const std::bad_alloc& e) {
    out = {{"status", "out-of-memory"}, {"message", e.what()}};
  } catch (const std::exception& e) {
    out = {{"status", "exception"}, {"type", type_name(typeid(e))}, {"message", e.what()}};
  } catch (...) {
    out = {{"status", "exception"},
           {"type", "unknown"},
           {"message", "a non-standard exception escaped the case"}};
  }
  return out;
}

/// A rank of a host's run (Cluster::run_programs): runs the rank body `name` on its input.
int serve_rank_body(const std::string& name) {
  return mgpu::serve_rank([&](mgpu::Rank& rank, std::string_view input) {
    const mgpu::grade::RankBodyFn fn = mgpu::grade::find_rank_body(name);
    if (!fn) throw std::logic_error("this case program has no rank body named '" + name + "'");
    fn(rank, nlohmann::json::from_msgpack(input.begin(), input.end()));
  });
}

/// A plain case run whole for a host: its result is the answer (untrusted.hpp), on kAnswerFd.
[[noreturn]] void answer_plain_case(const Args& args) {
  mgpu::grade::detail::answer(mgpu::grade::detail::kAnswerFd, [&] {
    auto fn = mgpu::grade::find_case(args.plain_case);
    if (!fn)
      throw std::logic_error("this case program has no case named '" + args.plain_case + "'");
    // An isolated case keeps a meter its judgement rests on: run whole here, in the student's
    // program, its measures would be the student's to write. Its host program must hold it.
    if (mgpu::grade::case_isolated(args.plain_case))
      throw std::logic_error("case '" + args.plain_case +
                             "' is isolated: it runs in the host program (a *.host.cpp file with "
                             "its rank code in rank bodies), never whole in a rank program");
    mgpu::grade::Ctx ctx(args.plain_case, args.seed);
    fn(ctx);
    return ctx.result();
  });
}

/// A student call made for a host: its input on kInputFd, its value the answer on kAnswerFd.
[[noreturn]] void answer_call(const std::string& name) {
  mgpu::grade::detail::answer(mgpu::grade::detail::kAnswerFd, [&] {
    const mgpu::grade::StudentCallFn fn = mgpu::grade::find_student_call(name);
    if (!fn) throw std::logic_error("this case program has no student call named '" + name + "'");
    const std::string input = mgpu::grade::detail::read_input();
    return fn(nlohmann::json::from_msgpack(input));
  });
}

/// Writes `out` to the result descriptor and ends the program.
[[noreturn]] void deliver(int fd, const nlohmann::json& out) {
  std::cout.flush();
  std::fflush(nullptr);
  write_all(fd, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  ::close(fd);
  // Skip static destructors: the result is out, and nothing the student left behind may spoil it.
  std::_Exit(out["status"] == "unknown-case" ? 3 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  // No other process of this uid may read or write this one's memory through /proc/<pid>/mem or
  // read its environment: not a rank or student call from its host, not a rank from a peer.
  // Landlock refuses that across confined processes too; this holds where a kernel lacks it.
  ::prctl(PR_SET_DUMPABLE, 0);
  Args args;
  if (const int done = parse_args(argc, argv, args); done >= 0) return done;
  if (!args.rank_body.empty()) return serve_rank_body(args.rank_body);
  if (!args.plain_case.empty()) answer_plain_case(args);
  if (!args.call.empty()) answer_call(args.call);

  auto fn = mgpu::grade::find_case(args.name);
  if (!args.rank_program.empty())
    mgpu::grade::set_rank_program(args.rank_program, enter_own_folder);
  // No process of student code this one starts may write the result: each gets only its own
  // descriptors (runtime/src/isolation.cpp, untrusted.cpp), and this one is closed at exec.
  ::fcntl(args.fd, F_SETFD, FD_CLOEXEC);
  if (!fn && args.rank_program.empty()) {
    deliver(args.fd, {{"status", "unknown-case"},
                      {"message", "this case program has no case named '" + args.name + "'"}});
  }
  deliver(args.fd, run_case(args, fn));
}
