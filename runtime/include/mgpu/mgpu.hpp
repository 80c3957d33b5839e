// Everything a chapter needs from the simulated cluster, in one include.
// Chapters include "mgpu/mgpu.hpp"; the parts are split by topic for readers of the runtime.
#pragma once

#include "mgpu/clock.hpp"
#include "mgpu/cluster.hpp"
#include "mgpu/comm.hpp"
#include "mgpu/memory.hpp"
#include "mgpu/not_implemented.hpp"
#include "mgpu/tensor.hpp"
#include "mgpu/traffic.hpp"
#include "mgpu/types.hpp"
