// Student code in programs of its own (untrusted.hpp). The host never runs student code: it reads
// one JSON document from a pipe, checks its depth before parsing it, and rebuilds from it only
// what the case may hand back.
#include "untrusted.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <system_error>
#include <typeinfo>

#include "mgpu/not_implemented.hpp"
#include "mgpu/type_name.hpp"

namespace mgpu::grade {

namespace detail {

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace detail

namespace {

using detail::write_all;
using mgpu::detail::type_name;

// Deeper than any value a case returns, shallow enough that parsing cannot exhaust the stack.
constexpr int kMaxDepth = 64;
// More than any case returns; the grader's own cap on a result is far below it.
constexpr std::size_t kMaxBytes = std::size_t{256} << 20;

}  // namespace

// Runs the body, writes {"value": ...} or {"thrown": kind, "type", "message"} to out_fd, exits.
void detail::answer(int out_fd, const std::function<nlohmann::json()>& body) {
  nlohmann::json doc;
  auto thrown = [&](const char* kind, const std::string& type, const std::string& message) {
    doc = {{"thrown", kind}, {"type", type}, {"message", message}};
  };
  try {
    doc = {{"value", body()}};
  } catch (const mgpu::NotImplemented& e) {
    thrown("not-implemented", "mgpu::NotImplemented", e.what());
  } catch (const std::invalid_argument& e) {
    thrown("invalid-argument", "std::invalid_argument", e.what());
  } catch (const std::bad_alloc& e) {
    thrown("bad-alloc", "std::bad_alloc", e.what());
  } catch (const CaughtElsewhere& e) {
    thrown("other", e.type(), e.what());
  } catch (const std::exception& e) {
    thrown("other", type_name(typeid(e)), e.what());
  } catch (...) {
    thrown("other", "unknown", "a non-standard exception escaped the case");
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  write_all(out_fd, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  ::close(out_fd);
  std::_Exit(0);  // the answer is out: nothing the student left behind may spoil it
}

namespace {

// Nesting depth of a JSON text, strings skipped: checked before parsing, which recurses.
int json_depth(const std::string& text) {
  int depth = 0, most = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      most = std::max(most, ++depth);
      if (most > kMaxDepth) return most;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return most;
}

// Reads everything the child writes until it exits (a process it left behind may hold the pipe
// open: it is not waited for), and its wait status.
std::string read_child(int fd, pid_t pid, int& status) {
  std::string bytes;
  char buf[1 << 16];
  bool exited = false, eof = false;
  while (!eof) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, exited ? 0 : 50);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
      } else if (bytes.size() < kMaxBytes) {
        bytes.append(buf, static_cast<std::size_t>(n));
      }
      continue;
    }
    if (exited) break;  // exited and nothing left to read
    if (::waitpid(pid, &status, WNOHANG) == pid) exited = true;
  }
  if (!exited)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  return bytes;
}

// The child ended without an answer: end this process the same way, so the grader sees a crash,
// a kill or an exit before the result, as it would have without the fork.
[[noreturn]] void end_like(int status) {
  std::cout.flush();
  std::fflush(nullptr);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::kill(::getpid(), sig);
    std::_Exit(128 + sig);  // a signal whose default is to be ignored
  }
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

const std::string kNotImplemented = "not implemented: ";

// The answer a process of student code wrote to fd, once it has ended: its value, or what it
// threw rethrown here (see untrusted.hpp).
nlohmann::json answer_of(int fd, pid_t pid) {
  int status = 0;
  const std::string bytes = read_child(fd, pid, status);
  ::close(fd);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) || bytes.empty()) end_like(status);
  if (bytes.size() >= kMaxBytes)
    throw UnreadableResult("student code run in its own process sent back more than " +
                           std::to_string(kMaxBytes >> 20) + " MiB");
  if (json_depth(bytes) > kMaxDepth)
    throw UnreadableResult(
        "student code run in its own process sent back JSON nested deeper "
        "than " +
        std::to_string(kMaxDepth) + " levels");
  nlohmann::json doc = nlohmann::json::parse(bytes, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    throw UnreadableResult(
        "student code run in its own process sent back bytes that are not "
        "one JSON object");
  if (doc.size() == 1 && doc.contains("value")) return std::move(doc["value"]);
  auto text = [&](const char* key) {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_string())
      throw UnreadableResult(std::string("student code run in its own process sent back an "
                                         "answer without a string '") +
                             key + "'");
    return it->get<std::string>();
  };
  const std::string kind = text("thrown"), type = text("type"), message = text("message");
  if (kind == "not-implemented") {
    const bool prefixed = message.rfind(kNotImplemented, 0) == 0;
    throw mgpu::NotImplemented(prefixed ? message.substr(kNotImplemented.size()) : message);
  }
  if (kind == "invalid-argument") throw std::invalid_argument(message);
  if (kind == "bad-alloc") throw std::bad_alloc();
  throw CaughtElsewhere(type, message);
}

}  // namespace

