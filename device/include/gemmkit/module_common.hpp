// device/include/gemmkit/module_common.hpp: helpers shared by every kernel family's module glue (host side).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/functional.h"
#include "gemmkit/abi.h"

// The entry points are the only symbols a module exports (it may be built with -fvisibility=hidden).
#define GK_EXPORT extern "C" __attribute__((visibility("default")))

namespace gemmkit::module {

// memcmp() on gk_gemm_args is only meaningful without padding bytes.
static_assert(sizeof(gk_gemm_args) == 4 * 4 + 4 * 8 + 8 * 8 + 4 * 8 + 8 + 8 * 4 + 2 * 8 + 8 + 2 * 4,
              "gk_gemm_args has padding");
static_assert(sizeof(gk_conv2d_args) == 16 * 4 + 4 * 8 + 4 * 8 + 4 * 4, "gk_conv2d_args has padding");

// The last CUDA error seen by this thread's calls into the module, for gk_last_cuda_error(). Internal linkage
// (one translation unit per module), so that no two loaded modules share it.
namespace {
thread_local cudaError_t last_cuda_error = cudaSuccess;
}  // namespace

// Records a failed CUDA call's error; returns true when there was one.
inline bool record_cuda_error(cudaError_t error) {
  if (error == cudaSuccess) return false;
  last_cuda_error = error;
  return true;
}

// The bias vector a module was built for, with respect to the kernel's own m x n problem: added to every row
// (PerColumn, length n) or to every column (PerRow, length m) of alpha * A@B + beta * C, before the activation.
enum class Bias { None, PerRow, PerColumn };

// The scale vectors a module was built for (SM90 kernels): the accumulator of output (i, j) is multiplied by
// row_scale[i] (PerRow), column_scale[j] (PerColumn) or both (RowAndColumn) before alpha.
enum class Scale { None, PerRow, PerColumn, RowAndColumn };

// A glue class's Scale: its kScale, or None for families without scale vectors.
template <class Glue, class = void>
inline constexpr Scale scale_of = Scale::None;
template <class Glue>
inline constexpr Scale scale_of<Glue, std::void_t<decltype(Glue::kScale)>> = Glue::kScale;

// A glue class's visitor-tree node count (kVisitorCount), or 0 for modules without a tree.
template <class Glue, class = void>
inline constexpr int visitor_count_of = 0;
template <class Glue>
inline constexpr int visitor_count_of<Glue, std::void_t<decltype(Glue::kVisitorCount)>> = Glue::kVisitorCount;

// Arguments checks common to every family: GK_OK or GK_ERR_ARGS. A module built with a bias, scale vectors or a
// visitor tree needs those vectors or the tree's operands (and no module takes operands it has no tree for); a bias
// asked for at launch needs its vector too.
inline int check_args(const gk_gemm_args* args, Bias bias, Scale scale = Scale::None, int visitor_count = 0) {
  if (args == nullptr || args->A == nullptr || args->B == nullptr || args->D == nullptr) return GK_ERR_ARGS;
  if (args->visitor_count != visitor_count || (visitor_count > 0 && args->visitor == nullptr)) return GK_ERR_ARGS;
  if ((bias != Bias::None || args->bias_mode != GK_BIAS_NONE) && args->bias == nullptr) return GK_ERR_ARGS;
  if ((scale == Scale::PerRow || scale == Scale::RowAndColumn) && args->row_scale == nullptr) return GK_ERR_ARGS;
  if ((scale == Scale::PerColumn || scale == Scale::RowAndColumn) && args->column_scale == nullptr) return GK_ERR_ARGS;
  if (args->m < 1 || args->n < 1 || args->k < 1 || args->batch < 1) return GK_ERR_ARGS;
  if (args->C == nullptr && args->beta != 0.0 && visitor_count == 0) return GK_ERR_ARGS;
  return GK_OK;
}

// The source operand: C, or D (with D's strides) when C is null, so that no null pointer reaches CUTLASS;
// with beta == 0 the kernels never read it.
struct Source {
  const void* ptr;
  int64_t ld;
  int64_t batch_stride;
};
inline Source source_of(const gk_gemm_args& args) {
  if (args.C != nullptr) return {args.C, args.ldc, args.batch_stride_C};
  return {args.D, args.ldd, args.batch_stride_D};
}

// Sets the activation's hyperparameters (today only LeakyReLU's slope) on a CUTLASS argument struct that
// may or may not carry them; activations without parameters ignore args.activation_params.
template <class T>
auto set_leaky_alpha(T& target, double slope, int) -> decltype(target.leaky_alpha = slope, void()) {
  using Element = std::remove_reference_t<decltype(target.leaky_alpha)>;
  target.leaky_alpha = Element(slope);
}
template <class T>
void set_leaky_alpha(T&, double, long) {}

template <class T, class Args>  // gk_gemm_args or gk_conv2d_args
void set_activation_params(T& target, const Args& args) {
  set_leaky_alpha(target, args.activation_params[0], 0);
}

// What a launch keeps between calls: CUTLASS's arguments, the family's prepared state (a CUTLASS operator or its
// Params), and whether the workspace must be initialized before every launch.
template <class Arguments, class State>
struct Prepared {
  Arguments arguments{};
  State state{};
  bool reset_workspace = false;
};

// The last prepared launch of this thread: the arguments it was prepared for (the ABI's gk_gemm_args, or
// gk_conv2d_args), the workspace it was bound to and the prepared state (a CUTLASS operator or its Params). A hit
// skips CUTLASS's host-side preparation.
template <class Prepared, class Args = gk_gemm_args>
struct LaunchCache {
  bool valid = false;
  Args args{};
  void* workspace = nullptr;
  int device = -1;
  Prepared prepared{};

