// The bf16 element type in full: Eigen's bfloat16 (conversions to and from float round to
// nearest even). Include this where bf16 values are made, read or reduced; mgpu/types.hpp only
// declares the type, so that code without bf16 arithmetic does not parse Eigen.
#pragma once

#include <Eigen/Core>

#include "mgpu/types.hpp"