nlohmann::json detail::run_program(const std::vector<std::string>& argv,
                                   const std::function<void()>& before_start,
                                   const std::string& input) {
  int answer[2], given[2];
  if (::pipe2(answer, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "mgpu: pipe for student code");
  // A socket, not a pipe, for the input: a program that ends before reading it makes the write
  // fail (MSG_NOSIGNAL) instead of raising SIGPIPE here.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, given) != 0) {
    ::close(answer[0]);
    ::close(answer[1]);
    throw std::system_error(errno, std::generic_category(), "mgpu: socket for student code");
  }
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {answer[0], answer[1], given[0], given[1]}) ::close(fd);
    throw std::system_error(errno, std::generic_category(), "mgpu: fork for student code");
  }
  if (pid == 0) {
    // Nothing of this process but the answer pipe and the input reach the program.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int out = ::fcntl(answer[1], F_DUPFD, 20), in = ::fcntl(given[1], F_DUPFD, 20);
    if (out < 0 || in < 0 || ::dup2(out, kAnswerFd) < 0 || ::dup2(in, kInputFd) < 0) std::_Exit(71);
    ::close_range(3, kAnswerFd - 1, 0);
    ::close_range(kInputFd + 1, ~0U, 0);
    try {
      if (before_start) before_start();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mgpu: student code could not start: %s\n", e.what());
      std::_Exit(71);
    }
    std::vector<std::string> args = argv;
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(cargs[0], cargs.data());
    std::fprintf(stderr, "mgpu: could not start %s: %s\n", cargs[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(answer[1]);
  ::close(given[1]);
  for (std::size_t at = 0; at < input.size();) {
    const ssize_t n = ::send(given[0], input.data() + at, input.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the program has gone: its answer (or its end) tells
    at += static_cast<std::size_t>(n);
  }
  ::close(given[0]);
  return answer_of(answer[0], pid);
}

std::string detail::read_input() {
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(kInputFd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(kInputFd);
  return bytes;
}

namespace {

bool plain_number(const nlohmann::json& v) {
  return v.is_number() || (v.is_string() && (v == "nan" || v == "inf" || v == "-inf"));
}

// One emitted value, rebuilt from its known fields only; throws UnreadableResult otherwise.
nlohmann::json checked_value(const std::string& name, const nlohmann::json& v) {
  auto refuse = [&](const std::string& why) {
    return UnreadableResult("the case's value '" + name + "' from its own process " + why);
  };
  if (!v.is_object()) throw refuse("is not an object");
  for (const auto& [key, field] : v.items())
    if (key != "dtype" && key != "data" && key != "index")
      throw refuse("has a field '" + key + "'");
  const auto dtype = v.find("dtype");
  if (dtype == v.end() || !(*dtype == "bf16" || *dtype == "fp32" || *dtype == "fp64"))
    throw refuse("has no dtype bf16, fp32 or fp64");
  const auto data = v.find("data");
  if (data == v.end()) throw refuse("has no data");
  nlohmann::json out = {{"dtype", *dtype}};
  if (data->is_array()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& x : *data) {
      if (!plain_number(x)) throw refuse("holds something other than a number");
      list.push_back(x);
    }
    out["data"] = std::move(list);
  } else if (plain_number(*data)) {
    out["data"] = *data;
  } else {
    throw refuse("holds something other than a number");
  }
  if (const auto index = v.find("index"); index != v.end()) {
    if (*index != "rank") throw refuse("has an index other than \"rank\"");
    out["index"] = "rank";
  }
  return out;
}

}  // namespace

namespace {

/// A plain case's result as its process sent it back, checked and rebuilt.
nlohmann::json checked_plain_result(const nlohmann::json& doc) {
  if (!doc.is_object()) throw UnreadableResult("the case's process sent back no result object");
  for (const auto& [key, field] : doc.items())
    if (key != "values" && key != "measures")
      throw UnreadableResult("the case's process sent back a field '" + key + "'");
  const auto values = doc.find("values");
  if (values == doc.end() || !values->is_object())
    throw UnreadableResult("the case's process sent back no values");
  nlohmann::json out = {{"values", nlohmann::json::object()},
                        {"measures", nlohmann::json::object()}};
  for (const auto& [name, v] : values->items()) out["values"][name] = checked_value(name, v);
  // A plain case keeps no meter: a measure it reports (the toy chapter's count of reads) is what
  // its own code computed from the student's answers, no more trusted here than in one process.
  // Only numbers come back.
  if (const auto measures = doc.find("measures"); measures != doc.end()) {
    if (!measures->is_object()) throw UnreadableResult("the case's measures are not an object");
    for (const auto& [name, m] : measures->items()) {
      if (!plain_number(m))
        throw UnreadableResult("the case's measure '" + name + "' is not a number");
      out["measures"][name] = m;
    }
  }
  return out;
}

}  // namespace

nlohmann::json run_plain_case_program(const std::string& rank_program, const std::string& name,
                                      std::uint64_t seed,
                                      const std::function<void()>& before_start) {
  return checked_plain_result(detail::run_program({rank_program, "--plain-case", name}, [&] {
    ::setenv("MGPU_CASE_SEED", std::to_string(seed).c_str(), 1);
    if (before_start) before_start();
  }));
}

}  // namespace mgpu::grade
