// Names and sizes of the runtime's enumerations.
#include "mgpu/types.hpp"
#include "mgpu/clock.hpp"
#include "mgpu/traffic.hpp"

#include "collectives.hpp"  // operation names

namespace mgpu {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

std::string_view to_string(Category category) {
  switch (category) {
    case Category::weights:
      return "weights";
    case Category::grads:
      return "grads";
    case Category::master:
      return "master";
    case Category::optimizer:
      return "optimizer";
    case Category::activations:
      return "activations";
    case Category::comm:
      return "comm";
  }
  return "?";
}

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
      return 2;
  }
  return 0;
}

std::string_view to_string(Stream stream) {
  switch (stream) {
    case Stream::compute:
      return "compute";
    case Stream::comm:
      return "comm";
    case Stream::recv:
      return "recv";
    case Stream::network:
      return "network";
  }
  return "?";
}

std::string_view to_string(SpanKind kind) {
  switch (kind) {
    case SpanKind::compute:
      return "compute";
    case SpanKind::send:
      return "send";
    case SpanKind::recv:
      return "recv";
    case SpanKind::collective:
      return "collective";
    case SpanKind::idle:
      return "idle";
  }
  return "?";
}

std::string_view to_string(OpKind kind) {
  const detail::Collective* c = detail::find_collective(kind);
  return c ? c->name : "?";
}

}  // namespace mgpu
