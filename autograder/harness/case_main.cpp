// main() of every case program: `cases_<chapter> --case NAME --seed S --result-fd N
// [--ranks threads|processes]`. With `--ranks processes`, a case registered with
// MGPU_CASE_ISOLATED runs each rank of its clusters in a process of its own.
// Runs one case and writes exactly one JSON document to fd N (a pipe the grader opened), then
// exits. stdout and stderr belong to the student's code and are only ever shown as feedback.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <typeinfo>

#include "case.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/type_name.hpp"
#include "untrusted.hpp"

namespace {

using mgpu::detail::type_name;
using mgpu::grade::detail::write_all;

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --case NAME [--seed S] --result-fd N [--ranks threads|processes]   (or "
               "the seed in MGPU_CASE_SEED)\n"
               "       %s --list\n"
               "Runs one graded case and writes its result as JSON to file descriptor N.\n"
               "--ranks processes runs each rank of an isolated case in a process of its own.\n",
               argv0, argv0);
  return 2;
}

/// What the command line asks for.
struct Args {
  std::string name;
  std::uint64_t seed = 0;
  int fd = -1;
  bool processes = false;
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
    else if (a == "--ranks" && std::strcmp(argv[i + 1], "threads") == 0)
      args.processes = (++i, false);
    else if (a == "--ranks" && std::strcmp(argv[i + 1], "processes") == 0)
      args.processes = (++i, true);
    else
      return usage(argv[0]);
  }
  // The grader passes the seed in the environment, which no other user can read: a command line
  // is readable by every process of the machine (/proc/<pid>/cmdline).
  if (const char* env = std::getenv("MGPU_CASE_SEED"); env && !has_seed_arg)
    args.seed = std::strtoull(env, nullptr, 10);
  if (args.name.empty() || args.fd < 0) return usage(argv[0]);
  return -1;
}

/// Runs the case `fn` and returns its result, or what escaped it, with its "status".
nlohmann::json run_case(const Args& args, mgpu::grade::CaseFn fn, bool isolated) {
  mgpu::grade::Ctx ctx(args.name, args.seed);
  nlohmann::json out;
  try {
    if (args.processes && !isolated) {
      out = mgpu::grade::run_plain_case(fn, ctx);
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
  Args args;
  if (const int done = parse_args(argc, argv, args); done >= 0) return done;

  auto fn = mgpu::grade::find_case(args.name);
  const bool isolated = mgpu::grade::case_isolated(args.name);
  if (args.processes && isolated) mgpu::set_default_rank_isolation(mgpu::RankIsolation::processes);
  // Student code outside Cluster::run (a plain case's whole body, the chapter calls an isolated
  // case makes before or after its runs) runs in processes of its own: this process, which keeps
  // the books and writes the result, runs none.
  mgpu::grade::set_untrusted_in_processes(args.processes, args.fd);
  // Nor may a rank process write the result: the runtime closes in each one every descriptor
  // marked close-on-exec (runtime/src/isolation.cpp). This program execs nothing.
  ::fcntl(args.fd, F_SETFD, FD_CLOEXEC);
  if (!fn) {
    deliver(args.fd, {{"status", "unknown-case"},
                      {"message", "this case program has no case named '" + args.name + "'"}});
  }
  deliver(args.fd, run_case(args, fn, isolated));
}
