// include/gemmkit/gemmkit.hpp: every public header of gemmkit in one include (tests/CMakeLists.txt checks that none
// is missing).
#pragma once

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/enums.hpp"
#include "gemmkit/epilogue.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/packs.hpp"
#include "gemmkit/plan.hpp"
#include "gemmkit/results.hpp"
#include "gemmkit/tensor.hpp"
#include "gemmkit/tuning.hpp"
#include "gemmkit/types.hpp"
