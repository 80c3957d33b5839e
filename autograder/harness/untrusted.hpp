// Student code that runs outside Cluster::run, in a process of its own when the case program was
// started with `--ranks processes` (a student's graded run). The case's own process keeps the
// meter, the ledger, the clock and the result; a chapter function called there could leave
// something behind (a thread that edits the result later, a changed runtime default). Run in a
// fork, it leaves nothing: only its return value comes back, as JSON, and its exception as the
// same kind (NotImplemented, std::invalid_argument, std::bad_alloc; any other as CaughtElsewhere,
// which the case program reports under the original type's name).
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "case.hpp"

namespace mgpu::grade {

/// True when untrusted() runs its call in a process of its own (the case program's
/// `--ranks processes`); false in threads mode, and inside such a process.
bool untrusted_in_processes();
/// Called by the case program once, before the case runs. `result_fd` is the descriptor the
/// result goes to: closed in every process untrusted() starts, so nothing there can write to it.
void set_untrusted_in_processes(bool on, int result_fd);

/// An exception of another type than the three untrusted() rethrows as themselves, thrown by
/// student code in its own process: what() is its message, type() the original type's name.
class CaughtElsewhere : public std::runtime_error {
 public:
  /// `type` is the thrown exception's type name, `message` its what().
  CaughtElsewhere(std::string type, const std::string& message)
      : std::runtime_error(message), type_(std::move(type)) {}
  /// The name of the type that was thrown in the student's process.
  const std::string& type() const { return type_; }

 private:
  std::string type_;
};

/// What came back from the process of student code could not be read as what it should be
/// (bytes that are not one JSON document, a value of the wrong shape, measures from a plain
/// case): the case program reports no result, with this as the reason.
class UnreadableResult : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Writes all of `s` to `fd`, retrying short writes; stops quietly when the reader is gone.
void write_all(int fd, const std::string& s);
/// Runs `body` in a forked process and returns the JSON it returned; rethrows what it threw (see
/// the file comment). If that process was killed by a signal, this process dies of the same
/// signal; if it exited without an answer (exit() in student code), this process exits with the
/// same code, writing no result: the grader sees what it would have seen without the fork.
nlohmann::json run_in_child(const std::function<nlohmann::json()>& body);
/// Where a program started by run_program writes its answer, and reads its input (not 3, a case
/// program's result descriptor: code writing a result there fails instead of garbling the answer).
constexpr int kAnswerFd = 10;
constexpr int kInputFd = 11;
/// Runs the program argv (argv[0] its path; before_start first, in its process) with nothing of
/// this process but the answer pipe at kAnswerFd and a socket at kInputFd that gives `input`, and
/// returns its answer as run_in_child does.
nlohmann::json run_program(const std::vector<std::string>& argv,
                           const std::function<void()>& before_start, const std::string& input = {});
/// In such a program: everything at kInputFd.
std::string read_input();
/// Runs `body`, writes its answer (the value it returned, or what it threw) to out_fd and ends
/// the process: the side of run_in_child's child, and of a program run_program started.
[[noreturn]] void answer(int out_fd, const std::function<nlohmann::json()>& body);
}  // namespace detail

/// Calls `f` (student code outside Cluster::run) and returns what it returns. With
/// untrusted_in_processes(), `f` runs in a process of its own and its return value comes back
/// through nlohmann::json (to_json / from_json must exist for it); otherwise it is a plain call.
template <class F>
std::invoke_result_t<F> untrusted(F&& f) {
  using T = std::invoke_result_t<F>;
  if (!untrusted_in_processes()) return std::forward<F>(f)();
  if constexpr (std::is_void_v<T>) {
    detail::run_in_child([&] {
      f();
      return nlohmann::json();
    });
  } else {
    nlohmann::json value = detail::run_in_child([&] { return nlohmann::json(f()); });
    try {
      return value.get<std::remove_cvref_t<T>>();
    } catch (const nlohmann::json::exception& e) {
      throw UnreadableResult(std::string("the return value of student code run in its own "
                                         "process could not be read back: ") +
                             e.what());
    }
  }
}

/// Runs a plain case's body with untrusted_in_processes(): in a process of its own, of which only
/// the values (and any measure its own code computed) come back, checked (names, dtypes,
/// numbers) and rebuilt here; anything else is refused (UnreadableResult).
nlohmann::json run_plain_case(CaseFn fn, Ctx& ctx);
/// The same for a plain case the host program does not hold (case_main.cpp): it runs in the
/// program `rank_program` (`--plain-case NAME`), with the seed in its environment.
nlohmann::json run_plain_case_program(const std::string& rank_program, const std::string& name,
                                      std::uint64_t seed, const std::function<void()>& before_start);

}  // namespace mgpu::grade
