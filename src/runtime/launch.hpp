// src/runtime/launch.hpp: one checked GEMM on a loaded module: the ABI arguments, host tensors staged through the
// device, the launch on the caller's stream, host D copied back, and the synchronisation asked for.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "gemmkit/enums.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "runtime/kernel_module.hpp"
#include "runtime/staging.hpp"

namespace gemmkit::runtime {

// One operand of an epilogue visitor tree (gk_visitor_operand): a tensor, staged when it lives on the host and copied
// back when the tree writes it, or a value. `fill_byte`: an output the kernel accumulates into (a reduction's atomics)
// is first set to this byte throughout.
struct VisitorOperand {
  std::optional<LaunchOperand> tensor;
  bool output = false;
  double value = 0.0;
  std::optional<unsigned char> fill_byte;
};

struct GemmLaunch {
  LaunchOperand a, b, d;
  std::optional<LaunchOperand> c, bias, row_scale, column_scale;
  bool d_has_gaps = false;  // a host D whose rows have gaps is copied in, so the gaps come back unchanged
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transposed = false;  // the kernel computes D^T = B^T A^T: A and B swap places
  double alpha = 1.0, beta = 0.0, activation_parameter = 0.0;
  // What a module that takes its epilogue at launch applies (the kernel's view: a transposed plan's bias is swapped).
  Activation activation = Activation::Identity;
  BiasMode bias_mode = BiasMode::None;
  RasterOrder raster_order = RasterOrder::Heuristic;
  int max_swizzle_size = 1;
  KSplit k_split;  // Stream-K kernels: decomposition and split count (other kernels ignore them)
  ReductionMode reduction_mode = ReductionMode::Deterministic;
  int device = 0, sm_count = 0;
  std::vector<VisitorOperand> visitor;  // one per tree node of a visitor-tree module, else empty
};

// Runs `gemm` on `stream`. Host tensors cannot be staged into a stream being captured (TensorError, before anything
// runs); host D holds the result on return, and with host tensors or `sync` the stream is synchronised (unless it
// is being captured: nothing has run yet).
void launch(KernelModule& module, const GemmLaunch& gemm, cudaStream_t stream, bool sync, const Workspace& workspace);

}  // namespace gemmkit::runtime
