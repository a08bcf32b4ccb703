// src/runtime/launch.cpp: ABI arguments, staging of host tensors, the launch and the synchronisation of one GEMM.
#include "runtime/launch.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "runtime/cuda_check.hpp"
#include "runtime/workspace.hpp"

namespace gemmkit::runtime {
namespace {

// The ABI numbers activations and bias modes as gemmkit's enums do.
static_assert(static_cast<int>(Activation::GELU) == GK_ACTIVATION_GELU &&
              static_cast<int>(Activation::Identity) == GK_ACTIVATION_IDENTITY &&
              static_cast<int>(Activation::LeakyReLU) == GK_ACTIVATION_LEAKY_RELU &&
              static_cast<int>(Activation::GELUTanh) == GK_ACTIVATION_GELU_TANH);
static_assert(static_cast<int>(BiasMode::PerRow) == GK_BIAS_PER_ROW &&
              static_cast<int>(BiasMode::PerColumn) == GK_BIAS_PER_COLUMN);

bool any_on_host(const GemmLaunch& gemm) {
  const bool visitor_on_host = std::any_of(gemm.visitor.begin(), gemm.visitor.end(),
                                           [](const VisitorOperand& v) { return v.tensor && !v.tensor->on_device; });
  return !gemm.a.on_device || !gemm.b.on_device || !gemm.d.on_device || (gemm.c && !gemm.c->on_device) ||
         (gemm.bias && !gemm.bias->on_device) || (gemm.row_scale && !gemm.row_scale->on_device) ||
         (gemm.column_scale && !gemm.column_scale->on_device) || visitor_on_host;
}

}  // namespace

void launch(KernelModule& module, const GemmLaunch& gemm, cudaStream_t stream, bool sync, const Workspace& workspace) {
  const bool any_host = any_on_host(gemm);
  refuse_staging_under_capture(any_host, stream);
  Staging staging(stream);
  gk_gemm_args args{};
  args.m = static_cast<int32_t>(gemm.m);
  args.n = static_cast<int32_t>(gemm.n);
  args.k = static_cast<int32_t>(gemm.k);
  args.batch = static_cast<int32_t>(gemm.batch);
  args.A = staging.on_device(gemm.a);
  args.B = staging.on_device(gemm.b);
  args.D = staging.on_device(gemm.d, gemm.d_has_gaps);
  if (gemm.c) args.C = staging.on_device(*gemm.c);
  args.lda = gemm.a.ld;
  args.ldb = gemm.b.ld;
  args.ldc = gemm.c ? gemm.c->ld : gemm.d.ld;
  args.ldd = gemm.d.ld;
  args.batch_stride_A = gemm.a.batch_stride;
  args.batch_stride_B = gemm.b.batch_stride;
  args.batch_stride_C = gemm.c ? gemm.c->batch_stride : 0;
  args.batch_stride_D = gemm.d.batch_stride;
  if (gemm.transposed) {
    std::swap(args.m, args.n);
    std::swap(args.A, args.B);
    std::swap(args.lda, args.ldb);
    std::swap(args.batch_stride_A, args.batch_stride_B);
  }
  args.alpha = gemm.alpha;
  args.beta = gemm.beta;
  args.activation_params[0] = gemm.activation_parameter;
  args.activation = static_cast<int32_t>(gemm.activation);
  args.bias_mode = static_cast<int32_t>(gemm.bias_mode);
  args.device_id = gemm.device;
  args.sm_count = gemm.sm_count;
  if (gemm.bias) args.bias = staging.on_device(*gemm.bias);
  if (gemm.row_scale) args.row_scale = staging.on_device(*gemm.row_scale);
  if (gemm.column_scale) args.column_scale = staging.on_device(*gemm.column_scale);
  if (gemm.transposed) std::swap(args.row_scale, args.column_scale);
  args.raster_order = static_cast<int32_t>(gemm.raster_order);
  args.max_swizzle_size = gemm.max_swizzle_size;
  // The ABI numbers decompositions as CUTLASS does (Heuristic = 0, ...): one less than gemmkit's, whose Auto is
  // resolved before a launch.
  args.splits = std::max(1, gemm.k_split.splits);
  args.decomposition = std::max(0, static_cast<int32_t>(gemm.k_split.mode) - 1);
  args.reduction = static_cast<int32_t>(gemm.reduction_mode);
  std::vector<gk_visitor_operand> visitor(gemm.visitor.size());
  for (std::size_t i = 0; i < gemm.visitor.size(); ++i) {
    const VisitorOperand& v = gemm.visitor[i];
    visitor[i].value = v.value;
    if (!v.tensor) continue;
    visitor[i].ptr = staging.on_device(*v.tensor);
    visitor[i].ld = v.tensor->ld;
    visitor[i].batch_stride = v.tensor->batch_stride;
    if (v.fill_byte) GK_CUDA_CHECK(cudaMemsetAsync(visitor[i].ptr, *v.fill_byte, v.tensor->bytes(), stream));
  }
  if (!visitor.empty()) {
    args.visitor = visitor.data();
    args.visitor_count = static_cast<int32_t>(visitor.size());
  }
  module.run(args, stream, workspace);

  // Host outputs are copied back and land before return; device outputs sync if asked.
  if (!gemm.d.on_device) staging.copy_back(gemm.d, args.D);
  for (std::size_t i = 0; i < gemm.visitor.size(); ++i) {
    const VisitorOperand& v = gemm.visitor[i];
    if (v.output && v.tensor && !v.tensor->on_device) staging.copy_back(*v.tensor, visitor[i].ptr);
  }
  // A stream being captured into a graph cannot be synchronised (and nothing has run yet).
  if (any_host || (sync && !is_capturing(stream))) GK_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gemmkit::runtime
