// Student code a host program runs outside Cluster::run: a plain case whole, or a student call
// (rank_code.hpp), each in a fresh program of its own (the chapter's case program, with the
// student's code) that is given its input over a socket and writes one answer on a pipe. Only
// that answer comes back: its value as JSON, or its exception as the same kind (NotImplemented,
// std::invalid_argument, std::bad_alloc; any other as CaughtElsewhere, which the case program
// reports under the original type's name). The host reads it with a bounded depth, and rebuilds
// from it only what the case may hand back.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "case.hpp"

namespace mgpu::grade {

/// An exception of another type than the three an answer rethrows as themselves, thrown by
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
/// Where a program started by run_program writes its answer, and reads its input (not 3, a case
/// program's result descriptor: code writing a result there fails instead of garbling the answer).
constexpr int kAnswerFd = 10;
constexpr int kInputFd = 11;
/// Runs the program argv (argv[0] its path; before_start first, in its process) with nothing of
/// this process but the answer pipe at kAnswerFd and a socket at kInputFd that gives `input`, and
/// returns its answer: the value it wrote, or its exception rethrown here. If the program was
/// killed by a signal, this process dies of the same signal; if it exited without an answer
/// (exit() in student code), this process exits with the same code, writing no result: the
/// grader sees what it would have seen had the code run here.
nlohmann::json run_program(const std::vector<std::string>& argv,
                           const std::function<void()>& before_start,
                           const std::string& input = {});
/// In such a program: everything at kInputFd.
std::string read_input();
/// Runs `body`, writes its answer (the value it returned, or what it threw) to out_fd and ends
/// the process: the side of a program run_program started.
[[noreturn]] void answer(int out_fd, const std::function<nlohmann::json()>& body);
}  // namespace detail

/// Runs a plain case the host program does not hold (case_main.cpp) in the program
/// `rank_program` (`--plain-case NAME`), with the seed in its environment: of its process only the
/// values (and any measure its own code computed) come back, checked (names, dtypes, numbers) and
/// rebuilt here; anything else is refused (UnreadableResult).
nlohmann::json run_plain_case_program(const std::string& rank_program, const std::string& name,
                                      std::uint64_t seed,
                                      const std::function<void()>& before_start);

}  // namespace mgpu::grade
