// The exception every student skeleton throws until its body is written.
// Tests and the grader recognise it, so an unfinished exercise reads as "not implemented",
// never as a crash or a wrong answer.
#pragma once

#include <stdexcept>
#include <string>

namespace mgpu {

/// Thrown by a skeleton function whose body is still a TODO.
///
/// The message is "not implemented: <section> <todo>", e.g.
/// "not implemented: 11.2 ring_reduce_scatter": the section and the id of the TODO the body
/// holds, the name `./mgpu hint` opens (`./mgpu hint --check` fails on any other).
class NotImplemented : public std::logic_error {
 public:
  /// @param what_to_do the section and the TODO id, e.g. "11.2 ring_reduce_scatter".
  explicit NotImplemented(const std::string& what_to_do)
      : std::logic_error("not implemented: " + what_to_do) {}
};

}  // namespace mgpu