  bool hit(const Args& next, void* next_workspace, int next_device) const {
    return valid && workspace == next_workspace && device == next_device &&
           std::memcmp(&args, &next, sizeof(Args)) == 0;
  }
  void store(const Args& next, void* next_workspace, int next_device) {
    args = next;
    workspace = next_workspace;
    device = next_device;
    valid = true;
  }
};

// Functors of one template parameter for visitor-tree compute and reduction nodes (CUTLASS's take two).
template <class T>
using Maximum = cutlass::maximum<T>;
template <class T>
using Minimum = cutlass::minimum<T>;

// How a CUTLASS 2.x device operator (the state of Prepared) is prepared and launched: its initialize() binds the
// arguments and zeroes the workspace (serial split-K semaphores, Stream-K barriers), cheap in 2.x (no TMA
// descriptors), so a relaunch that needs a fresh workspace prepares again. Without a workspace to reset, none is
// passed: CUTLASS would issue an empty memset for it.
template <class Prepared>
struct OperatorLaunch {
  static cutlass::Status prepare(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return prepared.state.initialize(prepared.arguments, prepared.reset_workspace ? workspace : nullptr, stream);
  }
  static cutlass::Status reset_workspace(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return prepare(prepared, workspace, stream);
  }
  static cutlass::Status launch(Prepared& prepared, cudaStream_t stream) { return prepared.state.run(stream); }
};

// A launch cache for a module with an epilogue visitor tree of Count nodes: a launch is prepared again whenever an
// operand of the tree changes too (the ABI arguments only point at them).
template <class Base, int Count>
struct VisitorCache : Base {
  gk_visitor_operand operands[Count] = {};
  bool hit(const gk_gemm_args& next, void* next_workspace, int next_device) const {
    return Base::hit(next, next_workspace, next_device) && next.visitor != nullptr &&
           std::memcmp(operands, next.visitor, sizeof(operands)) == 0;
  }
  void store(const gk_gemm_args& next, void* next_workspace, int next_device) {
    Base::store(next, next_workspace, next_device);
    std::memcpy(operands, next.visitor, sizeof(operands));
  }
};

// The device the calling thread currently targets (prepared state is per device); -1 on error.
inline int current_device() {
  int device = -1;
  if (record_cuda_error(cudaGetDevice(&device))) return -1;
  return device;
}

// Maps a CUTLASS status from a launch to the ABI, capturing the CUDA error that caused it.
inline int launch_status(cutlass::Status status) {
  cudaError_t error = cudaGetLastError();
  if (status == cutlass::Status::kSuccess && error == cudaSuccess) return GK_OK;
  // CUTLASS's launchers read (and so clear) the error themselves; keep whatever is left, else the error a launch
  // through the driver API (the split path) recorded in this call, else "unknown".
  if (error != cudaSuccess) {
    last_cuda_error = error;
  } else if (last_cuda_error == cudaSuccess) {
    last_cuda_error = cudaErrorUnknown;
  }
  return GK_ERR_LAUNCH;
}

// The entry points' work, the same for every family. `Glue` is a family's glue class (gemmkit_kernel::Module):
//   Gemm                        the CUTLASS device-level operator type
//   to_arguments(args)          ABI arguments -> Gemm::Arguments
//   Prepared, Cache             module::Prepared<Gemm::Arguments, its state> and module::LaunchCache of it
//   prepare(prepared, ws, s)    prepares a launch after a miss (CUTLASS's initialize(), which binds the workspace)
//   reset_workspace(p, ws, s)   re-initializes the workspace before a relaunch that needs it (Stream-K barriers)
//   launch(prepared, s)         launches the prepared kernel
template <class Glue, class Args>
int can_implement(const Args& args) {
  const auto status = Glue::Gemm::can_implement(Glue::to_arguments(args));
  return status == cutlass::Status::kSuccess ? GK_OK : GK_ERR_CANNOT_IMPLEMENT;
}

template <class Glue, class Args>
size_t workspace_size(const Args& args) {
  return Glue::Gemm::get_workspace_size(Glue::to_arguments(args));
}

// A failed CUTLASS initialize() (or workspace initialization), with the CUDA error that caused it.
inline int initialize_failed() {
  record_cuda_error(cudaGetLastError());
  return GK_ERR_INITIALIZE;
}

// A hit on this thread's last prepared launch skips CUTLASS's host-side preparation; only a workspace that must be
// reset before every launch is initialized again.
template <class Glue, class Args>
int run(typename Glue::Cache& cache, const Args& args, void* workspace, cudaStream_t stream) {
  last_cuda_error = cudaSuccess;  // read only after a failure of this call
  const int device = current_device();
  if (device < 0) return GK_ERR_LAUNCH;
  typename Glue::Prepared& prepared = cache.prepared;
  if (!cache.hit(args, workspace, device)) {
    cache.valid = false;
    prepared.arguments = Glue::to_arguments(args);
    if (Glue::Gemm::can_implement(prepared.arguments) != cutlass::Status::kSuccess) return GK_ERR_CANNOT_IMPLEMENT;
    prepared.reset_workspace = Glue::Gemm::get_workspace_size(prepared.arguments) > 0;
    if (prepared.reset_workspace && workspace == nullptr) return GK_ERR_WORKSPACE;
    if (Glue::prepare(prepared, workspace, stream) != cutlass::Status::kSuccess) return initialize_failed();
    cache.store(args, workspace, device);
  } else if (prepared.reset_workspace) {
    if (Glue::reset_workspace(prepared, workspace, stream) != cutlass::Status::kSuccess) return initialize_failed();
  }
  return launch_status(Glue::launch(prepared, stream));
}

}  // namespace gemmkit::module
