// The name a report gives the type of an exception: a rank's in the processes mode
// (runtime/src/isolation.cpp), and the grader's case program names its own the same way.
#pragma once

#include <string>
#include <typeinfo>

namespace mgpu::detail {

/// The demangled name of `t` ("mgpu::NotImplemented"), or its mangled name when that fails.
std::string type_name(const std::type_info& t);

}  // namespace mgpu::detail
